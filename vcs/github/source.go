package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/cikit/cikit"
)

// SourceUsername is the user name git presents with an installation
// token, as GitHub documents for cloning with one.
const SourceUsername = "x-access-token"

// MaxSourceTTL is the longest a minted source can be asked to work.
// GitHub's installation tokens last an hour from their creation and
// cannot be made to last longer; the ten minutes less leave room for
// the time the request takes and for a clock here ahead of GitHub's.
const MaxSourceTTL = 50 * time.Minute

// ErrCannotMint is matched by the error of MintSource on a Provider that
// authenticates with a personal access token: such a token cannot be
// narrowed to one repository or made read-only, and handing it to a
// runner would hand over every repository it can write.
var ErrCannotMint = errors.New("github: minting a checkout credential needs App authentication (Config.AppID and PrivateKey): a personal access token cannot be narrowed to one read-only repository")

// MintSource returns where and how a runner fetches repo ("owner/name"):
// the repository's clone URL and a new installation token of the
// Provider's App, narrowed to that one repository and to the permission
// contents: read, with SourceUsername as its user name. The token cannot
// read the App's other repositories, push, or call any API but reading
// contents (and metadata, which GitHub grants every token).
//
// ttl is how long the credential must work, at most MaxSourceTTL. GitHub
// does not shorten its tokens: the token works for the hour GitHub gives
// it (ExpiresAt says until when) unless RevokeSource ends it first. A
// token GitHub says expires before ttl is over is an error.
//
// Every call asks GitHub for a new token (one request: POST
// /app/installations/{id}/access_tokens, after the installation is
// known), so each job gets its own; tokens are not cached. Errors are
// those of the package: ErrNotInstalled (and vcs.ErrNotFound) for a
// repository the App is not installed on, *vcs.RateLimitError when GitHub
// refuses for its rate limit, and an error naming the missing permission
// when the installation was not granted contents: read.
func (p *Provider) MintSource(ctx context.Context, repo string, ttl time.Duration) (*cikit.CheckoutSource, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 || ttl > MaxSourceTTL {
		return nil, fmt.Errorf("github: checkout credential of %s: ttl %s must be more than 0 and at most %s, within the hour an installation token lives", repo, ttl, MaxSourceTTL)
	}
	if p.app == nil {
		return nil, ErrCannotMint
	}
	for try := 1; ; try++ {
		id, err := p.app.installation(ctx, p, owner, name)
		if err != nil {
			return nil, err
		}
		src, err := p.mint(ctx, id, owner, name, ttl)
		if err != nil && try == 1 && errors.Is(err, ErrNotInstalled) {
			// The installation went away since it was found: look for
			// the App's installation on the repository once more.
			p.app.forget(strings.ToLower(owner+"/"+name), id)
			continue
		}
		return src, err
	}
}

// mint asks installation id for a token of owner/name alone, contents:
// read.
func (p *Provider) mint(ctx context.Context, id int64, owner, name string, ttl time.Duration) (*cikit.CheckoutSource, error) {
	repo := owner + "/" + name
	signed, err := p.app.jwt(p.now())
	if err != nil {
		return nil, fmt.Errorf("github: signing the JWT of App %d: %w", p.app.id, err)
	}
	read := "read"
	it, _, err := p.base.WithAuthToken(signed).Apps.CreateInstallationToken(ctx, id, &gh.InstallationTokenOptions{
		Repositories: []string{name},
		Permissions:  &gh.InstallationPermissions{Contents: &read},
	})
	what := fmt.Sprintf("checkout credential of %s from installation %d of App %d", repo, id, p.app.id)
	switch {
	case err == nil:
	case status(err) == http.StatusNotFound:
		return nil, fmt.Errorf("github: %s: the installation is gone: %w (%w)", what, ErrNotInstalled, err)
	case status(err) == http.StatusUnprocessableEntity:
		// GitHub refuses a repository the installation does not cover
		// and permissions it was not granted alike.
		return nil, fmt.Errorf("github: %s: GitHub refused to narrow a token to the repository with contents: read; the App needs the Contents (read) permission and access to the repository: %w", what, err)
	default:
		return nil, p.interpretError(err, what)
	}
	if it.GetToken() == "" {
		return nil, fmt.Errorf("github: %s: GitHub answered without a token", what)
	}
	if got := it.GetPermissions().GetContents(); got != "read" {
		return nil, fmt.Errorf("github: %s: the token GitHub issued has contents %q, not read", what, got)
	}
	expires := it.GetExpiresAt().Time
	if left := expires.Sub(p.now()); left < ttl {
		return nil, fmt.Errorf("github: %s: the token expires at %s, in %s, before the %s asked for", what, expires.Format(time.RFC3339), left.Round(time.Second), ttl)
	}
	cloneURL, err := p.cloneURL(ctx, it, owner, name)
	if err != nil {
		return nil, err
	}
	return &cikit.CheckoutSource{URL: cloneURL, Username: SourceUsername, Token: it.GetToken(), ExpiresAt: expires}, nil
}

// cloneURL returns the HTTPS clone URL of owner/name: from the token's
// answer, which lists the repositories it was narrowed to, else from the
// repository itself, read with the new token.
func (p *Provider) cloneURL(ctx context.Context, it *gh.InstallationToken, owner, name string) (string, error) {
	raw := ""
	for _, r := range it.Repositories {
		if strings.EqualFold(r.GetName(), name) {
			raw = r.GetCloneURL()
		}
	}
	if raw == "" {
		r, _, err := p.base.WithAuthToken(it.GetToken()).Repositories.Get(ctx, owner, name)
		if err != nil {
			return "", p.interpretError(err, "repository "+owner+"/"+name)
		}
		raw = r.GetCloneURL()
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("github: repository %s/%s: clone URL %q is not an http(s) URL without credentials", owner, name, raw)
	}
	return raw, nil
}

// RevokeSource ends the token of src, minted by MintSource, before it
// expires: how a job's credential stops working when the job does. A
// token already expired or revoked is not an error.
func (p *Provider) RevokeSource(ctx context.Context, src *cikit.CheckoutSource) error {
	if src == nil || src.Token == "" {
		return errors.New("github: revoking a checkout credential: the source has no token")
	}
	_, err := p.base.WithAuthToken(src.Token).Apps.RevokeInstallationToken(ctx)
	if err == nil || status(err) == http.StatusUnauthorized {
		return nil
	}
	return p.interpretError(err, "revoking the checkout credential of "+src.String())
}
