package auth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// maxGitHubUserBytes bounds GitHub's answer to GET /user.
const maxGitHubUserBytes = 1 << 20

// GitHubConfig configures sign-in to the web UI with a GitHub OAuth app.
// GitHub's OAuth is not OpenID Connect: who signed in is read from its
// API (GET /user), and the user is known by GitHub's numeric user ID.
// Anyone with a GitHub account may sign in, with no role but
// DefaultBindings.
type GitHubConfig struct {
	// ClientID, ClientSecret and RedirectURL (the platform's
	// /auth/callback) are the OAuth app's. Required.
	ClientID, ClientSecret, RedirectURL string
	// BaseURL is GitHub's web address (default https://github.com; a
	// GitHub Enterprise server's otherwise), APIURL its API's (default
	// https://api.github.com).
	BaseURL, APIURL string
	// DefaultBindings are granted to a user at their first sign-in.
	DefaultBindings []Binding
	// HTTPClient calls GitHub; Timeout bounds each call (default
	// DefaultOIDCTimeout).
	HTTPClient *http.Client
	Timeout    time.Duration
}

type githubFlow struct {
	cfg GitHubConfig
	oc  *oauth2.Config
}

func newGitHubFlow(cfg *GitHubConfig) (*githubFlow, error) {
	c := *cfg
	if c.ClientID == "" || c.RedirectURL == "" {
		return nil, errors.New("auth: GitHubConfig needs ClientID and RedirectURL")
	}
	for _, b := range c.DefaultBindings {
		if b.Role <= RoleNone || b.Role > RoleAdmin || validScope(b.Org, b.Repo) != nil {
			return nil, fmt.Errorf("auth: GitHubConfig.DefaultBindings: %s on %s is not a valid binding", b.Role, where(b.Org, b.Repo))
		}
	}
	c.BaseURL = strings.TrimSuffix(cmp.Or(c.BaseURL, "https://github.com"), "/")
	c.APIURL = strings.TrimSuffix(cmp.Or(c.APIURL, "https://api.github.com"), "/")
	c.Timeout = cmp.Or(c.Timeout, DefaultOIDCTimeout)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout}
	}
	oc := &oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL, Scopes: []string{"read:user"},
		Endpoint: oauth2.Endpoint{AuthURL: c.BaseURL + "/login/oauth/authorize", TokenURL: c.BaseURL + "/login/oauth/access_token"}}
	return &githubFlow{cfg: c, oc: oc}, nil
}

func (f *githubFlow) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, f.cfg.Timeout)
	return context.WithValue(ctx, oauth2.HTTPClient, f.cfg.HTTPClient), cancel
}

func (f *githubFlow) defaults() []Binding { return f.cfg.DefaultBindings }

func (f *githubFlow) authURL(_ context.Context, st *loginState) (string, error) {
	return f.oc.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier)), nil
}

// githubUser is what sign-in reads of GET /user.
type githubUser struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

func (f *githubFlow) identify(ctx context.Context, code string, st *loginState) (*identity, error) {
	tok, err := f.oc.Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, fmt.Errorf("exchanging the authorization code failed: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.APIURL+"/user", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	tok.SetAuthHeader(req)
	resp, err := f.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the GitHub user failed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGitHubUserBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the GitHub user failed: %w", err)
	}
	if resp.StatusCode != http.StatusOK || len(body) > maxGitHubUserBytes {
		return nil, fmt.Errorf("reading the GitHub user failed: GitHub answered %s", resp.Status)
	}
	var u githubUser
	if err := json.Unmarshal(body, &u); err != nil || u.ID <= 0 || u.Login == "" {
		return nil, errors.New("reading the GitHub user failed: the answer has no id and login")
	}
	return &identity{issuer: f.cfg.BaseURL, subject: strconv.FormatInt(u.ID, 10),
		claims: idClaims{Username: u.Login, Name: u.Name, Email: u.Email}}, nil
}
