package checkout

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cikit/cikit"
)

// Defaults of Config.
const (
	// DefaultGit is the git binary looked up in PATH.
	DefaultGit = "git"
	// DefaultTimeout bounds one checkout, fetch and work tree included:
	// 10 minutes.
	DefaultTimeout = 10 * time.Minute
	// DefaultStallTimeout is how long a transfer may move less than
	// 1 KiB/s before git gives up on it: 1 minute.
	DefaultStallTimeout = time.Minute
)

// Config configures a Checkouter.
type Config struct {
	// CacheDir holds the runner's object cache: a bare mirror per
	// repository (required; created when missing). Several Checkouters,
	// in one process or several, may share it.
	CacheDir string
	// Git is the git binary (default DefaultGit, looked up in PATH).
	Git string
	// Timeout bounds one Checkout call (default DefaultTimeout).
	Timeout time.Duration
	// StallTimeout ends a transfer that moved less than 1 KiB/s for
	// that long (default DefaultStallTimeout).
	StallTimeout time.Duration
	// Dissociate gives each work tree its own copy of the objects it
	// needs (git repack -a -d, as git clone --dissociate), so that it
	// works without the cache: for executors that cannot show the
	// cache to the job (see Result.Alternates). It costs a copy of the
	// checked-out history on every checkout.
	Dissociate bool
	// Now is the clock durations are measured with (default time.Now).
	Now func() time.Time
}

// Checkouter puts commits into workspaces, fetching them through a cache
// of mirrors. It is safe for concurrent use.
//
// A work tree it makes borrows the objects of its mirror (Result.Alternates)
// unless it dissociates. A mirror's objects are never deleted while it is
// in use: git gc keeps every unreachable object (gc.pruneExpire=never), a
// fetch only adds objects, and both run under the mirror's exclusive lock,
// which the making of a work tree excludes. A job that reads the mirror
// while a later job's fetch writes it sees a store that only grows.
type Checkouter struct {
	cache      string
	git        string
	dissociate bool
	timeout    time.Duration
	stall      time.Duration
	now        func() time.Time
	base       []string // the environment of every git: nothing of the runner's
	env        []string // base, and the configuration of git on this machine only
}

