package gitlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	glapi "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/cikit/cikit/vcs"
)

// DefaultBaseURL is GitLab.com, the instance a zero Config.BaseURL means.
const DefaultBaseURL = "https://gitlab.com"

// DefaultRetryAfter is the RetryAfter of a 429 that says neither
// Retry-After nor RateLimit-Reset: GitLab's throttles count per minute.
const DefaultRetryAfter = time.Minute

// ErrUnauthorized is matched by the error of a call GitLab answered 401:
// the token is wrong, expired or revoked.
var ErrUnauthorized = errors.New("gitlab: the access token was refused (401 Unauthorized); check that it is valid and not expired or revoked")

// pageSize is what the provider asks for per page of a list: GitLab's
// most, so long lists cost few calls.
const pageSize = 100

// Config configures a Provider.
type Config struct {
	// BaseURL is the instance's URL, such as "https://gitlab.example.com"
	// (with or without /api/v4); DefaultBaseURL when empty.
	BaseURL string
	// Token is a project, group or personal access token.
	Token string
	// HTTPClient makes the requests; http.DefaultClient when nil.
	HTTPClient *http.Client
	// Now is the clock a RateLimit-Reset time is read against; time.Now
	// when nil.
	Now func() time.Time
}

// Provider is the vcs.Provider for one GitLab instance. It is safe for
// concurrent use.
type Provider struct {
	client *glapi.Client
	now    func() time.Time
	minted mintedTokens
}

var (
	_ vcs.Provider   = (*Provider)(nil)
	_ vcs.PushLister = (*Provider)(nil)
	_ vcs.FileLister = (*Provider)(nil)
)

// New returns a Provider for the instance and token of cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Token == "" {
		return nil, errors.New("gitlab: Config.Token is empty; GitLab's API needs a project, group or personal access token")
	}
	base := cmp.Or(cfg.BaseURL, DefaultBaseURL)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gitlab: Config.BaseURL %q is not an http or https URL such as %q", base, DefaultBaseURL)
	}
	hc := cmp.Or(cfg.HTTPClient, http.DefaultClient)
	client, err := glapi.NewClient(cfg.Token,
		glapi.WithBaseURL(base),
		glapi.WithHTTPClient(hc),
		glapi.WithoutRetries(),
		glapi.WithCustomLimiter(noLimit{}),
	)
	if err != nil {
		return nil, fmt.Errorf("gitlab: %w", err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{client: client, now: now}, nil
}

// noLimit replaces the client's limiter, which would otherwise tune itself
// from RateLimit-Limit headers and make calls wait: pacing is the caller's.
type noLimit struct{}

func (noLimit) Wait(ctx context.Context) error { return ctx.Err() }

// ReadFile returns the raw file at path of repo at commit sha.
func (p *Provider) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	data, resp, err := p.client.RepositoryFiles.GetRawFile(repo, path, &glapi.GetRawFileOptions{Ref: &sha}, glapi.WithContext(ctx))
	if err != nil {
		return nil, p.interpretError(resp, err, "reading %s at %s of %s", path, sha, repo)
	}
	return data, nil
}

