// Package image gives jobs the root filesystems of their container
// images on the runner itself, without a container engine: it resolves
// an image reference to the digest of the runner's platform, pulls its
// layers from an OCI registry into a content-addressed cache with a size
// budget, unpacks each image once into a read-only root filesystem that
// every job on it shares, and gives each job a writable view of that
// root filesystem, thrown away at the job's end.
//
// Registries are read with github.com/google/go-containerregistry. Layers
// are untrusted input: unpacking refuses what would land outside the
// root filesystem and bounds what an image may take.
package image