// New returns a Checkouter caching under cfg.CacheDir.
func New(cfg Config) (*Checkouter, error) {
	if cfg.CacheDir == "" {
		return nil, errors.New("checkout: Config.CacheDir must name the directory of the runner's git cache")
	}
	if cfg.Timeout < 0 || cfg.StallTimeout < 0 {
		return nil, errors.New("checkout: Config.Timeout and Config.StallTimeout must not be negative")
	}
	cache, err := filepath.Abs(cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("checkout: Config.CacheDir: %w", err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("checkout: Config.CacheDir: %w", err)
	}
	git, err := exec.LookPath(cmp.Or(cfg.Git, DefaultGit))
	if err != nil {
		return nil, fmt.Errorf("checkout: Config.Git: %w", err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	// Nothing of the runner's environment or configuration but PATH,
	// which git's shell-script commands need.
	base := []string{
		"PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"HOME=" + os.DevNull,
		"XDG_CONFIG_HOME=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	}
	return &Checkouter{
		cache:      cache,
		git:        git,
		dissociate: cfg.Dissociate,
		timeout:    cmp.Or(cfg.Timeout, DefaultTimeout),
		stall:      cmp.Or(cfg.StallTimeout, DefaultStallTimeout),
		now:        now,
		base:       base,
		env: append(base[:len(base):len(base)], "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"),
	}, nil
}

// ObjectDir returns the object directory of the mirror the work tree of
// req borrows from unless it dissociates (the one of Result.Alternates),
// creating the mirror if there is none yet: a sandbox can be made to show
// it while the checkout runs. It checks req as Checkout does, and returns
// the same errors for it; "" for strategy none, which borrows nothing.
func (c *Checkouter) ObjectDir(ctx context.Context, req Request) (string, error) {
	if req.Options.Strategy == "none" {
		return "", nil
	}
	t, err := prepare(req)
	if err != nil {
		return "", &Error{Class: cikit.FailureConfig, Op: "checkout", Err: fmt.Errorf("%w: %v", ErrInvalidRequest, err)}
	}
	mirror := filepath.Join(c.cache, mirrorName(t.url))
	if !fileExists(filepath.Join(mirror, "HEAD")) {
		lk, err := lockFile(ctx, mirror+".lock", syscall.LOCK_EX)
		if err != nil {
			return "", fail(ctx, "checkout", t.own, false, err)
		}
		defer lk.unlock()
		if err := c.ensureMirror(ctx, mirror); err != nil {
			return "", fail(ctx, "checkout", t.own, false, err)
		}
	}
	return filepath.Join(mirror, "objects"), nil
}

// Request is one checkout.
type Request struct {
	// Source is where to fetch from, with the job's credential
	// (required unless Options.Strategy is "none").
	Source *cikit.CheckoutSource
	// Repository is the run's repository ("org/name"), which
	// Source.URL serves.
	Repository string
	// SHA is the run's commit, a full hexadecimal SHA (required unless
	// Options.Ref names what to check out).
	SHA string
	// Ref is the run's ref ("refs/heads/main"): a branch is checked out
	// as a local branch of that name at SHA, anything else detached.
	Ref string
	// Options are the job's checkout options.
	Options cikit.Checkout
	// Dir is the job's workspace; the commit goes to Dir/Options.Path.
	Dir string
	// Owner, when set, is who the work tree is given to after the
	// checkout: the user the job's steps run as, when it is not the
	// runner's (git refuses a repository another user owns, and the
	// steps must be able to write their files).
	Owner *Owner
	// Dissociate, as Config.Dissociate, gives this checkout's work tree
	// its own copy of the objects it needs.
	Dissociate bool
	// Log receives progress lines (default: discarded). Nothing written
	// to it holds the credential.
	Log io.Writer
}

// Owner is a user and group of the runner's host.
type Owner struct {
	UID, GID int
}

// Result is what a checkout did.
type Result struct {
	// Commit is the SHA checked out; "" for strategy "none".
	Commit string
	// Duration is how long the checkout took.
	Duration time.Duration
	// Fetched is how many objects the cache received from the remote:
	// 0 when the cache already held the commit.
	Fetched int64
	// Alternates are the object directories of the cache the work tree
	// borrows (git's objects/info/alternates), unless
	// Config.Dissociate or Request.Dissociate: git commands of the job's steps need them, so
	// a sandbox must show them to the job read-only, at the same path —
	// never writable, since other jobs' work trees borrow them too.
	Alternates []string
}

// target is a validated request.
type target struct {
	url, repo  string
	expires    time.Time // when the credential stops working; zero if unknown
	own        bool      // the run's own repository
	want       string    // the SHA or ref name to fetch
	isSHA      bool
	branch     string // the local branch to create, "" for detached
	depth      int    // 0 full history, else how many commits
	root, dir  string // the workspace, and the work tree in it
	owner      *Owner
	dissociate bool // Config.Dissociate or Request.Dissociate
}

// Checkout puts the commit req asks for into req.Dir/Options.Path, through
// the cache. Errors are *Error values; see Class for how to report them.
func (c *Checkouter) Checkout(ctx context.Context, req Request) (Result, error) {
	start := c.now()
	log := req.Log
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout,
		fmt.Errorf("checkout: timed out after %s", c.timeout))
	defer cancel()
	if req.Options.Strategy == "none" {
		if err := checkDir(req.Dir, req.Options.Path); err != nil {
			return Result{}, &Error{Class: cikit.FailureConfig, Op: "checkout", Err: fmt.Errorf("%w: %v", ErrInvalidRequest, err)}
		}
		if err := mkdirInside(filepath.Clean(req.Dir), filepath.Join(req.Dir, filepath.FromSlash(req.Options.Path))); err != nil {
			return Result{}, &Error{Class: cikit.FailureInfrastructure, Op: "checkout", Err: fmt.Errorf("%w: %v", ErrWorkspace, err)}
		}
		fmt.Fprintln(log, "Checkout skipped: strategy none, the workspace starts empty")
		return Result{Duration: c.now().Sub(start)}, nil
	}
	t, err := prepare(req)
	if err != nil {
		return Result{}, &Error{Class: cikit.FailureConfig, Op: "checkout", Err: fmt.Errorf("%w: %v", ErrInvalidRequest, err)}
	}
	t.dissociate = c.dissociate || req.Dissociate
	env := c.remoteEnv(req.Source, t.url)
	mirror := filepath.Join(c.cache, mirrorName(t.url))

	fetched, commit, subject, err := c.fetch(ctx, log, env, mirror, t)
	if err != nil {
		return Result{}, err
	}
	if err := c.workTree(ctx, log, env, mirror, t, commit, subject, req.Options); err != nil {
		return Result{}, err
	}
	res := Result{Commit: commit, Duration: c.now().Sub(start), Fetched: fetched}
	if !t.dissociate {
		res.Alternates = []string{filepath.Join(mirror, "objects")}
	}
	fmt.Fprintf(log, "Checked out %s into %s in %s (%d objects fetched)\n", commit, cmp.Or(req.Options.Path, "the workspace"),
		res.Duration.Round(time.Millisecond), fetched)
	return res, nil
}

// prepare validates req and works out what to fetch.
func prepare(req Request) (target, error) {
	o := req.Options
	t := target{repo: req.Repository, own: true}
	switch o.Strategy {
	case "", "fetch", "clone":
	default:
		return t, fmt.Errorf("strategy %q is not fetch, clone or none", o.Strategy)
	}
	switch o.Submodules {
	case "", "normal", "recursive":
	default:
		return t, fmt.Errorf("submodules %q is not normal or recursive", o.Submodules)
	}
	switch {
	case o.Depth < -1:
		return t, fmt.Errorf("depth %d is not -1 (all history), 0 (the default, 1) or a number of commits", o.Depth)
	case o.Depth == -1:
		t.depth = 0
	default:
		t.depth = max(o.Depth, 1)
	}
	if err := checkDir(req.Dir, o.Path); err != nil {
		return t, err
	}
	if req.Repository != "" {
		if err := checkRepo(req.Repository); err != nil {
			return t, err
		}
	}
	t.root, t.dir, t.owner = filepath.Clean(req.Dir), filepath.Join(req.Dir, filepath.FromSlash(o.Path)), req.Owner
	if req.Source == nil || req.Source.URL == "" {
		return t, errors.New("the job has no source to fetch its commit from")
	}
	// No message repeats the URL as given: it might hold a secret.
	u, err := url.Parse(req.Source.URL)
	switch {
	case err != nil:
		return t, errors.New("the source URL is not a valid URL")
	case u.User != nil:
		return t, errors.New("the source URL holds credentials; they belong in Source.Username and Source.Token")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return t, errors.New("the source URL has a query or fragment")
	case u.Scheme != "http" && u.Scheme != "https":
		return t, fmt.Errorf("the source URL's scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return t, errors.New("the source URL has no host")
	}
	t.url, t.expires = u.String(), req.Source.ExpiresAt
	if o.Repository != "" && o.Repository != req.Repository {
		if err := checkRepo(o.Repository); err != nil {
			return t, err
		}
		base, ok := repoBase(u.Path, req.Repository)
		if !ok {
			return t, fmt.Errorf("cannot tell the URL of %s from the run's %s", o.Repository, req.Source)
		}
		u.Path = base + o.Repository + ".git"
		t.url, t.repo, t.own = u.String(), o.Repository, false
	}
	switch {
	case o.Ref != "":
		if isSHA(o.Ref) {
			t.want, t.isSHA = o.Ref, true
			break
		}
		if err := checkRef(o.Ref); err != nil {
			return t, err
		}
		// A short name is resolved by the remote, a tag before a
		// branch as git does; which one it was is not known here, so
		// only a full branch ref becomes a local branch.
		t.want, t.branch = o.Ref, branchOf(o.Ref)
	case !t.own:
		// Another repository without a ref: its default branch.
		t.want = "HEAD"
	case isSHA(req.SHA):
		t.want, t.isSHA = req.SHA, true
		if checkRef(req.Ref) == nil {
			t.branch = branchOf(req.Ref)
		}
	default:
		return t, fmt.Errorf("SHA %q is not a full hexadecimal commit SHA", req.SHA)
	}
	return t, nil
}

// branchOf returns the branch a full ref names ("main" of
// "refs/heads/main"), or "" when it names none or one git would not take
// as a branch name.
func branchOf(ref string) string {
	b, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || b == "" || b[0] == '-' {
		return ""
	}
	return b
}

// repoBase returns the part of a URL path before repository repo
// ("/git/" of "/git/acme/api.git").
func repoBase(p, repo string) (string, bool) {
	p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".git")
	base, ok := strings.CutSuffix(p, "/"+repo)
	return base + "/", ok && repo != ""
}

// checkDir accepts an absolute workspace and a clean relative path in it.
func checkDir(dir, p string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("workspace %q is not an absolute directory", dir)
	}
	if p == "" {
		return nil
	}
	if path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("path %q is not a clean relative path in the workspace", p)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\\' }) {
		return fmt.Errorf("path %q has a control character or backslash", p)
	}
	return nil
}

// checkRepo accepts "org/name" and deeper, each part letters, digits,
// '.', '_' and '-', not starting with '.' or '-'.
func checkRepo(repo string) error {
	parts := strings.Split(repo, "/")
	if len(parts) < 2 {
		return fmt.Errorf("repository %q is not org/name", repo)
	}
	for _, part := range parts {
		if part == "" || part[0] == '.' || part[0] == '-' || strings.ContainsFunc(part, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r))
		}) {
			return fmt.Errorf("repository %q is not org/name of letters, digits, '.', '_' and '-'", repo)
		}
	}
	return nil
}