// ReadDir returns the names of the files (blobs, symbolic links included)
// directly in dir of repo at sha, reading every page of the tree.
func (p *Provider) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	opt := &glapi.ListTreeOptions{Ref: &sha, ListOptions: glapi.ListOptions{PerPage: pageSize, Page: 1}}
	if dir != "" {
		opt.Path = &dir
	}
	var names []string
	entries := 0
	for {
		nodes, resp, err := p.client.Repositories.ListTree(repo, opt, glapi.WithContext(ctx))
		if err != nil {
			return nil, p.interpretError(resp, err, "listing %q at %s of %s", dir, sha, repo)
		}
		entries += len(nodes)
		for _, n := range nodes {
			if n.Type == "blob" {
				names = append(names, n.Name)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if entries == 0 {
		// Git has no empty directories: GitLab lists nothing for a path
		// that does not exist at the commit.
		return nil, fmt.Errorf("gitlab: listing %q at %s of %s: %w", dir, sha, repo, vcs.ErrNotFound)
	}
	slices.Sort(names)
	return names, nil
}

// ListFiles returns the paths of the files (blobs, symbolic links
// included) below dir of repo at sha, at any depth, sorted
// (vcs.FileLister), reading the recursive tree a page at a time and no
// further than max files.
func (p *Provider) ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error) {
	recursive := true
	opt := &glapi.ListTreeOptions{Ref: &sha, Recursive: &recursive, ListOptions: glapi.ListOptions{PerPage: pageSize, Page: 1}}
	if dir != "" {
		opt.Path = &dir
	}
	var files []string
	entries := 0
	for {
		nodes, resp, err := p.client.Repositories.ListTree(repo, opt, glapi.WithContext(ctx))
		if err != nil {
			return nil, p.interpretError(resp, err, "listing the files below %q at %s of %s", dir, sha, repo)
		}
		entries += len(nodes)
		for _, n := range nodes {
			if n.Type == "blob" {
				files = append(files, n.Path)
			}
		}
		if resp.NextPage == 0 || (max > 0 && len(files) > max) {
			break
		}
		opt.Page = resp.NextPage
	}
	if entries == 0 {
		// Git has no empty directories: GitLab lists nothing for a path
		// that does not exist at the commit.
		return nil, fmt.Errorf("gitlab: listing the files below %q at %s of %s: %w", dir, sha, repo, vcs.ErrNotFound)
	}
	slices.Sort(files)
	return vcs.CapFiles(files, max)
}

// ResolveRef returns the commit branch ref of repo points at, or, when
// there is no such branch, tag ref.
func (p *Provider) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	// A full name says which kind it is.
	if tag, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		t, resp, err := p.client.Tags.GetTag(repo, tag, glapi.WithContext(ctx))
		if err != nil {
			return "", p.interpretError(resp, err, "resolving tag %s of %s", tag, repo)
		}
		return t.Commit.ID, nil
	}
	ref = strings.TrimPrefix(ref, "refs/heads/")
	b, resp, err := p.client.Branches.GetBranch(repo, ref, glapi.WithContext(ctx))
	if err == nil {
		return b.Commit.ID, nil
	}
	if !errors.Is(err, glapi.ErrNotFound) {
		return "", p.interpretError(resp, err, "resolving %s of %s", ref, repo)
	}
	t, resp, err := p.client.Tags.GetTag(repo, ref, glapi.WithContext(ctx))
	if err != nil {
		return "", p.interpretError(resp, err, "resolving %s of %s (neither a branch nor a tag)", ref, repo)
	}
	return t.Commit.ID, nil
}

// DefaultBranch returns repo's default_branch.
func (p *Provider) DefaultBranch(ctx context.Context, repo string) (string, error) {
	proj, resp, err := p.client.Projects.GetProject(repo, nil, glapi.WithContext(ctx))
	if err != nil {
		return "", p.interpretError(resp, err, "reading project %s", repo)
	}
	if proj.DefaultBranch == "" {
		return "", fmt.Errorf("gitlab: project %s has no default branch (its repository is empty): %w", repo, vcs.ErrNotFound)
	}
	return proj.DefaultBranch, nil
}

