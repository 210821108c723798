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
//
// # Pulling
//
// A [Puller] owns a cache directory. [Puller.Pull] resolves a reference
// to the digest of the manifest for [Config.Platform] (an index is
// resolved to its matching manifest; none matching is ErrConfig naming
// the platforms it has), checks the layer count and compressed size
// against the caps before downloading anything, and downloads the
// config and the layers the cache lacks to blobs/sha256/<hex>. Each blob
// is written to a temporary file, verified against its digest and size,
// and renamed into place: the cache never holds a blob whose name is not
// its digest. Concurrent pulls needing one blob download it once.
//
// The pull policy says whether the registry is asked: PullIfNotPresent
// and PullNever use the digest the reference was last resolved to,
// recorded in refs.json, or the digest it names, when the cache still
// holds all of its blobs.
//
// Mirrors of a registry are tried in order before it; one that fails or
// lacks the image is passed over, and so is one that fails on a blob. Credentials come from the Docker
// config.json named by [Config.DockerConfig], or from the job
// ([PullOptions.Auth]); the job's are used for its pull only, sent only
// to the image's own registry, and never written or logged. The Puller
// does not retry: a failure is returned at once with its class, and
// retrying is the job policy's decision.
//
// A [Pulled] pins its blobs until [Pulled.Release]. The cache keeps the
// bytes of its blobs within [Config.Budget] by evicting the least
// recently used blobs that no Pulled pins; when what is pinned leaves no
// room for an image, its pull fails with ErrBudget before downloading.
package image

// # Root filesystems
//
// Unpack applies an image's layers, the base first, into an empty
// directory: files, directories, symlinks and hard links with their
// modes and times, and owners when the runner is root (a runner that is
// not root cannot give files away, and its jobs see its own user as
// every file's owner). OCI whiteouts (".wh.<name>") and opaque
// directories (".wh..wh..opq") hide what lower layers put there.
//
// Layers are untrusted, and unpacking follows the model of
// artifacts.Unpack: every write goes through an os.Root of the
// directory, and none goes through a symlink, wherever the symlink
// points. Symlinks are stored as the layer spells them, absolute ones
// included (/bin → usr/bin), and are only ever resolved later, inside
// the job's sandbox, where "/" is the image. Unpack refuses with an
// *UnsafeLayerError, which matches ErrUnsafeLayer and ErrConfig:
// absolute names and ".." segments, writes through a symlink, hard
// links to anything but an entry already in the root filesystem,
// device nodes and FIFOs (an image cannot bring devices: the sandbox
// gives a job the few it needs), and more content, entries or layers
// than its Limits. Content is counted as it is written, so a small
// layer inflating to gigabytes stops at the limit. The setuid and
// setgid bits of files are dropped unless Limits.KeepSetuid.
//
// A Rootfs unpacks each image once per digest into
// <Dir>/rootfs/<digest hex>, shared read-only by the jobs on the image.
// It builds a tree beside that place and renames it into place when
// whole and synced, so a crash leaves no partial tree under a digest's
// name; concurrent callers for one digest wait for one unpack.
//
// A View is one job's writable "/": an overlayfs mount over the root
// filesystem where the runner may mount (as root), else a full copy
// (ViewOptions.Copy forces it). A copy costs the image's size in time
// and disk per job; hard links would be cheaper but would let a job
// change the shared files. Close unmounts, lazily when a process still
// holds the mount, and removes what the job wrote.
