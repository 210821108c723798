package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
)

// Checkouter puts one commit of a repository into a job's workspace;
// fleet/checkout's Checkouter is one. The executor calls it in its own
// process, outside the job's sandbox, before the job's first step
// (JobSpec.Checkout) or where a GitHub workflow's actions/checkout step
// runs: the sandbox needs no network for it, and the source's credential
// never reaches the job.
//
// An error is classed by checkout.Class: a commit, ref or repository
// that does not exist is the job's configuration (cikit.FailureConfig,
// not retried), anything else the forge's or the runner's
// (cikit.FailureInfrastructure).
type Checkouter interface {
	Checkout(ctx context.Context, req checkout.Request) (checkout.Result, error)
}

// ObjectCache is a Checkouter whose work trees borrow the objects of a
// cache on this host instead of holding copies of them (git's alternates,
// checkout.Result.Alternates), as fleet/checkout's does. In a sandbox, a
// job's git must see those objects: for the checkout before the job's
// first step, the executor asks ObjectDir where they will be and starts
// the sandbox, which shows that directory read-only at the same path,
// while the checkout runs. It does so when the sandbox's user may reach
// the directory (bubblewrap runs as that user); otherwise, for an
// actions/checkout step (which runs when the sandbox is already up) and
// for a Checkouter that is no ObjectCache, the checkout copies what it
// needs into the work tree (checkout.Request.Dissociate).
type ObjectCache interface {
	Checkouter
	// ObjectDir returns the object directory the work tree of req will
	// borrow from, which exists when it returns, without checking the
	// commit out; the Result.Alternates of the Checkout of req name it
	// and nothing else. Its errors are those Checkout would return.
	ObjectDir(ctx context.Context, req checkout.Request) (string, error)
}

// checkoutError is a failed checkout: its class decides whether the job
// is retried. The functions preparing the workspace return it as
// *checkoutError, nil when they succeed.
type checkoutError struct {
	class cikit.FailureClass
	err   error
}

// request is the checkout of the job's commit as opts say, into the
// workspace.
func (j *jobRun) request(opts cikit.Checkout) checkout.Request {
	e, jc := j.e, j.job.Context
	req := checkout.Request{
		Source: jc.Source, Repository: jc.Repository, SHA: jc.SHA, Ref: jc.Ref, Options: opts, Dir: j.ws, Log: j.pw,
		// Unless the sandbox shows the objects the work tree borrows.
		Dissociate: e.sandbox != nil,
	}
	if e.sandbox != nil && e.sandbox.uid >= 0 {
		req.Owner = &checkout.Owner{UID: e.sandbox.uid, GID: e.sandbox.gid}
	}
	return req
}

// shareObjects decides, before the sandbox starts, whether it shows the
// job's checkout the objects of the runner's cache (ObjectCache), and
// returns the directory to show; "" when the checkout copies them. The
// job's log says why when the sandbox's user cannot reach them.
func (j *jobRun) shareObjects(ctx context.Context, opts cikit.Checkout) (string, *checkoutError) {
	e := j.e
	oc, ok := e.cfg.Checkout.(ObjectCache)
	if e.sandbox == nil || !ok {
		return "", nil
	}
	dir, err := oc.ObjectDir(ctx, j.request(opts))
	if err != nil {
		return "", &checkoutError{checkout.Class(err), err}
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if e.sandbox.uid >= 0 {
		uid, gid = e.sandbox.uid, e.sandbox.gid
	}
	blocked, mode, owner, err := unsearchable(dir, uid, gid)
	switch {
	case err != nil:
		return "", &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("checkout: the git cache: %w", err)}
	case blocked != "":
		fmt.Fprintf(j.pw, "--- checkout: the objects are copied into the workspace: the sandbox's user (uid %d) cannot reach the git cache %s: %s (mode %v, owner %d) does not let it search; chmod o+x %s to share the cache\n",
			uid, dir, blocked, mode, owner, blocked)
		return "", nil
	}
	return dir, nil
}

// checkout puts the job's commit into the workspace as opts say, through
// Config.Checkout, and gives it to the sandbox's user. Its work tree
// borrows the objects of j.shared, which the sandbox shows, when that is
// set and the sandbox is not up yet; otherwise in a sandbox the objects
// are copied.
func (j *jobRun) checkout(ctx context.Context, opts cikit.Checkout, procs jobProcs) *checkoutError {
	e := j.e
	if e.cfg.Checkout == nil {
		return &checkoutError{cikit.FailureInfrastructure, errors.New("checkout: the job asks for its commit and this runner has no checkout configured (process.Config.Checkout)")}
	}
	dir := j.ws
	if opts.Path != "" {
		var err error
		if dir, err = inside(j.ws, opts.Path); err != nil {
			return &checkoutError{cikit.FailureConfig, fmt.Errorf("checkout: path: %w", err)}
		}
	}
	if err := e.checkoutDir(j.ws, dir); err != nil {
		return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("checkout: %w", err)}
	}
	share := e.sandbox != nil && j.shared != "" && procs == nil
	req := j.request(opts)
	req.Dissociate = e.sandbox != nil && !share
	started := time.Now()
	res, err := e.cfg.Checkout.Checkout(ctx, req)
	if err != nil {
		// What is there goes back to the job's user, for the steps that
		// may still run.
		if oerr := e.ownTree(dir); oerr != nil {
			e.cfg.Logger.Warn("could not give a failed checkout's directory back to the job's user", "dir", dir, "err", oerr)
		}
		return &checkoutError{checkout.Class(err), err}
	}
	if res.Duration == 0 {
		res.Duration = time.Since(started)
	}
	if e.sandbox != nil {
		for _, dir := range res.Alternates {
			if !share || filepath.Clean(dir) != j.shared {
				return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("checkout: the work tree borrows the objects of %s, which the job's sandbox does not show", dir)}
			}
		}
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
	if !within(p, dir) {
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
