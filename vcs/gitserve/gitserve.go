package gitserve

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit/vcs/internal/gitdir"
)

// Defaults of Config.
const (
	// DefaultGit is the git binary looked up in PATH.
	DefaultGit = "git"
	// DefaultMaxRequestBytes bounds a fetch's request body: 16 MiB,
	// room for about 300,000 "have" lines of a long negotiation.
	DefaultMaxRequestBytes = 16 << 20
	// DefaultTimeout bounds one request: 10 minutes, long enough to
	// send a large repository's full history to a slow runner.
	DefaultTimeout = 10 * time.Minute
	// DefaultRealm is the realm of the WWW-Authenticate challenge.
	DefaultRealm = "cikit"
)

// Errors Config.Authorize returns to choose the answer; wrap them with
// the reason, which git shows the person fetching.
var (
	// ErrUnauthenticated: the request carries no credential, or one
	// that is not valid at all. Answered 401 with a challenge.
	ErrUnauthenticated = errors.New("authentication required")
	// ErrUnavailable: the credential could not be checked now (the
	// token store is down). Answered 503 with Retry-After.
	ErrUnavailable = errors.New("authorization temporarily unavailable")
)

// Config configures a Handler.
type Config struct {
	// Root is the directory the repositories are under (required).
	Root string
	// Authorize decides each request for repository repo ("org/name")
	// (required): nil lets it through, an error matching
	// ErrUnauthenticated answers 401, ErrUnavailable 503, any other
	// error 403.
	Authorize func(r *http.Request, repo string) error
	// Git is the git binary (default DefaultGit, looked up in PATH).
	Git string
	// MaxRequestBytes bounds a request's body after decompression
	// (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Timeout bounds one request, git included (default
	// DefaultTimeout).
	Timeout time.Duration
	// Realm names the credentials in the 401 challenge (default
	// DefaultRealm).
	Realm string
	// Logger receives what git wrote on standard error and failures
	// met after an answer started (default: discarded).
	Logger *slog.Logger
}

// Handler is an http.Handler serving the repositories under a root over
// git's smart HTTP protocol, read-only. It is safe for concurrent use.
type Handler struct {
	root      string
	authorize func(*http.Request, string) error
	git       string
	maxBody   int64
	timeout   time.Duration
	realm     string
	log       *slog.Logger
	env       []string

	// caps holds protocol v2 capability advertisements by capsKey: they
	// list no refs, so one git upload-pack per repository and
	// configuration answers every fetch's first request.
	caps sync.Map // capsKey → []byte
}

// capsKey names a v2 capability advertisement: what it depends on is the
// repository's git directory, its configuration file as it was, and what
// the client asked for.
type capsKey struct {
	dir, protocol string
	config        time.Time
	configSize    int64
}

// New returns a Handler over the repositories under cfg.Root.
func New(cfg Config) (*Handler, error) {
	if cfg.Authorize == nil {
		return nil, errors.New("gitserve: Config.Authorize is required: every request must be authorized")
	}
	if cfg.MaxRequestBytes < 0 || cfg.Timeout < 0 {
		return nil, errors.New("gitserve: Config.MaxRequestBytes and Config.Timeout must not be negative")
	}
	root, git, err := gitdir.Open(cfg.Root, cmp.Or(cfg.Git, DefaultGit))
	if err != nil {
		return nil, fmt.Errorf("gitserve: %w", err)
	}
	return &Handler{
		root:      root,
		authorize: cfg.Authorize,
		git:       git,
		maxBody:   cmp.Or(cfg.MaxRequestBytes, DefaultMaxRequestBytes),
		timeout:   cmp.Or(cfg.Timeout, DefaultTimeout),
		realm:     cmp.Or(cfg.Realm, DefaultRealm),
		log:       cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		// Command-line configuration: a runner fetches a job's commit
		// by its SHA.
		env: gitdir.Env("GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=uploadpack.allowAnySHA1InWant", "GIT_CONFIG_VALUE_0=true"),
	}, nil
}

// request is what a URL asks for.
type request struct {
	repo    string
	service string // "info/refs", "git-upload-pack", "git-receive-pack", "dumb"
}