// ChangedFiles compares head with its merge base with base (straight=false)
// and returns the old and new path of each diff.
func (p *Provider) ChangedFiles(ctx context.Context, repo, base, head string) ([]string, error) {
	straight := false
	cmpr, resp, err := p.client.Repositories.Compare(repo, &glapi.CompareOptions{From: &base, To: &head, Straight: &straight}, glapi.WithContext(ctx))
	if err != nil {
		return nil, p.interpretError(resp, err, "comparing %s...%s of %s", base, head, repo)
	}
	if cmpr.CompareTimeout {
		return nil, fmt.Errorf("gitlab: comparing %s...%s of %s: GitLab timed out and returned a partial diff", base, head, repo)
	}
	var paths []string
	for _, d := range cmpr.Diffs {
		paths = append(paths, d.OldPath, d.NewPath)
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// OpenPullRequest returns the newest opened merge request of repo from its
// own branch; one from a fork's branch of the same name is not it.
func (p *Provider) OpenPullRequest(ctx context.Context, repo, branch string) (int, bool, error) {
	state := "opened"
	opt := &glapi.ListProjectMergeRequestsOptions{State: &state, SourceBranch: &branch,
		ListOptions: glapi.ListOptions{PerPage: pageSize, Page: 1}}
	for {
		mrs, resp, err := p.client.MergeRequests.ListProjectMergeRequests(repo, opt, glapi.WithContext(ctx))
		if err != nil {
			return 0, false, p.interpretError(resp, err, "listing merge requests of %s from %s", repo, branch)
		}
		for _, mr := range mrs {
			if mr.SourceProjectID == mr.TargetProjectID {
				return int(mr.IID), true, nil
			}
		}
		if resp.NextPage == 0 {
			return 0, false, nil
		}
		opt.Page = resp.NextPage
	}
}

// PullRequest returns merge request number (its IID) of repo. HeadRepo of
// a fork's merge request is the fork's path, or "" when the fork is gone.
func (p *Provider) PullRequest(ctx context.Context, repo string, number int) (*vcs.PullRequest, error) {
	mr, resp, err := p.client.MergeRequests.GetMergeRequest(repo, int64(number), nil, glapi.WithContext(ctx))
	if err != nil {
		return nil, p.interpretError(resp, err, "reading merge request !%d of %s", number, repo)
	}
	pr := &vcs.PullRequest{
		Number:     int(mr.IID),
		Open:       mr.State == "opened",
		HeadRepo:   repo,
		HeadBranch: mr.SourceBranch,
		HeadSHA:    mr.SHA,
		BaseBranch: mr.TargetBranch,
		Fork:       mr.SourceProjectID != mr.TargetProjectID,
	}
	if pr.Fork {
		pr.HeadRepo = ""
		src, resp, err := p.client.Projects.GetProject(mr.SourceProjectID, nil, glapi.WithContext(ctx))
		switch {
		case err == nil:
			pr.HeadRepo = src.PathWithNamespace
		case !errors.Is(err, glapi.ErrNotFound):
			return nil, p.interpretError(resp, err, "reading the source project %d of merge request !%d of %s", mr.SourceProjectID, number, repo)
		}
	}
	return pr, nil
}

// zeroSHA is the Before of a push that created its ref: GitLab's
// commit_from is null there.
const zeroSHA = "0000000000000000000000000000000000000000"

// Pushes reads repo's push events, every page, oldest first. GitLab's
// after is a date and exclusive, so the provider asks from the day before
// since's (in UTC, GitLab's days) and drops what came before since itself.
// Deleting a ref is a push event too, with no commit_to; it is skipped.
func (p *Provider) Pushes(ctx context.Context, repo string, since time.Time) ([]vcs.Push, error) {
	action, sort := glapi.PushedEventType, "asc"
	after := glapi.ISOTime(since.UTC().AddDate(0, 0, -1))
	opt := &glapi.ListProjectVisibleEventsOptions{Action: &action, After: &after, Sort: &sort,
		ListOptions: glapi.ListOptions{PerPage: pageSize, Page: 1}}
	var out []vcs.Push
	for {
		events, resp, err := p.client.Events.ListProjectVisibleEvents(repo, opt, glapi.WithContext(ctx))
		if err != nil {
			return nil, p.interpretError(resp, err, "listing the push events of %s", repo)
		}
		for _, e := range events {
			d := e.PushData
			if d.CommitTo == "" {
				continue
			}
			at, err := time.Parse(time.RFC3339, e.CreatedAt)
			if err != nil {
				return nil, fmt.Errorf("gitlab: push event %d of %s: created_at %q is not an RFC 3339 time", e.ID, repo, e.CreatedAt)
			}
			if at.Before(since) {
				continue
			}
			push := vcs.Push{Before: cmp.Or(d.CommitFrom, zeroSHA), SHA: d.CommitTo, At: at, Actor: e.AuthorUsername}
			switch d.RefType {
			case "branch":
				push.Branch = d.Ref
			case "tag":
				// An annotated tag's commit_to is the tag object; the
				// webhook names its commit, and so must the push.
				push.Tag = d.Ref
				t, resp, err := p.client.Tags.GetTag(repo, d.Ref, glapi.WithContext(ctx))
				switch {
				case err == nil && t.Commit != nil:
					push.SHA = t.Commit.ID
				case err != nil && errors.Is(err, glapi.ErrNotFound):
					continue // deleted since
				case err != nil:
					return nil, p.interpretError(resp, err, "resolving tag %s of %s", d.Ref, repo)
				}
			default:
				return nil, fmt.Errorf("gitlab: push event %d of %s: ref_type %q is neither branch nor tag", e.ID, repo, d.RefType)
			}
			out = append(out, push)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

var states = map[vcs.State]glapi.BuildStateValue{
	vcs.StatePending:   glapi.Pending,
	vcs.StateRunning:   glapi.Running,
	vcs.StateSuccess:   glapi.Success,
	vcs.StateFailure:   glapi.Failed,
	vcs.StateCancelled: glapi.Canceled,
	vcs.StateSkipped:   glapi.Skipped,
}

// transition matches GitLab's refusal to move a pending or running status
// to the state it has.
var transition = regexp.MustCompile(`Cannot transition status via :\w+ from :(\w+)`)

// SetStatus posts st on commit sha of repo as the commit status named
// st.Context. Posting the state the status already has succeeds: GitLab
// refuses it for pending and running (400 "Cannot transition status"),
// which for the caller is the status being as asked.
func (p *Provider) SetStatus(ctx context.Context, repo, sha string, st *vcs.Status) error {
	if err := st.Validate(); err != nil {
		return err
	}
	opt := &glapi.SetCommitStatusOptions{State: states[st.State], Name: &st.Context}
	if st.Description != "" {
		opt.Description = &st.Description
	}
	if st.TargetURL != "" {
		opt.TargetURL = &st.TargetURL
	}
	_, resp, err := p.client.Commits.SetCommitStatus(repo, sha, opt, glapi.WithContext(ctx))
	if err != nil {
		var er *glapi.ErrorResponse
		if errors.As(err, &er) && er.StatusCode == http.StatusBadRequest {
			if m := transition.FindStringSubmatch(er.Message); m != nil && m[1] == string(opt.State) {
				return nil
			}
		}
		return p.interpretError(resp, err, "setting status %q on %s of %s", st.Context, sha, repo)
	}
	return nil
}

// interpretError turns the client's error into the vcs package's: not
// found, rate limited, or wrapped with what was being done.
func (p *Provider) interpretError(resp *glapi.Response, err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var er *glapi.ErrorResponse
	if !errors.As(err, &er) {
		return fmt.Errorf("gitlab: %s: %w", what, err)
	}
	switch er.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("gitlab: %s: %w", what, vcs.ErrNotFound)
	case http.StatusUnauthorized:
		return fmt.Errorf("gitlab: %s: %w", what, ErrUnauthorized)
	case http.StatusTooManyRequests:
		var h http.Header
		if resp != nil {
			h = resp.Header
		}
		return &vcs.RateLimitError{RetryAfter: p.retryAfter(h), Err: fmt.Errorf("gitlab: %s: %w", what, err)}
	}
	return fmt.Errorf("gitlab: %s: %w", what, err)
}

// retryAfter reads how long GitLab asks to wait: Retry-After in seconds
// or as a date, else RateLimit-Reset as a Unix time.
func (p *Provider) retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil {
			return max(0, time.Duration(secs)*time.Second)
		}
		if at, err := http.ParseTime(v); err == nil {
			return max(0, at.Sub(p.now()))
		}
	}
	if v := h.Get("RateLimit-Reset"); v != "" {
		if unix, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(0, time.Unix(unix, 0).Sub(p.now()))
		}
	}
	return DefaultRetryAfter
}
