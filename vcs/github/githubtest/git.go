package githubtest

import (
	"net/http"
	"strings"

	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

// serveGit answers a request of git's smart HTTP protocol for a
// repository, read-only, as github.com does for a private repository:
// HTTP basic credentials whose password is a personal access token or an
// installation token that can read the repository's contents.
func (s *Server) serveGit(w http.ResponseWriter, req *http.Request, gr gitrepo.Request) {
	g, code, msg := s.gitAccess(req, gr)
	if code != 0 {
		switch code {
		case http.StatusUnauthorized:
			gitrepo.Unauthorized(w, "GitHub", msg)
		default:
			http.Error(w, msg, code)
		}
		return
	}
	gitrepo.Serve(w, req, gr, g)
}

// gitAccess checks the request's credential against what it asks for and
// returns the repository to serve, or the status and message of the
// refusal.
func (s *Server) gitAccess(req *http.Request, gr gitrepo.Request) (*gitrepo.Repo, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.GitRequests++
	g, code, msg := s.gitCheck(req, gr)
	if code != 0 {
		s.stats.GitRefused++
	}
	return g, code, msg
}

func (s *Server) gitCheck(req *http.Request, gr gitrepo.Request) (*gitrepo.Repo, int, string) {
	if s.gitDir == "" {
		return nil, http.StatusNotFound, "githubtest serves no git: Config.GitDir is empty"
	}
	_, password, ok := req.BasicAuth()
	if !ok || password == "" {
		return nil, http.StatusUnauthorized, "Authentication required: give a token as the password"
	}
	r := s.repos[strings.ToLower(gr.Repo)]
	c := caller{pat: s.pats[password]}
	if !c.pat {
		t, ok := s.tokens[password]
		if !ok || !s.now().Before(t.expires) || s.installs[t.installation] == nil {
			return nil, http.StatusUnauthorized, "Invalid username or token. Password authentication is not supported for Git operations."
		}
		c.installation, c.token = t.installation, &t
	}
	if r == nil || !s.visible(c, r) {
		return nil, http.StatusNotFound, "Repository not found."
	}
	if gr.Push(req) {
		return nil, http.StatusForbidden, "Permission to " + r.fullName() + ".git denied: githubtest serves git read-only"
	}
	if !c.may("contents", "read") {
		return nil, http.StatusForbidden, "Permission to " + r.fullName() + ".git denied: the token cannot read contents"
	}
	return r.git, 0, ""
}
