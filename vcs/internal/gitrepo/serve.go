package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MaxRequestBytes is the largest request body Serve reads: a fetch's
// negotiation of wants and haves is far smaller.
const MaxRequestBytes = 16 << 20

// RequestTimeout bounds how long Serve takes to answer one request.
const RequestTimeout = 2 * time.Minute

// Request is a request of git's smart HTTP protocol, read from its URL.
type Request struct {
	// Repo is the repository's path, without ".git": "owner/name" or
	// "group/sub/project".
	Repo string
	// Part is what of the repository is asked for: "info/refs",
	// "git-upload-pack" or "git-receive-pack".
	Part string
}

// ParsePath reads the git request a URL path names,
// "/{repo}.git/{part}"; ok is false for a path that is no git request
// (an API call) or whose repository is not a clean relative path.
func ParsePath(p string) (r Request, ok bool) {
	repo, part, found := strings.Cut(p, ".git/")
	if !found || !strings.HasPrefix(repo, "/") {
		return Request{}, false
	}
	repo = repo[1:]
	switch part {
	case "info/refs", "git-upload-pack", "git-receive-pack":
	default:
		return Request{}, false
	}
	if repo == "" || strings.HasSuffix(repo, "/") {
		return Request{}, false
	}
	for _, seg := range strings.Split(repo, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
			return Request{}, false
		}
	}
	return Request{Repo: repo, Part: part}, true
}

// Push reports whether req asks to push (receive-pack), which Serve
// always refuses.
func (r Request) Push(req *http.Request) bool {
	return r.Part == "git-receive-pack" || r.Part == "info/refs" && req.URL.Query().Get("service") == "git-receive-pack"
}

// Unauthorized answers 401 with a Basic challenge of realm, which makes
// git ask for the credential.
func Unauthorized(w http.ResponseWriter, realm, message string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", realm))
	http.Error(w, message, http.StatusUnauthorized)
}

// Serve answers req, a git request r the caller has authorized, from
// repo, read-only: the refs and fetches of git-upload-pack. A push is
// refused with 403, the dumb protocol with 400, a wrong method with 405,
// a body over MaxRequestBytes with 413.
func Serve(w http.ResponseWriter, req *http.Request, r Request, repo *Repo) {
	switch {
	case r.Push(req):
		http.Error(w, "pushing is refused: this server serves its repositories read-only", http.StatusForbidden)
		return
	case r.Part == "info/refs" && req.Method != http.MethodGet,
		r.Part == "git-upload-pack" && req.Method != http.MethodPost:
		http.Error(w, fmt.Sprintf("%s of %s takes no %s", r.Part, r.Repo, req.Method), http.StatusMethodNotAllowed)
		return
	case r.Part == "info/refs" && req.URL.Query().Get("service") != "git-upload-pack":
		http.Error(w, "only git's smart HTTP protocol is served: info/refs needs ?service=git-upload-pack", http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(RequestTimeout)
	// A writer without deadlines still answers; the bound is then the
	// server's own.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)

	// The CGI handler refuses chunked bodies, which git sends past its
	// http.postBuffer: the body is read here, within its cap.
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the request body is over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	git, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, "git is not installed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.TransferEncoding = nil
	out.Header.Del("Authorization") // the credential stays here
	root, name := filepath.Split(repo.Dir())
	out.URL.Path = "/" + name + "/" + r.Part
	h := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Dir:  repo.Dir(),
		Env: append(cleanEnv(repo.Dir()),
			"GIT_PROJECT_ROOT="+filepath.Clean(root),
			"GIT_HTTP_EXPORT_ALL=1",
			// What git sends as Git-Protocol selects protocol v2.
			"GIT_PROTOCOL="+req.Header.Get("Git-Protocol")),
	}
	h.ServeHTTP(w, out)
}
