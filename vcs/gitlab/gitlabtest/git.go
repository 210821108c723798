package gitlabtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/cikit/cikit/vcs/gitserve"
)

// deployTokenScopes are the scopes GitLab knows for a deploy token.
var deployTokenScopes = []string{"read_repository", "write_repository", "read_registry", "write_registry",
	"read_virtual_registry", "write_virtual_registry", "read_package_registry", "write_package_registry"}

// maxBody is the largest API request body the server reads.
const maxBody = 1 << 20

func (t *deployToken) live(now time.Time) bool {
	return !t.revoked && (t.expires.IsZero() || now.Before(t.expires))
}

func (s *Server) deployTokenJSON(t *deployToken, withToken bool) map[string]any {
	out := map[string]any{"id": t.id, "name": t.name, "username": t.username, "scopes": t.scopes,
		"revoked": t.revoked, "expired": !t.expires.IsZero() && !s.cfg.Now().Before(t.expires), "expires_at": nil}
	if !t.expires.IsZero() {
		out["expires_at"] = t.expires.UTC().Format(time.RFC3339)
	}
	if withToken {
		out["token"] = t.token
	}
	return out
}

// createDeployToken is POST /projects/:id/deploy_tokens, validated like
// GitLab's: a name, known scopes, an expiry in ISO 8601 that is not past.
func (s *Server) createDeployToken(w http.ResponseWriter, r *http.Request, p *project) {
	var in struct {
		Name      string   `json:"name"`
		ExpiresAt *string  `json:"expires_at"`
		Username  string   `json:"username"`
		Scopes    []string `json:"scopes"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "the request body is not JSON")
		return
	}
	switch {
	case in.Name == "":
		writeError(w, http.StatusBadRequest, "name is missing")
		return
	case len(in.Scopes) == 0:
		writeError(w, http.StatusBadRequest, "scopes is missing")
		return
	}
	for _, sc := range in.Scopes {
		if !slices.Contains(deployTokenScopes, sc) {
			writeError(w, http.StatusBadRequest, "scopes does not have a valid value")
			return
		}
	}
	t := &deployToken{name: in.Name, username: in.Username, scopes: slices.Clone(in.Scopes)}
	if in.ExpiresAt != nil && *in.ExpiresAt != "" {
		at, err := time.Parse(time.RFC3339, *in.ExpiresAt)
		if err != nil {
			writeError(w, http.StatusBadRequest, "expires_at is invalid")
			return
		}
		if !s.cfg.Now().Before(at) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string]any{"expires_at": []string{"must be in the future"}}})
			return
		}
		t.expires = at
	}
	s.nextID++
	t.id = s.nextID
	if t.username == "" {
		t.username = "gitlab+deploy-token-" + strconv.Itoa(t.id)
	}
	var b [20]byte
	rand.Read(b[:]) // crypto/rand.Read never fails
	t.token = "gldt-" + hex.EncodeToString(b[:])
	p.deployTokens = append(p.deployTokens, t)
	s.git.DeployTokensCreated++
	writeJSON(w, http.StatusCreated, s.deployTokenJSON(t, true))
}

func (s *Server) listDeployTokens(w http.ResponseWriter, p *project) {
	list := make([]map[string]any, 0, len(p.deployTokens))
	for _, t := range p.deployTokens {
		list = append(list, s.deployTokenJSON(t, false))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) deleteDeployToken(w http.ResponseWriter, p *project, id string) {
	n, _ := strconv.Atoi(id)
	i := slices.IndexFunc(p.deployTokens, func(t *deployToken) bool { return t.id == n })
	if i < 0 {
		writeMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	p.deployTokens = slices.Delete(p.deployTokens, i, i+1)
	s.git.DeployTokensDeleted++
	w.WriteHeader(http.StatusNoContent)
}

// DeployTokens returns the names of project's deploy tokens that still
// work (not revoked, not expired), oldest first.
func (s *Server) DeployTokens(projectPath string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range p.deployTokens {
		if t.live(s.cfg.Now()) {
			names = append(names, t.name)
		}
	}
	return names, nil
}

// serveGit answers a request of git's smart HTTP protocol for a project,
// read-only, with vcs/gitserve.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.cfg.GitDir == "":
		http.Error(w, "gitlabtest serves no git: Config.GitDir is empty", http.StatusNotFound)
	case s.gitErr != nil:
		http.Error(w, "gitlabtest cannot serve git: "+s.gitErr.Error(), http.StatusInternalServerError)
	default:
		s.gitHandler.ServeHTTP(w, r)
	}
}

// authorizeGit lets a request for project path through as GitLab does
// for a private project: HTTP basic credentials that are the server's
// access token (any user name) or a live deploy token of the project
// with read_repository, with its user name.
func (s *Server) authorizeGit(r *http.Request, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.git.Requests++
	err := s.gitCheck(r, path)
	if err != nil {
		s.git.Refused++
	}
	return err
}

func (s *Server) gitCheck(r *http.Request, path string) error {
	const hidden = "the project you were looking for could not be found or you don't have permission to view it"
	user, password, ok := r.BasicAuth()
	if !ok || password == "" {
		return fmt.Errorf("%w: HTTP Basic: Access denied", gitserve.ErrUnauthenticated)
	}
	p := s.projects[path]
	if password != s.cfg.Token {
		now := s.cfg.Now()
		var own, known bool
		for _, q := range s.projects {
			for _, t := range q.deployTokens {
				if t.token == password && t.username == user && t.live(now) {
					known = true
					own = own || q == p && slices.Contains(t.scopes, "read_repository")
				}
			}
		}
		if !known {
			return fmt.Errorf("%w: HTTP Basic: Access denied", gitserve.ErrUnauthenticated)
		}
		if !own {
			return errors.New(hidden)
		}
	}
	if p == nil {
		return errors.New(hidden)
	}
	return nil
}
