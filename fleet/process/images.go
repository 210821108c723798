package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/runtime"
)

// Images configures how an executor runs jobs in container images: it
// resolves the image a job asks for (JobSpec.Image, with its
// ImageOptions), pulls it into a runner cache (package image), gives the
// job its own writable view of the image's root file system and runs the
// job's steps there (see Image), then throws the view away. Running
// images needs the sandbox (Config.Sandbox).
//
// The image of a job is, in order: its own (image:, GitHub's
// container:); the image Labels give the first of its runs-on labels
// that has one; Default. A job with none of them runs on the runner's
// host, as without Images, when Host allows it, and its log says so; it
// fails otherwise.
type Images struct {
	// Pull configures the cache and the registries: Pull.Dir is the
	// runner's image directory (required), which one executor owns at a
	// time. Its Platform defaults to the runner's.
	Pull image.Config
	// Limits bound each image's root file system (size, entries,
	// layers). Limits.Owner is set by the executor: the sandbox's user
	// owns the images it unpacks.
	Limits image.Limits
	// Default is the image of a job that names none (and that Labels
	// give none); "" for no default.
	Default string
	// Labels map runs-on labels to images, as act's -P does: a job
	// naming no image with runs-on: ubuntu-latest runs in
	// Labels["ubuntu-latest"].
	Labels map[string]string
	// Host lets a job that gets no image run on the runner's host.
	Host bool
	// PullPolicy is the pull policy of a job that asks for none.
	// Default: image.PullAlways, as GitLab's runner.
	PullPolicy image.PullPolicy
	// Copy gives each job a copy of its image instead of an overlay
	// mount (see image.ViewOptions.Copy); an executor that is not root
	// always copies.
	Copy bool
}

// openImages opens Config.Images' store, once the sandbox is known.
func (e *Executor) openImages() error {
	im := e.cfg.Images
	if im == nil {
		return nil
	}
	if e.sandbox == nil {
		why := "Config.Sandbox is not set"
		if e.unsandboxed != "" {
			why = "the sandbox is unavailable: " + e.unsandboxed
		}
		return fmt.Errorf("process: Config.Images needs the sandbox, and %s", why)
	}
	for label, ref := range im.Labels {
		if label == "" || ref == "" {
			return fmt.Errorf("process: Config.Images.Labels: %q=%q: a label and its image must not be empty", label, ref)
		}
	}
	switch im.PullPolicy {
	case "", image.PullAlways, image.PullIfNotPresent, image.PullNever:
	default:
		return fmt.Errorf("process: Config.Images.PullPolicy %q is none of %s, %s, %s", im.PullPolicy, image.PullAlways, image.PullIfNotPresent, image.PullNever)
	}
	lim := im.Limits
	if e.sandbox.uid >= 0 {
		lim.Owner = &image.Owner{UID: e.sandbox.uid, GID: e.sandbox.gid}
	} else {
		lim.Owner = nil
	}
	s, err := image.NewStore(im.Pull, lim)
	if err != nil {
		return fmt.Errorf("process: Config.Images: %w", err)
	}
	e.images = s
	return nil
}

// Close releases what the executor holds: the image directory of
// Config.Images. Jobs must not run after it.
func (e *Executor) Close() error {
	if e.images == nil {
		return nil
	}
	return e.images.Close()
}

// jobImage is the image a job runs in as prepared for it: its view,
// closed at the job's end.
type jobImage struct {
	prepared *image.Prepared
	ref      string
}

// imageRef returns the image a job of spec runs in under cfg, and where
// it came from ("" for none).
func imageRef(cfg *Images, spec *cikit.JobSpec) (ref, from string) {
	if spec.Image != "" {
		return spec.Image, "image"
	}
	for _, l := range spec.RunsOn {
		if ref := cfg.Labels[l]; ref != "" {
			return ref, "the runner's image for runs-on label " + l
		}
	}
	if cfg.Default != "" {
		return cfg.Default, "the runner's default image"
	}
	return "", ""
}