// checkRef accepts a branch, tag or full ref name as git check-ref-format
// does, and refuses revision syntax and what git would read as an option.
func checkRef(ref string) error {
	bad := ref == "" || ref == "@" || ref[0] == '-' || ref[0] == '/' || ref[0] == '.' || strings.HasSuffix(ref, "/") ||
		strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") || strings.Contains(ref, "..") ||
		strings.Contains(ref, "//") || strings.Contains(ref, "@{") || strings.Contains(ref, "/.") ||
		strings.Contains(ref, ".lock/") || strings.ContainsAny(ref, " ~^:?*[\\") ||
		strings.ContainsFunc(ref, func(r rune) bool { return r < ' ' || r == 0x7f })
	if bad {
		return fmt.Errorf("ref %q is not a valid branch, tag or ref name", ref)
	}
	return nil
}

// isSHA reports whether s is a full SHA-1 or SHA-256 in lowercase hex.
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') })
}

// mirrorName is the cache directory of the repository at rawURL: its
// last path parts for people, and a hash of the whole URL, so that one
// name on two forges has two mirrors.
func mirrorName(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	u, _ := url.Parse(rawURL)
	p := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if parts := strings.Split(p, "/"); len(parts) > 2 {
		p = strings.Join(parts[len(parts)-2:], "/")
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, p)
	return fmt.Sprintf("%s-%s.git", name, hex.EncodeToString(sum[:6]))
}

