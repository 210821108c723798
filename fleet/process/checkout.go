package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// Checkouter puts one commit of a repository into a directory. The
// executor calls it in its own process, outside the job's sandbox, before
// the job's first step (JobSpec.Checkout) or where a GitHub workflow's
// actions/checkout step runs; the sandbox needs no network for it, and
// the source's credential never reaches the job.
type Checkouter interface {
	// Checkout fetches req's commit into req.Dir. An error matching
	// ErrCommitNotFound (errors.Is) says that the commit or ref does not
	// exist: the job's configuration is wrong and no retry helps. Any
	// other error is the forge's or the runner's (unreachable, refused
	// credential, timeout): the job fails as an infrastructure failure.
	Checkout(ctx context.Context, req CheckoutRequest) (CheckoutResult, error)
}

// CheckoutRequest is one checkout.
type CheckoutRequest struct {
	// Source is the remote and its credential.
	Source *cikit.CheckoutSource
	// Repository is the repository's full name; SHA the commit; Ref the
	// ref it was built from (may be empty).
	Repository, SHA, Ref string
	// Options say how (depth, submodules, clean, another ref or
	// repository). Options.Path is already resolved into Dir.
	Options cikit.Checkout
	// Dir is the directory the commit goes to, inside the workspace.
	Dir string
	// Log receives progress lines for the job's log.
	Log io.Writer
}

// CheckoutResult is how a checkout ended.
type CheckoutResult struct {
	// Commit is the commit checked out.
	Commit string
	// Duration is how long it took.
	Duration time.Duration
}

// ErrCommitNotFound is matched by a Checkouter's error when the commit or
// ref asked for does not exist.
var ErrCommitNotFound = errors.New("commit not found")

// checkoutError is a failed checkout: its class decides whether the job
// is retried.
type checkoutError struct {
	class cikit.FailureClass
	err   error
}

func (e *checkoutError) Error() string { return "checkout: " + e.err.Error() }

// checkout puts the job's commit into the workspace as opts say, through
// Config.Checkout, and gives it to the sandbox's user.
func (j *jobRun) checkout(ctx context.Context, opts cikit.Checkout) error {
	e, jc := j.e, j.job.Context
	if e.cfg.Checkout == nil {
		return &checkoutError{cikit.FailureInfrastructure, errors.New("the job asks for its commit and this runner has no checkout configured (process.Config.Checkout)")}
	}
	dir := j.ws
	if opts.Path != "" {
		var err error
		if dir, err = inside(j.ws, opts.Path); err != nil {
			return &checkoutError{cikit.FailureConfig, fmt.Errorf("path: %w", err)}
		}
		opts.Path = ""
	}
	if err := e.checkoutDir(j.ws, dir); err != nil {
		return &checkoutError{cikit.FailureInfrastructure, err}
	}
	repo := jc.Repository
	if opts.Repository != "" && opts.Repository != jc.Repository {
		repo = opts.Repository
	}
	sha, ref := jc.SHA, jc.Ref
	if repo != jc.Repository {
		sha, ref = "", ""
	}
	if opts.Ref != "" {
		sha, ref = "", opts.Ref
	}
	started := time.Now()
	res, err := e.cfg.Checkout.Checkout(ctx, CheckoutRequest{
		Source: jc.Source, Repository: repo, SHA: sha, Ref: ref, Options: opts, Dir: dir, Log: j.pw,
	})
	if err != nil {
		class := cikit.FailureInfrastructure
		if errors.Is(err, ErrCommitNotFound) {
			class = cikit.FailureConfig
		}
		return &checkoutError{class, err}
	}
	if res.Duration == 0 {
		res.Duration = time.Since(started)
	}
	if err := e.ownTree(dir); err != nil {
		return &checkoutError{cikit.FailureInfrastructure, err}
	}
	if j.res.Commit == "" {
		j.res.Commit = res.Commit
	}
	j.res.CheckoutDuration += res.Duration
	fmt.Fprintf(j.pw, "--- checkout %s (%s)\n", res.Commit, res.Duration.Round(time.Millisecond))
	return nil
}

// checkoutDir makes dir, in ws, ready for a checkout by the executor's
// user: it exists, is the executor's (git refuses a work tree of another
// user's), and no directory on the way from ws is a symbolic link, which
// a job's step could have left to make the executor write elsewhere.
func (e *Executor) checkoutDir(ws, dir string) error {
	rel, err := filepath.Rel(ws, dir)
	if err != nil {
		return err
	}
	p := ws
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	if e.sandbox == nil || e.sandbox.uid < 0 {
		return nil
	}
	return os.Lchown(dir, os.Getuid(), os.Getgid())
}

// ownTree gives everything below dir to the sandbox's user, when that is
// not the executor's.
func (e *Executor) ownTree(dir string) error {
	if e.sandbox == nil || e.sandbox.uid < 0 {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return e.own(path)
	})
}

// inside returns rel joined under dir, or an error when it leaves dir.
func inside(dir, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q must be relative to the workspace", rel)
	}
	p := filepath.Join(dir, rel)
	if r, err := filepath.Rel(dir, p); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%q is outside the workspace", rel)
	}
	return p, nil
}

// isCheckoutAction reports whether uses names actions/checkout, at any
// version.
func isCheckoutAction(uses string) bool {
	name, _, _ := strings.Cut(uses, "@")
	return strings.EqualFold(name, "actions/checkout")
}

// checkoutInputs maps actions/checkout's inputs to a Checkout, and names
// the inputs it does not honour.
func checkoutInputs(with map[string]string, jobRepo string) (cikit.Checkout, []string, error) {
	opts := cikit.Checkout{Strategy: "fetch", Clean: true}
	var ignored []string
	for k, v := range with {
		v = strings.TrimSpace(v)
		switch k {
		case "ref":
			opts.Ref = v
		case "repository":
			if v != jobRepo {
				opts.Repository = v
			}
		case "path":
			opts.Path = v
		case "fetch-depth":
			n, err := strconv.Atoi(v)
			switch {
			case v == "":
			case err != nil || n < 0:
				return opts, nil, fmt.Errorf("fetch-depth %q is not a number of commits (0 for all history)", v)
			case n == 0:
				opts.Depth = -1
			default:
				opts.Depth = n
			}
		case "submodules":
			switch strings.ToLower(v) {
			case "", "false":
			case "true":
				opts.Submodules = "normal"
			case "recursive":
				opts.Submodules = "recursive"
			default:
				return opts, nil, fmt.Errorf("submodules %q is not true, false or recursive", v)
			}
		case "clean":
			switch strings.ToLower(v) {
			case "", "true":
			case "false":
				opts.Clean = false
			default:
				return opts, nil, fmt.Errorf("clean %q is not true or false", v)
			}
		default:
			ignored = append(ignored, k)
		}
	}
	return opts, ignored, nil
}
