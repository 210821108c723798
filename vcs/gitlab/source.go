package gitlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	glapi "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/cikit/cikit"
)

// MaxSourceTTL is the longest a minted source can be asked to work: a
// checkout credential is for one job, and a day is past any job's
// timeout.
const MaxSourceTTL = 24 * time.Hour

// SourceScope is the one scope of the deploy tokens MintSource creates:
// git clone and fetch (read) of the project's repository, nothing else.
const SourceScope = "read_repository"

// sourceTokenPrefix starts the names of the deploy tokens MintSource
// creates, which the project's settings list.
const sourceTokenPrefix = "cikit-checkout-"

// minted is a deploy token MintSource created, for RevokeSource.
type minted struct {
	project string
	id      int64
	expires time.Time
}

// mintedTokens remembers the deploy tokens a Provider minted until they
// expire or are revoked.
type mintedTokens struct {
	mu      sync.Mutex
	byToken map[string]minted // by the token's value
}

// MintSource returns where and how a runner fetches repo (the project's
// path, "group/project"): the project's HTTP clone URL and a new project
// deploy token with the one scope read_repository, which can clone and
// fetch that project and nothing else (no push, no API, no other
// project), expiring ttl from now (at most MaxSourceTTL). Username is the
// deploy token's user name, which git must present with it.
//
// Each call creates its own deploy token (POST
// /projects/:id/deploy_tokens, after GET /projects/:id for the clone
// URL), named "cikit-checkout-…". GitLab keeps expired deploy tokens
// listed in the project's settings; RevokeSource deletes one when its job
// is done. The Provider's token needs the Maintainer role on the project
// to create deploy tokens; GitLab's 403 then is an error saying so.
// Other errors are those of the package: vcs.ErrNotFound for a project
// that does not exist (or that the token cannot see), ErrUnauthorized,
// and *vcs.RateLimitError for a 429.
func (p *Provider) MintSource(ctx context.Context, repo string, ttl time.Duration) (*cikit.CheckoutSource, error) {
	if ttl <= 0 || ttl > MaxSourceTTL {
		return nil, fmt.Errorf("gitlab: checkout credential of %s: ttl %s must be more than 0 and at most %s", repo, ttl, MaxSourceTTL)
	}
	if repo == "" {
		return nil, errors.New("gitlab: checkout credential: the project path is empty")
	}
	proj, resp, err := p.client.Projects.GetProject(repo, nil, glapi.WithContext(ctx))
	if err != nil {
		return nil, p.interpretError(resp, err, "reading project %s", repo)
	}
	u, err := url.Parse(proj.HTTPURLToRepo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("gitlab: project %s: clone URL %q is not an http(s) URL without credentials", repo, proj.HTTPURLToRepo)
	}
	expires := p.now().Add(ttl).UTC().Truncate(time.Second)
	var suffix [6]byte
	rand.Read(suffix[:]) // crypto/rand.Read never fails
	name := sourceTokenPrefix + hex.EncodeToString(suffix[:])
	dt, resp, err := p.client.DeployTokens.CreateProjectDeployToken(proj.ID, &glapi.CreateProjectDeployTokenOptions{
		Name:      &name,
		ExpiresAt: &expires,
		Scopes:    &[]string{SourceScope},
	}, glapi.WithContext(ctx))
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("gitlab: checkout credential of %s: GitLab refused to create a deploy token (403): the Provider's token needs the Maintainer role on the project and the api scope: %w", repo, err)
		}
		return nil, p.interpretError(resp, err, "creating a deploy token for %s", repo)
	}
	if dt.Token == "" || dt.Username == "" {
		return nil, fmt.Errorf("gitlab: checkout credential of %s: GitLab created deploy token %d without its token or user name", repo, dt.ID)
	}
	if !slices.Equal(dt.Scopes, []string{SourceScope}) {
		// Never hand out more than reading: take the token back.
		_, _ = p.client.DeployTokens.DeleteProjectDeployToken(proj.ID, dt.ID, glapi.WithContext(ctx))
		return nil, fmt.Errorf("gitlab: checkout credential of %s: GitLab gave deploy token %d the scopes %v, not only %s", repo, dt.ID, dt.Scopes, SourceScope)
	}
	if dt.ExpiresAt != nil {
		expires = dt.ExpiresAt.UTC()
	}
	p.minted.add(dt.Token, minted{project: repo, id: dt.ID, expires: expires}, p.now())
	return &cikit.CheckoutSource{URL: proj.HTTPURLToRepo, Username: dt.Username, Token: dt.Token, ExpiresAt: expires}, nil
}

// RevokeSource deletes the deploy token of src, minted by this Provider's
// MintSource, so that it stops working before it expires and leaves the
// project's list of deploy tokens. A token GitLab no longer has is not
// an error; one this Provider did not mint (or minted before a restart,
// or that expired) is, as the Provider cannot tell which it is.
func (p *Provider) RevokeSource(ctx context.Context, src *cikit.CheckoutSource) error {
	if src == nil || src.Token == "" {
		return errors.New("gitlab: revoking a checkout credential: the source has no token")
	}
	m, ok := p.minted.take(src.Token)
	if !ok {
		return fmt.Errorf("gitlab: revoking the checkout credential of %s: not a live deploy token this Provider minted", src)
	}
	resp, err := p.client.DeployTokens.DeleteProjectDeployToken(m.project, m.id, glapi.WithContext(ctx))
	if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
		p.minted.add(src.Token, m, p.now())
		return p.interpretError(resp, err, "deleting deploy token %d of %s", m.id, m.project)
	}
	return nil
}

// add remembers m under token and forgets the tokens expired by now.
func (t *mintedTokens) add(token string, m minted, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byToken == nil {
		t.byToken = map[string]minted{}
	}
	for k, v := range t.byToken {
		if !now.Before(v.expires) {
			delete(t.byToken, k)
		}
	}
	t.byToken[token] = m
}

// take returns and forgets what is known of token.
func (t *mintedTokens) take(token string) (minted, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.byToken[token]
	delete(t.byToken, token)
	return m, ok
}