// remoteEnv is the environment of git talking to the remote at rawURL:
// the credential as an HTTP header scoped to the remote's origin, in
// command-line configuration that only this process and its children
// see — never the remote URL, a config file or the job's environment.
func (c *Checkouter) remoteEnv(src *cikit.CheckoutSource, rawURL string) []string {
	cfg := [][2]string{
		// Work trees belong to the job's user (Request.Owner), whose
		// workspace the runner writes: git's ownership check guards
		// against running a repository's configuration, and every git
		// directory the checkout touches is its own, never a job's.
		{"safe.directory", "*"},
		{"protocol.version", "2"},
		// Submodule URLs come from the repository: only HTTP(S), never
		// file:// (which could read the runner's other mirrors) or ssh.
		{"protocol.allow", "never"},
		{"protocol.https.allow", "always"},
		{"protocol.http.allow", "always"},
		{"credential.helper", ""},
		{"http.lowSpeedLimit", "1024"},
		{"http.lowSpeedTime", strconv.Itoa(max(1, int(c.stall/time.Second)))},
		// The fetch does not pack the mirror; Checkout does, after
		// counting what arrived.
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
	}
	if src != nil && (src.Username != "" || src.Token != "") {
		u, _ := url.Parse(rawURL)
		origin := u.Scheme + "://" + u.Host + "/"
		cred := base64.StdEncoding.EncodeToString([]byte(src.Username + ":" + src.Token))
		cfg = append(cfg, [2]string{"http." + origin + ".extraHeader", "Authorization: Basic " + cred})
	}
	env := append(c.base[:len(c.base):len(c.base)], "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

// gitError is a git command that failed.
type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	cmd := e.args[0]
	for _, a := range e.args {
		if !strings.HasPrefix(a, "-") {
			cmd = a
			break
		}
	}
	return fmt.Sprintf("git %s: %v: %s", cmd, e.err, e.stderr)
}

// run runs git in dir with env, copying its standard error to log (when
// not nil), and returns its standard output.
func (c *Checkouter) run(ctx context.Context, dir string, env []string, log io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.git, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stdout = &stdout
	if log != nil {
		cmd.Stderr = io.MultiWriter(stderr, log)
	} else {
		cmd.Stderr = stderr
	}
	if err := cmd.Run(); err != nil {
		return "", &gitError{args: args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

// fail turns a failure into an *Error: a remote git command's by what
// git said, a context's as unreachable (the checkout's timeout) or the
// caller's cancellation, anything else as a workspace failure.
func fail(ctx context.Context, op string, own, remote bool, err error) *Error {
	if ctx.Err() != nil {
		return &Error{Class: cikit.FailureInfrastructure, Op: op, Err: errors.Join(ErrUnreachable, context.Cause(ctx), ctx.Err())}
	}
	var ge *gitError
	detail := ""
	if errors.As(err, &ge) {
		detail = lastLines(ge.stderr, 5)
	}
	sentinel := ErrWorkspace
	if remote && ge != nil {
		sentinel = classify(ge.stderr)
	}
	if ge == nil {
		detail = err.Error()
	}
	return &Error{Class: classOf(sentinel, own), Op: op, Err: sentinel, Detail: detail}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// expired refuses to contact the remote with a credential that has
// expired: the remote would refuse it, less clearly.
func (c *Checkouter) expired(t target, op string) error {
	if t.expires.IsZero() || c.now().Before(t.expires) {
		return nil
	}
	return &Error{Class: classOf(ErrAccessDenied, t.own), Op: op, Err: ErrAccessDenied,
		Detail: "the job's credential expired at " + t.expires.UTC().Format(time.RFC3339)}
}

// fetch brings the target's commit into the mirror, under its lock, and
// returns how many objects arrived, the commit and its subject. It starts
// as few git processes as it can: the cache's objects and refs are read
// without one, and one git cat-file both checks that the commit is one
// and reads its subject.
func (c *Checkouter) fetch(ctx context.Context, log io.Writer, env []string, mirror string, t target) (int64, string, string, error) {
	op := "fetch " + t.repo + " " + t.want
	lk, err := lockFile(ctx, mirror+".lock", syscall.LOCK_EX)
	if err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	defer lk.unlock()
	if err := c.ensureMirror(ctx, mirror); err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	if err := clearStaleLocks(mirror); err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	objects := filepath.Join(mirror, "objects")
	shallow := fileExists(filepath.Join(mirror, "shallow"))
	if t.isSHA && (t.depth == 1 || !shallow) {
		cached, err := hasObject(objects, t.want)
		if err != nil {
			return 0, "", "", fail(ctx, op, t.own, false, err)
		}
		subject, isCommit := "", false
		if cached {
			subject, isCommit = c.commitSubject(ctx, mirror, t.want)
		}
		if isCommit {
			if !t.own {
				// The cache holds what other jobs fetched: this job's
				// credential must be good for the repository too.
				if err := c.expired(t, op); err != nil {
					return 0, "", "", err
				}
				if _, err := c.run(ctx, mirror, env, log, "ls-remote", "--quiet", "--", t.url, "HEAD"); err != nil {
					return 0, "", "", fail(ctx, op, t.own, true, err)
				}
			}
			fmt.Fprintf(log, "Commit %s is in the runner's cache\n", t.want)
			return 0, t.want, subject, nil
		}
	}
	if err := c.expired(t, op); err != nil {
		return 0, "", "", err
	}
	hasRefs, err := hasRefs(mirror)
	if err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	before, err := countObjects(objects)
	if err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	dst := "refs/cikit/detached"
	switch {
	case !t.isSHA:
		dst = "refs/cikit/" + strings.TrimPrefix(t.want, "refs/")
	case t.branch != "":
		dst = "refs/cikit/heads/" + t.branch
	}
	args := []string{"fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--quiet"}
	switch {
	case t.depth == 0 && shallow:
		args = append(args, "--unshallow")
	case t.depth > 0 && (shallow || !hasRefs):
		// A complete mirror stays complete: fetching what is new
		// costs only the new objects anyway.
		args = append(args, "--depth="+strconv.Itoa(t.depth))
	}
	args = append(args, "--", t.url, "+"+t.want+":"+dst)
	what := "all history"
	if t.depth > 0 {
		what = fmt.Sprintf("depth %d", t.depth)
	}
	fmt.Fprintf(log, "Fetching %s from %s (%s)\n", t.want, t.url, what)
	fetchStart := c.now()
	if _, err := c.run(ctx, mirror, env, log, append([]string{"--git-dir=" + mirror}, args...)...); err != nil {
		return 0, "", "", fail(ctx, op, t.own, true, err)
	}
	commit := t.want
	if !t.isSHA {
		// A tag is peeled to its commit.
		if commit, err = c.run(ctx, mirror, c.env, nil, "--git-dir="+mirror, "rev-parse", "--verify", "--end-of-options", dst+"^{commit}"); err != nil {
			return 0, "", "", &Error{Class: cikit.FailureConfig, Op: op, Err: ErrCommitNotFound, Detail: t.want + " is not a commit"}
		}
	}
	subject, isCommit := c.commitSubject(ctx, mirror, commit)
	if !isCommit {
		return 0, "", "", &Error{Class: cikit.FailureConfig, Op: op, Err: ErrCommitNotFound, Detail: t.want + " is not a commit"}
	}
	after, err := countObjects(objects)
	if err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	fmt.Fprintf(log, "Fetched %d objects in %s\n", after-before, c.now().Sub(fetchStart).Round(time.Millisecond))
	// Unreferenced objects stay (gc.pruneExpire=never): workspaces
	// borrow them through their alternates.
	due, err := gcDue(mirror)
	if err != nil {
		return 0, "", "", fail(ctx, op, t.own, false, err)
	}
	if due {
		if _, err := c.run(ctx, mirror, c.env, nil, "--git-dir="+mirror, "gc", "--auto", "--quiet"); err != nil {
			return 0, "", "", fail(ctx, op, t.own, false, err)
		}
	}
	return after - before, commit, subject, nil
}

// commitSubject reports whether sha is a commit of the git directory and
// returns the first paragraph of its message. A loose object, as a small
// fetch leaves it, is read here; a packed one by git cat-file.
func (c *Checkouter) commitSubject(ctx context.Context, gitDir, sha string) (string, bool) {
	typ, body, err := readLoose(filepath.Join(gitDir, "objects"), sha)
	var out string
	switch {
	case err == nil && typ != "commit":
		return "", false
	case err == nil:
		out = string(body)
	default:
		if out, err = c.run(ctx, gitDir, c.env, nil, "--git-dir="+gitDir, "cat-file", "commit", sha); err != nil {
			return "", false
		}
	}
	// The headers end at the first empty line; the message follows, and
	// its first paragraph is the subject, on one line as git log's %s.
	_, msg, _ := strings.Cut(out, "\n\n")
	subject, _, _ := strings.Cut(strings.TrimSpace(msg), "\n\n")
	return strings.Join(strings.Fields(subject), " "), true
}

// ensureMirror creates the bare mirror if it does not exist, atomically:
// a runner that died halfway leaves a temporary directory, never a
// half-made mirror.
func (c *Checkouter) ensureMirror(ctx context.Context, mirror string) error {
	if fileExists(filepath.Join(mirror, "HEAD")) {
		return nil
	}
	tmp, err := os.MkdirTemp(c.cache, ".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Readable by the jobs' user, whose work trees borrow its objects,
	// whatever the runner's umask (--shared=0644).
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if _, err := c.run(ctx, tmp, c.env, nil, "init", "--quiet", "--bare", "--template=", "--shared=0644", tmp); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"gc.pruneExpire", "never"},
		{"gc.autoDetach", "false"},
		{"core.logAllRefUpdates", "false"},
	} {
		if _, err := c.run(ctx, tmp, c.env, nil, "--git-dir="+tmp, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return os.Rename(tmp, mirror)
}

// clearStaleLocks removes the lock files of git a runner killed halfway
// through a fetch left in the mirror: every git that writes it runs under
// the mirror's exclusive lock, which the caller holds, so any there is
// stale, and would fail every later fetch.
func clearStaleLocks(mirror string) error {
	for _, name := range []string{"shallow.lock", "packed-refs.lock", "config.lock", "index.lock", "HEAD.lock", "gc.pid"} {
		if err := os.Remove(filepath.Join(mirror, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return filepath.WalkDir(filepath.Join(mirror, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".lock") {
			return err
		}
		return os.Remove(p)
	})
}

// chownTree gives dir, everything in it and the directories between root
// and it to o, without following symbolic links.
func chownTree(root, dir string, o Owner) error {
	for p := dir; p != root && strings.HasPrefix(p, root); p = filepath.Dir(p) {
		if err := os.Lchown(p, o.UID, o.GID); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, o.UID, o.GID)
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// workTree makes t.dir a work tree of commit borrowing the mirror's
// objects, under a shared lock of the mirror, so that no other job packs
// it meanwhile. Its git directory is written here and one git read-tree
// fills the index and the files: git init, git config and git checkout
// would be three processes or more for the same.
func (c *Checkouter) workTree(ctx context.Context, log io.Writer, env []string, mirror string, t target, commit, subject string, o cikit.Checkout) error {
	op := "check out " + t.repo + " " + commit
	lk, err := lockFile(ctx, mirror+".lock", syscall.LOCK_SH)
	if err != nil {
		return fail(ctx, op, t.own, false, err)
	}
	defer lk.unlock()
	dirty, err := c.initWorkTree(mirror, t, commit, o.Strategy == "clone")
	if err != nil {
		return fail(ctx, op, t.own, false, err)
	}
	gitDir := filepath.Join(t.dir, ".git")
	local := func(args ...string) error {
		_, err := c.run(ctx, t.dir, c.env, log, args...)
		return err
	}
	// --reset overwrites what an earlier job left in the way, as
	// git checkout --force does.
	steps := [][]string{{"read-tree", "-u", "--reset", commit}}
	if o.Clean && dirty {
		// Only files an earlier job left can be untracked.
		steps = append(steps, []string{"clean", "-ffdxq"})
	}
	if t.dissociate {
		steps = append(steps, []string{"repack", "-a", "-d", "-q"})
	}
	for _, args := range steps {
		if err := local(args...); err != nil {
			return fail(ctx, op, t.own, false, err)
		}
	}
	if t.dissociate {
		if err := os.Remove(filepath.Join(gitDir, "objects", "info", "alternates")); err != nil {
			return fail(ctx, op, t.own, false, err)
		}
	}
	if o.Submodules != "" {
		if err := c.submodules(ctx, log, env, t, o.Submodules == "recursive"); err != nil {
			return err
		}
	}
	if t.owner != nil {
		if err := chownTree(t.root, t.dir, *t.owner); err != nil {
			return fail(ctx, op, t.own, false, err)
		}
	}
	fmt.Fprintf(log, "HEAD is now at %s %s\n", commit[:min(12, len(commit))], subject)
	return nil
}

// initWorkTree makes t.dir a new repository at commit borrowing the
// mirror's objects, and reports whether the directory held files already.
// An earlier job's git directory there is never reused, even of the same
// repository (strategy fetch): its configuration, hooks and index were
// the job's to change, and git must not run what a job wrote outside that
// job's sandbox. Its files stay (read-tree --reset rewrites the tracked
// ones) unless fresh (strategy clone) empties the directory.
//
// The git directory is what git init --template= writes, with the
// origin remote, the branch (or a detached HEAD) at commit, the remote's
// branch, the mirror as alternate and its shallow file.
func (c *Checkouter) initWorkTree(mirror string, t target, commit string, fresh bool) (bool, error) {
	if err := mkdirInside(t.root, t.dir); err != nil {
		return false, err
	}
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return false, err
	}
	dirty := false
	for _, e := range entries {
		if fresh || e.Name() == ".git" {
			if err := os.RemoveAll(filepath.Join(t.dir, e.Name())); err != nil {
				return false, err
			}
			continue
		}
		dirty = true
	}
	gitDir := filepath.Join(t.dir, ".git")
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "refs/remotes/origin"} {
		if err := os.MkdirAll(filepath.Join(gitDir, filepath.FromSlash(d)), 0o755); err != nil {
			return false, err
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	if len(commit) == 64 {
		config = "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
			"[extensions]\n\tobjectformat = sha256\n"
	}
	config += "[remote \"origin\"]\n\turl = " + configValue(t.url) + "\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	head := commit + "\n"
	if t.branch != "" {
		head = "ref: refs/heads/" + t.branch + "\n"
	}
	files := [][2]string{
		{"config", config},
		{"objects/info/alternates", filepath.Join(mirror, "objects") + "\n"},
		{"HEAD", head},
	}
	if t.branch != "" {
		files = append(files,
			[2]string{"refs/heads/" + t.branch, commit + "\n"},
			[2]string{"refs/remotes/origin/" + t.branch, commit + "\n"})
	}
	shallow, err := os.ReadFile(filepath.Join(mirror, "shallow"))
	switch {
	case err == nil:
		files = append(files, [2]string{"shallow", string(shallow)})
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	for _, f := range files {
		p := filepath.Join(gitDir, filepath.FromSlash(f[0]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(p, []byte(f[1]), 0o644); err != nil {
			return false, err
		}
	}
	return dirty, nil
}

// configValue quotes s as a value of a git configuration file.
func configValue(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`, "\n", `\n`).Replace(s) + `"`
}

// mkdirInside makes dir, which is root or below it, replacing whatever
// is not a directory on the way — a symbolic link an earlier job left
// would otherwise lead the checkout, which runs outside the sandbox, to
// write elsewhere on the runner.
func mkdirInside(root, dir string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return err
	}
	p := root
	for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := os.Remove(p); err != nil {
				return err
			}
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// submodules checks out the submodules at the commits the work tree
// records, fetched from their remotes with the job's credential when on
// the same origin. They are not cached.
func (c *Checkouter) submodules(ctx context.Context, log io.Writer, env []string, t target, recursive bool) error {
	op := "update submodules of " + t.repo
	sync := []string{"submodule", "sync", "--quiet"}
	update := []string{"submodule", "update", "--init", "--force", "--quiet"}
	if recursive {
		sync = append(sync, "--recursive")
		update = append(update, "--recursive")
	}
	if t.depth > 0 {
		update = append(update, "--depth="+strconv.Itoa(t.depth))
	}
	if _, err := c.run(ctx, t.dir, env, log, sync...); err != nil {
		return fail(ctx, op, t.own, false, err)
	}
	fmt.Fprintln(log, "Updating submodules")
	if _, err := c.run(ctx, t.dir, env, log, update...); err != nil {
		return fail(ctx, op, t.own, true, err)
	}
	return nil
}