// resolveImage decides where the job runs: in the image Job.Image gives,
// in the image its spec and Config.Images give, which it pulls and makes
// the job's view of, or on the host. A failed result is returned with
// ok false.
func (j *jobRun) resolveImage(ctx context.Context) (res Result, ok bool) {
	e, spec := j.e, j.spec
	if j.job.Image != nil {
		return res, true
	}
	if e.images == nil {
		if spec.Image != "" {
			return j.fail(cikit.FailureInfrastructure, "this job runs in the image %s, and this runner runs no images: it has no image store (Config.Images)", spec.Image), false
		}
		return res, true
	}
	ref, from := imageRef(e.cfg.Images, spec)
	if ref == "" {
		if !e.cfg.Images.Host {
			return j.fail(cikit.FailureConfig, "this job names no image, and this runner runs jobs only in images: it has no default image and no image for the job's runs-on labels %q", spec.RunsOn), false
		}
		fmt.Fprintf(j.pw, "--- this job runs on the runner's host, not in an image: it names none, and the runner has no default image\n")
		return res, true
	}
	opts, err := j.pullOptions()
	if err != nil {
		return j.fail(cikit.FailureConfig, "image %s: %v", ref, err), false
	}
	if from != "image" {
		fmt.Fprintf(j.pw, "--- image: %s (%s)\n", ref, from)
	}
	fmt.Fprintf(j.pw, "--- pulling %s (pull policy %s)\n", ref, opts.Policy)
	start := time.Now()
	viewDir, err := j.viewDir("job")
	if err != nil {
		return j.fail(cikit.FailureInfrastructure, "image %s: %v", ref, err), false
	}
	p, err := e.images.Prepare(ctx, ref, opts, viewDir, image.ViewOptions{Copy: e.cfg.Images.Copy})
	if err != nil {
		return j.imageFailed(ctx, ref, err), false
	}
	j.img = &jobImage{prepared: p, ref: ref}
	view := "an overlay"
	if !p.View.Overlay() {
		view = "a copy"
	}
	fmt.Fprintf(j.pw, "--- image %s is %s (%s in %s; the job's view is %s)\n", ref, p.Digest, bytesString(p.Size), time.Since(start).Round(time.Millisecond), view)
	if err := p.View.Fallback(); err != nil {
		e.cfg.Logger.Warn("a job's image view is a copy: the overlay mount failed", "job", spec.ID, "err", err)
	}
	j.job.Image = processImage(spec, p)
	return res, true
}

// imageFailed returns the result of a job whose image could not be
// prepared, of the failure class err's says.
func (j *jobRun) imageFailed(ctx context.Context, ref string, err error) Result {
	switch {
	case ctx.Err() != nil && context.Cause(ctx) == errTimeout:
		return j.fail(cikit.FailureTimeout, "timed out after %s while the image %s was pulled", j.timeout, ref)
	case ctx.Err() != nil:
		r := j.fail("", "cancelled while the image %s was pulled", ref)
		r.State = cikit.JobCancelled
		return r
	case errors.Is(err, image.ErrConfig):
		return j.fail(cikit.FailureConfig, "%v", err)
	default: // ErrRegistry, ErrBudget, the runner's disk
		return j.fail(cikit.FailureInfrastructure, "%v", err)
	}
}

// pullOptions are the job's pull policy and registry credentials.
func (j *jobRun) pullOptions() (image.PullOptions, error) {
	opts := image.PullOptions{Policy: image.PullPolicy(j.e.cfg.Images.PullPolicy)}
	if opts.Policy == "" {
		opts.Policy = image.PullAlways
	}
	o := j.spec.ImageOptions
	if o == nil {
		return opts, nil
	}
	if len(o.PullPolicy) > 0 {
		// The job's first choice: the runner allows every policy.
		opts.Policy = image.PullPolicy(o.PullPolicy[0])
		switch opts.Policy {
		case image.PullAlways, image.PullIfNotPresent, image.PullNever:
		default:
			return opts, fmt.Errorf("pull_policy %q is none of %s, %s, %s", o.PullPolicy[0], image.PullAlways, image.PullIfNotPresent, image.PullNever)
		}
	}
	if c := o.Credentials; c != nil {
		user, pass, err := j.credentials(c)
		if err != nil {
			return opts, err
		}
		opts.Auth = &authn.Basic{Username: user, Password: pass}
	}
	return opts, nil
}

