package githubtest

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/cikit/cikit/vcs/gitserve"
)

// serveGit answers a request of git's smart HTTP protocol for a
// repository, read-only, with vcs/gitserve.
func (s *Server) serveGit(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	h, err := s.git, s.gitErr
	s.mu.Unlock()
	switch {
	case s.gitDir == "":
		http.Error(w, "githubtest serves no git: Config.GitDir is empty", http.StatusNotFound)
	case err != nil:
		http.Error(w, "githubtest cannot serve git: "+err.Error(), http.StatusInternalServerError)
	default:
		h.ServeHTTP(w, req)
	}
}

// authorizeGit lets a request for repository name through as github.com
// does for a private repository: HTTP basic credentials whose password
// is a personal access token, or an installation token that can read
// the repository's contents (any user name; git's is x-access-token).
func (s *Server) authorizeGit(req *http.Request, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.GitRequests++
	err := s.gitCheck(req, name)
	if err != nil {
		s.stats.GitRefused++
	}
	return err
}

func (s *Server) gitCheck(req *http.Request, name string) error {
	_, password, ok := req.BasicAuth()
	if !ok || password == "" {
		return fmt.Errorf("%w: give a token as the password", gitserve.ErrUnauthenticated)
	}
	c := caller{pat: s.pats[password]}
	if !c.pat {
		t, ok := s.tokens[password]
		if !ok || !s.now().Before(t.expires) || s.installs[t.installation] == nil {
			return fmt.Errorf("%w: invalid username or token", gitserve.ErrUnauthenticated)
		}
		c.installation, c.token = t.installation, &t
	}
	r := s.repos[strings.ToLower(name)]
	if r == nil || !s.visible(c, r) {
		// GitHub answers 404 for a repository one cannot see; gitserve's
		// refusals are 403, with this message.
		return fmt.Errorf("repository %s not found", name)
	}
	if !c.may("contents", "read") {
		return fmt.Errorf("permission to %s denied: the token cannot read contents", r.fullName())
	}
	return nil
}
