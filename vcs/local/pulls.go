package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cikit/cikit/vcs"
)

// PullRequestOpenParams are the arguments of PullRequestOpen.
type PullRequestOpenParams struct {
	// Repo is the repository the pull request is of, and BaseBranch the
	// branch of it the pull request goes into.
	Repo       string
	BaseBranch string
	// HeadRepo is the repository HeadBranch is in: Repo when empty, a
	// fork otherwise.
	HeadRepo   string
	HeadBranch string
}

// PullRequestOpen opens a pull request and returns its number, the next
// of its repository from 1. Both branches must exist.
func (p *Provider) PullRequestOpen(ctx context.Context, params *PullRequestOpenParams) (int, error) {
	headRepo := cmp.Or(params.HeadRepo, params.Repo)
	if params.HeadBranch == "" || params.BaseBranch == "" {
		return 0, errors.New("local: a pull request needs a HeadBranch and a BaseBranch")
	}
	head, err := p.ResolveRef(ctx, headRepo, params.HeadBranch)
	if err != nil {
		return 0, err
	}
	if _, err := p.ResolveRef(ctx, params.Repo, params.BaseBranch); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.pulls[params.Repo]) + 1
	p.pulls[params.Repo] = append(p.pulls[params.Repo], &vcs.PullRequest{Number: n, Open: true, HeadRepo: headRepo,
		HeadBranch: params.HeadBranch, HeadSHA: head, BaseBranch: params.BaseBranch, Fork: headRepo != params.Repo})
	return n, nil
}

// PullRequestClose closes pull request number of repo.
func (p *Provider) PullRequestClose(repo string, number int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, err := p.pull(repo, number)
	if err != nil {
		return err
	}
	pr.Open = false
	return nil
}

func (p *Provider) pull(repo string, number int) (*vcs.PullRequest, error) {
	if number < 1 || number > len(p.pulls[repo]) {
		return nil, fmt.Errorf("local: pull request %d of %s: %w", number, repo, vcs.ErrNotFound)
	}
	return p.pulls[repo][number-1], nil
}

// OpenPullRequest returns the newest open pull request of repo whose head
// is branch of repo; pull requests from forks are not looked at.
func (p *Provider) OpenPullRequest(ctx context.Context, repo, branch string) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pulls := p.pulls[repo]
	for i := len(pulls) - 1; i >= 0; i-- {
		if pr := pulls[i]; pr.Open && !pr.Fork && pr.HeadBranch == branch {
			return pr.Number, true, nil
		}
	}
	return 0, false, nil
}

// PullRequest returns pull request number of repo, its HeadSHA the head
// branch's commit now (the last one seen, if the branch is gone).
func (p *Provider) PullRequest(ctx context.Context, repo string, number int) (*vcs.PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	pr, err := p.pull(repo, number)
	var c vcs.PullRequest
	if err == nil {
		c = *pr
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	switch head, err := p.ResolveRef(ctx, c.HeadRepo, c.HeadBranch); {
	case err == nil:
		c.HeadSHA = head
		p.mu.Lock()
		pr.HeadSHA = head
		p.mu.Unlock()
	case !errors.Is(err, vcs.ErrNotFound):
		return nil, err
	}
	return &c, nil
}

// SetStatus records st as the status of its context on commit sha of
// repo, which must exist.
func (p *Provider) SetStatus(ctx context.Context, repo, sha string, st *vcs.Status) error {
	if err := st.Validate(); err != nil {
		return err
	}
	if _, err := p.commit(ctx, repo, sha); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := repo + "@" + sha
	if p.statuses[k] == nil {
		p.statuses[k] = map[string]vcs.Status{}
	}
	p.statuses[k][st.Context] = *st
	return nil
}

// Statuses returns the latest status of each context posted on commit sha
// of repo, by context.
func (p *Provider) Statuses(repo, sha string) []vcs.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]vcs.Status, 0, len(p.statuses[repo+"@"+sha]))
	for _, st := range p.statuses[repo+"@"+sha] {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b vcs.Status) int { return cmp.Compare(a.Context, b.Context) })
	return out
}
