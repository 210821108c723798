// Package deploy holds the files that deploy the reference platform: plain
// Kubernetes manifests under kubernetes/, an example of the Secret they
// read, and the Dockerfile of the image. The package has no code; its
// test decodes every manifest strictly into the Kubernetes API types and
// checks that they fit together and with reference/config.
package deploy