// credentials expands a job's registry credentials, GitHub's
// container.credentials, whose values are usually ${{ secrets.X }}, and
// masks what they expand to in the job's output.
func (j *jobRun) credentials(c *cikit.RegistryCredentials) (user, pass string, err error) {
	user, pass = c.Username, c.Password
	if j.github {
		if user, err = j.expandGitHub(c.Username); err != nil {
			return "", "", fmt.Errorf("credentials username: %v", err)
		}
		if pass, err = j.expandGitHub(c.Password); err != nil {
			return "", "", fmt.Errorf("credentials password: %v", err)
		}
	}
	if user == "" || pass == "" {
		return "", "", errors.New("credentials need both a username and a password: one of them is empty (is its secret set?)")
	}
	if err := j.masker.Add(pass); err != nil {
		return "", "", fmt.Errorf("credentials password cannot be masked in the job's output: %w", err)
	}
	// A user name is masked too when it is long enough; a shorter one is
	// no secret.
	_ = j.masker.Add(user)
	return user, pass, nil
}

// processImage is the Image a job runs in: p's view and config, with the
// job's overrides of GitLab's image:entrypoint and docker:user and
// GitHub's options --user.
func processImage(spec *cikit.JobSpec, p *image.Prepared) *Image {
	img := &Image{
		Rootfs:     p.View.Root(),
		Ref:        p.Ref,
		Digest:     p.Digest.String(),
		Env:        slices.Clone(p.Config.Env),
		WorkingDir: p.Config.WorkingDir,
		User:       p.Config.User,
		Entrypoint: slices.Clone(p.Config.Entrypoint),
	}
	if o := spec.ImageOptions; o != nil {
		if o.User != "" {
			img.User = o.User
		}
		switch {
		case len(o.Entrypoint) == 1 && strings.TrimSpace(o.Entrypoint[0]) == "":
			img.Entrypoint = nil // GitLab's [""]: no entrypoint
		case o.Entrypoint != nil:
			img.Entrypoint = slices.Clone(o.Entrypoint)
		}
	}
	return img
}

// viewsSuffix names the directory beside a job's own (Executor.newWorkspace)
// that holds the views of its image and its services' images: in
// WorkRoot, which the sandbox's user can reach, yet out of the job's
// sight. sweep removes it with a dead executor's workspace.
const viewsSuffix = ".cikit-views"

// viewDir returns the directory, not yet made, of the job's view name.
func (j *jobRun) viewDir(name string) (string, error) {
	views := j.root + viewsSuffix
	if err := os.MkdirAll(views, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(views, name), nil
}

// closeImage throws the job's view of its image away, and what is left
// of its services' views.
func (j *jobRun) closeImage() {
	if j.img != nil {
		if err := j.img.prepared.Close(); err != nil {
			j.e.cfg.Logger.Warn("the view of a job's image was not removed", "job", j.spec.ID, "image", j.img.ref, "dir", filepath.Dir(j.img.prepared.View.Root()), "err", err)
		}
	}
	j.e.removeViews(j.root)
}

// removeViews removes the views beside the job directory root, the
// mounts of those left mounted first.
func (e *Executor) removeViews(root string) {
	views := root + viewsSuffix
	entries, err := os.ReadDir(views)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, ent := range entries {
		if err := image.RemoveView(filepath.Join(views, ent.Name())); err != nil {
			e.cfg.Logger.Warn("a job's image view was not removed", "err", err)
		}
	}
	if err := os.Remove(views); err != nil && !errors.Is(err, os.ErrNotExist) {
		e.cfg.Logger.Warn("a job's image views were not removed", "dir", views, "err", err)
	}
}

// earlyGitHub returns the expression contexts of a GitHub job before its
// environment is set up, for what is evaluated before its sandbox starts.
func (j *jobRun) earlyGitHub() (*runtime.GitHub, error) {
	if j.early == nil {
		gh, err := runtime.NewGitHub(runtime.Params{Spec: j.spec, Context: j.job.Context, Workspace: j.ws, Temp: j.temp, Vars: j.job.Vars, Secrets: j.job.Secrets})
		if err != nil {
			return nil, err
		}
		j.early = gh
	}
	return j.early, nil
}
