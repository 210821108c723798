package platform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/gitserve"
)

// gitPrefix is where the platform serves its local repositories over
// git's smart HTTP protocol, read-only, for runners to fetch the commits
// of their jobs with the job's token.
const gitPrefix = "/git/"

// gitJobUser is the user name of the basic credentials of a fetch from
// the platform's git server; the password is the job's token.
const gitJobUser = "cikit-job"

// sourceTTL is how long a forge's credential for one job must work: the
// checkout happens as the job starts, actions/checkout steps later.
const sourceTTL = time.Hour

// gitHandler serves the local repositories to the runners of their jobs:
// a fetch is allowed with a live job token of a run of that repository
// (fleet.Server.AuthorizeFetch), nothing else, and nothing can be pushed.
func (p *Platform) gitHandler() (http.Handler, error) {
	h, err := gitserve.New(gitserve.Config{Root: p.localRoot(), Authorize: func(r *http.Request, repo string) error {
		_, token, ok := r.BasicAuth()
		if !ok || token == "" {
			return gitserve.ErrUnauthenticated
		}
		_, err := p.fleet.AuthorizeFetch(r.Context(), token, repo)
		switch {
		case errors.Is(err, fleet.ErrFetchRefused):
			return err
		case err != nil:
			return fmt.Errorf("%w: %v", gitserve.ErrUnavailable, err)
		}
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("platform: git server: %w", err)
	}
	return http.StripPrefix(gitPrefix[:len(gitPrefix)-1], h), nil
}

// sourceMinter gives each claimed job where to fetch its commit from: the
// platform's own git server with the job's token for local repositories;
// an installation token narrowed to the repository with contents: read
// on GitHub (which needs App authentication); a read-only deploy token on
// GitLab.
func (p *Platform) sourceMinter() fleet.SourceMinter {
	return fleet.SourceMinterFunc(func(ctx context.Context, run *cikit.RunContext, job fleet.JobRef) (*cikit.CheckoutSource, error) {
		if run == nil || run.Repository == "" {
			return nil, nil // a run of no repository: nothing to fetch
		}
		var (
			src    *cikit.CheckoutSource
			err    error
			revoke func(context.Context, *cikit.CheckoutSource) error
		)
		switch pr := p.provider.(type) {
		case *github.Provider:
			src, err = pr.MintSource(ctx, run.Repository, github.MaxSourceTTL)
			revoke = pr.RevokeSource
		case *gitlab.Provider:
			src, err = pr.MintSource(ctx, run.Repository, sourceTTL)
			revoke = pr.RevokeSource
		case vcs.Provider:
			// The job token stops working when the attempt ends.
			return &cikit.CheckoutSource{URL: p.url + gitPrefix + run.Repository + ".git", Username: gitJobUser, Token: job.Token}, nil
		default:
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		p.sources.add(&mintedSource{src: src, repo: run.Repository, job: job, revoke: revoke})
		return src, nil
	})
}
