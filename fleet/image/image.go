package image

import (
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Errors of the package, by failure class. Callers test with errors.Is;
// each is wrapped with what failed and, for a registry, its message.
var (
	// ErrConfig: the job's configuration is at fault and a retry cannot
	// help — an unknown repository or tag, no manifest for the runner's
	// platform, credentials the registry denies, a digest that does not
	// match, an image over the size or layer caps, an image not present
	// with pull policy never.
	ErrConfig = errors.New("image configuration")
	// ErrRegistry: the registry could not be reached or failed (a
	// network error, a 5xx, a 429): an infrastructure failure, which a
	// retry may mend.
	ErrRegistry = errors.New("registry unavailable")
	// ErrUnsafeLayer: a layer holds an entry that would land outside the
	// root filesystem, a device node, or more than the limits allow. It
	// is a configuration failure of the image, and matches ErrConfig.
	ErrUnsafeLayer = errors.New("unsafe image layer")
	// ErrBudget: the cache cannot hold the image within its budget even
	// after evicting every image no job uses.
	ErrBudget = errors.New("image cache budget exhausted")
)

// PullPolicy says when an image is pulled: GitLab's pull_policy.
type PullPolicy string

// Pull policies.
const (
	// PullAlways resolves the reference at the registry every time (a
	// tag may have moved); layers already cached are not downloaded
	// again. It is the default.
	PullAlways PullPolicy = "always"
	// PullIfNotPresent uses the image the cache resolved the reference
	// to before, without asking the registry, and pulls it otherwise.
	PullIfNotPresent PullPolicy = "if-not-present"
	// PullNever uses only what the cache holds: an image it does not
	// hold is ErrConfig.
	PullNever PullPolicy = "never"
)

// Image is an image resolved and pulled for the runner's platform.
type Image struct {
	// Ref is the reference as asked ("alpine:3.19"); Digest the digest
	// of the platform's manifest it resolved to, what a job records for
	// reproducibility.
	Ref    string
	Digest v1.Hash
	// Config is the image's run configuration: Env, WorkingDir, User,
	// Entrypoint, Cmd.
	Config v1.Config
	// Size is the compressed size of its layers, in bytes.
	Size int64
}