// parsePath splits a URL path into the repository and what is asked of
// it. ok is false for a path that is no git URL at all (404); err is set
// for one whose repository part is not a valid name (400).
func parsePath(p string) (req request, ok bool, err error) {
	rest, found := strings.CutPrefix(p, "/")
	if !found {
		return request{}, false, nil
	}
	for _, s := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if repo, found := strings.CutSuffix(rest, s); found {
			req.repo, req.service = repo, s[1:]
			break
		}
	}
	if req.service == "" {
		// The dumb protocol reads files: HEAD and objects/... .
		for _, s := range []string{"/HEAD", "/objects/"} {
			if i := strings.Index(rest, s); i > 0 {
				req.repo, req.service = rest[:i], "dumb"
				break
			}
		}
	}
	if req.service == "" {
		return request{}, false, nil
	}
	req.repo = strings.TrimSuffix(req.repo, ".git")
	if err := CheckRepo(req.repo); err != nil {
		return request{}, true, err
	}
	return req, true, nil
}

// CheckRepo reports whether repo is a repository name the Handler serves:
// "org/name" or deeper, each part letters, digits, '.', '_' and '-', not
// starting with '.' or '-' — the names vcs/local reads.
func CheckRepo(repo string) error { return gitdir.CheckRepo(repo) }

// ServeHTTP answers one request of git's smart HTTP protocol.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok, err := parsePath(r.URL.Path)
	switch {
	case !ok:
		http.Error(w, "not a git URL: this server serves /<org>/<name>[.git]/info/refs and /git-upload-pack", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := h.authorize(r, req.repo); err != nil {
		switch {
		case errors.Is(err, ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", h.realm))
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case errors.Is(err, ErrUnavailable):
			w.Header().Set("Retry-After", "5")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusForbidden)
		}
		return
	}
	service := req.service
	if service == "info/refs" {
		service = r.URL.Query().Get("service")
		if service == "" {
			service = "dumb"
		}
	}
	switch service {
	case "git-upload-pack":
	case "git-receive-pack":
		http.Error(w, "this remote is read-only: pushing is not allowed", http.StatusForbidden)
		return
	case "dumb":
		http.Error(w, "only git's smart HTTP protocol is served (git 1.6.6 or later)", http.StatusForbidden)
		return
	default:
		http.Error(w, fmt.Sprintf("unknown service %q: only git-upload-pack is served", service), http.StatusForbidden)
		return
	}
	dir, ok := h.gitDir(req.repo)
	if !ok {
		http.Error(w, fmt.Sprintf("repository %s not found", req.repo), http.StatusNotFound)
		return
	}
	if req.service == "info/refs" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "info/refs is read with GET", http.StatusMethodNotAllowed)
			return
		}
		h.advertise(w, r, req.repo, dir)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "git-upload-pack is called with POST", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-request" {
		http.Error(w, fmt.Sprintf("Content-Type %q is not application/x-git-upload-pack-request", ct), http.StatusUnsupportedMediaType)
		return
	}
	h.uploadPack(w, r, req.repo, dir)
}

// gitDir returns the git directory of repo, which exists.
func (h *Handler) gitDir(repo string) (string, bool) { return gitdir.Find(h.root, repo) }

// protocol returns the Git-Protocol header when it is well formed
// (colon-separated key=value pairs, as "version=2"), for git's
// GIT_PROTOCOL.
func protocol(r *http.Request) string {
	v := r.Header.Get("Git-Protocol")
	if len(v) > 256 {
		return ""
	}
	for _, c := range []byte(v) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("=:._-", c) >= 0) {
			return ""
		}
	}
	return v
}

