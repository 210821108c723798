package github

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v62/github"
	"golang.org/x/sync/singleflight"

	"github.com/cikit/cikit/vcs"
)

// app authenticates as a GitHub App: it finds each repository's
// installation and keeps an installation token per installation.
type app struct {
	id      int64
	key     *rsa.PrivateKey
	refresh time.Duration

	mu       sync.Mutex
	installs map[string]int64 // lower-cased "owner/repo" -> installation
	tokens   map[int64]installationToken
	flights  singleflight.Group
}

type installationToken struct {
	value   string
	expires time.Time
}

func newApp(id int64, key *rsa.PrivateKey, refresh time.Duration) *app {
	return &app{id: id, key: key, refresh: refresh, installs: map[string]int64{}, tokens: map[int64]installationToken{}}
}

// jwt signs the App's JWT: issued a minute ago, against clock drift
// between here and GitHub, and valid for nine minutes, under GitHub's
// limit of ten.
func (a *app) jwt(now time.Time) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(a.id, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	}).SignedString(a.key)
}

// ErrNotInstalled is matched by the errors of calls about a repository the
// provider's GitHub App is not installed on. GitHub answers alike for a
// repository that does not exist, so these errors match vcs.ErrNotFound
// too; an installation that disappeared since it was found (the App was
// uninstalled, maybe installed again under another id) is looked up anew
// instead.
var ErrNotInstalled = errors.New("github: the App is not installed on the repository")

// installationToken returns a token of the installation on owner/repo,
// from the cache while it has more than refresh to live. An installation
// that is gone (the App was uninstalled, maybe installed again under
// another id) is forgotten and looked up once more.
func (a *app) installationToken(ctx context.Context, p *Provider, owner, repo string) (string, error) {
	for try := 1; ; try++ {
		id, err := a.installation(ctx, p, owner, repo)
		if err != nil {
			return "", err
		}
		tok, err := a.token(ctx, p, id)
		if err != nil && try == 1 && errors.Is(err, ErrNotInstalled) {
			a.forget(strings.ToLower(owner+"/"+repo), id)
			continue
		}
		return tok, err
	}
}

// forget drops what the App knows of installation id, found for key.
func (a *app) forget(key string, id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.tokens, id)
	for k, v := range a.installs {
		if v == id || k == key {
			delete(a.installs, k)
		}
	}
}

// token returns a token of installation id.
func (a *app) token(ctx context.Context, p *Provider, id int64) (string, error) {
	if tok, ok := a.cached(id, p.now()); ok {
		return tok, nil
	}
	v, err := a.share(ctx, "token/"+strconv.FormatInt(id, 10), func() (any, error) {
		// A flight that ended just before this one began may have
		// stored a fresh token.
		if tok, ok := a.cached(id, p.now()); ok {
			return tok, nil
		}
		signed, err := a.jwt(p.now())
		if err != nil {
			return nil, fmt.Errorf("github: signing the JWT of App %d: %w", a.id, err)
		}
		it, _, err := p.base.WithAuthToken(signed).Apps.CreateInstallationToken(ctx, id, nil)
		if err != nil {
			if status(err) == http.StatusNotFound {
				return nil, fmt.Errorf("github: installation %d of App %d is gone: %w (%w)", id, a.id, ErrNotInstalled, err)
			}
			return nil, p.interpretError(err, fmt.Sprintf("token of installation %d of App %d", id, a.id))
		}
		a.mu.Lock()
		a.tokens[id] = installationToken{value: it.GetToken(), expires: it.GetExpiresAt().Time}
		a.mu.Unlock()
		return it.GetToken(), nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (a *app) cached(id int64, now time.Time) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tokens[id]
	return t.value, ok && now.Before(t.expires.Add(-a.refresh))
}

// installation returns the id of the App's installation on owner/repo,
// asking GitHub once per repository.
func (a *app) installation(ctx context.Context, p *Provider, owner, repo string) (int64, error) {
	key := strings.ToLower(owner + "/" + repo)
	a.mu.Lock()
	id, ok := a.installs[key]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	v, err := a.share(ctx, "installation/"+key, func() (any, error) {
		signed, err := a.jwt(p.now())
		if err != nil {
			return nil, fmt.Errorf("github: signing the JWT of App %d: %w", a.id, err)
		}
		in, _, err := p.base.WithAuthToken(signed).Apps.FindRepositoryInstallation(ctx, owner, repo)
		if err != nil {
			if status(err) == http.StatusNotFound {
				// GitHub cannot tell a repository without the App from
				// one that does not exist: both are not found.
				return nil, fmt.Errorf("github: installation of App %d on %s/%s: %w: %w (%w)", a.id, owner, repo, ErrNotInstalled, vcs.ErrNotFound, err)
			}
			return nil, p.interpretError(err, fmt.Sprintf("installation of App %d on %s/%s", a.id, owner, repo))
		}
		a.mu.Lock()
		a.installs[key] = in.GetID()
		a.mu.Unlock()
		return in.GetID(), nil
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// share runs fn once for all callers of key at the same time. fn runs
// on the first caller's ctx: when that caller gives up, the others, whose
// contexts live on, try again rather than fail with its cancellation.
func (a *app) share(ctx context.Context, key string, fn func() (any, error)) (any, error) {
	for {
		v, err, shared := a.flights.Do(key, fn)
		if err != nil && shared && ctx.Err() == nil &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return v, err
	}
}

// status returns the HTTP status of a go-github error, 0 if it has none.
func status(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}