// command returns git upload-pack on dir for r, ended with ctx.
func (h *Handler) command(ctx context.Context, r *http.Request, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.git, append(append([]string{"upload-pack", "--stateless-rpc", "--strict"}, args...), dir)...)
	cmd.Env = h.env
	if p := protocol(r); p != "" {
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "GIT_PROTOCOL="+p)
	}
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// advertise answers info/refs?service=git-upload-pack. In protocol v2 the
// answer is the server's capabilities, no refs, and is the same until the
// repository's configuration changes: it is kept, and a fetch costs one
// git process, not two.
func (h *Handler) advertise(w http.ResponseWriter, r *http.Request, repo, dir string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	v2 := strings.Contains(protocol(r), "version=2")
	var key capsKey
	if v2 {
		if fi, err := os.Stat(filepath.Join(dir, "config")); err == nil {
			key = capsKey{dir: dir, protocol: protocol(r), config: fi.ModTime(), configSize: fi.Size()}
			if caps, ok := h.caps.Load(key); ok {
				advertised(w, r, true, caps.([]byte))
				return
			}
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := h.command(ctx, r, dir, "--advertise-refs")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		h.log.Warn("gitserve: git upload-pack --advertise-refs failed", "repo", repo, "err", err, "stderr", stderr.String())
		if ctx.Err() != nil {
			http.Error(w, "timed out listing the repository's refs", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "could not list the repository's refs", http.StatusInternalServerError)
		return
	}
	if v2 && key.dir != "" {
		h.caps.Store(key, stdout.Bytes())
	}
	advertised(w, r, v2, stdout.Bytes())
}

// advertised writes git's advertisement out.
func advertised(w http.ResponseWriter, r *http.Request, v2 bool, out []byte) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/x-git-upload-pack-advertisement")
	hdr.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	if r.Method == http.MethodHead {
		return
	}
	// Protocol v2 starts with its capabilities; v0 and v1 with the
	// service line, as git http-backend answers.
	if !v2 {
		_, _ = io.WriteString(w, pktLine("# service=git-upload-pack\n")+"0000")
	}
	_, _ = w.Write(out)
}

// pktLine frames s as one pkt-line.
func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// uploadPack answers a POST to git-upload-pack.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, repo, dir string) {
	body, status, err := h.readBody(w, r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	var stderr bytes.Buffer
	out := &lazyWriter{w: w}
	cmd := h.command(ctx, r, dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(body), out, &stderr
	err = cmd.Run()
	if stderr.Len() > 0 {
		h.log.Debug("gitserve: git upload-pack", "repo", repo, "stderr", stderr.String())
	}
	if err == nil {
		out.start()
		return
	}
	h.log.Warn("gitserve: git upload-pack failed", "repo", repo, "err", err, "stderr", stderr.String(), "answered", out.started)
	if out.started {
		// Git's own error, if any, went out in the protocol; the
		// client sees the pack end early otherwise.
		return
	}
	if ctx.Err() != nil {
		http.Error(w, "timed out sending the pack", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, "git upload-pack failed: "+strings.TrimSpace(stderr.String()), http.StatusInternalServerError)
}

// readBody reads a request's body, gunzipped, up to h.maxBody bytes. On
// an error it returns the status to answer.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	tooLarge := fmt.Errorf("the request body is larger than %d bytes", h.maxBody)
	if r.ContentLength > h.maxBody && r.Header.Get("Content-Encoding") == "" {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	var in io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip", "x-gzip":
		// The compressed body cannot be larger than what it holds by
		// more than gzip's framing.
		zr, err := gzip.NewReader(http.MaxBytesReader(w, r.Body, h.maxBody+1<<10))
		if err != nil {
			return nil, readStatus(err), fmt.Errorf("reading the gzipped request body: %w", err)
		}
		in = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q is not supported (only gzip)", enc)
	}
	body, err := io.ReadAll(io.LimitReader(in, h.maxBody+1))
	if err != nil {
		return nil, readStatus(err), fmt.Errorf("reading the request body: %w", err)
	}
	if int64(len(body)) > h.maxBody {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	return body, 0, nil
}

// readStatus is the answer to a body that could not be read: too large,
// malformed, or cut by the client.
func readStatus(err error) int {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// lazyWriter sets the result's headers on the first byte git writes, so
// that a git that fails before writing anything can still be answered
// with an error status.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) start() {
	if l.started {
		return
	}
	l.started = true
	hdr := l.w.Header()
	hdr.Set("Content-Type", "application/x-git-upload-pack-result")
	hdr.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.start()
	n, err := l.w.Write(p)
	if f, ok := l.w.(http.Flusher); ok && err == nil {
		f.Flush()
	}
	return n, err
}
