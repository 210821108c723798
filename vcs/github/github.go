package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v62/github"

	"github.com/cikit/cikit/vcs"
)

// DefaultBaseURL is the REST API of github.com.
const DefaultBaseURL = "https://api.github.com/"

// DefaultTokenRefresh is how long before an installation token expires
// the Provider exchanges it for a new one.
const DefaultTokenRefresh = 5 * time.Minute

// maxDescription is how many characters GitHub keeps of a status
// description.
const maxDescription = 140

// Config configures a Provider. Exactly one of Token and AppID is set.
type Config struct {
	// BaseURL is the REST API's root: https://HOST/api/v3/ for GitHub
	// Enterprise Server, or a test server's URL. Default: DefaultBaseURL.
	BaseURL string
	// HTTPClient makes the requests. Default: a new http.Client.
	HTTPClient *http.Client
	// Token is a personal access (or other bearer) token.
	Token string
	// AppID is the GitHub App to authenticate as; PrivateKey is its
	// private key, PEM-encoded as GitHub hands it out (PKCS #1 or #8).
	AppID      int64
	PrivateKey []byte
	// TokenRefresh is how long before an installation token expires a
	// new one is exchanged. Default: DefaultTokenRefresh.
	TokenRefresh time.Duration
	// Now returns the current time: the JWT's claims, the tokens' expiry,
	// check runs' times and rate-limit waits are reckoned by it.
	// Default: time.Now.
	Now func() time.Time
	// CheckRuns makes SetStatus report check runs instead of commit
	// statuses (see the package documentation). GitHub lets only Apps
	// write check runs: it needs AppID.
	CheckRuns bool
}

// Provider is the vcs.Provider of GitHub. It is safe for concurrent use.
type Provider struct {
	// base is never used for a call: each call copies it with its
	// credentials, so no rate-limit memory of go-github's carries from
	// one call to the next.
	base  *gh.Client
	now   func() time.Time
	token string
	app   *app      // nil with a token
	runs  *runCache // nil without Config.CheckRuns
}

var (
	_ vcs.Provider   = (*Provider)(nil)
	_ vcs.PushLister = (*Provider)(nil)
	_ vcs.FileLister = (*Provider)(nil)
)

// New returns a Provider of cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TokenRefresh == 0 {
		cfg.TokenRefresh = DefaultTokenRefresh
	}
	base := gh.NewClient(cfg.HTTPClient)
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("github: BaseURL %q is not a URL: %w", cfg.BaseURL, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("github: BaseURL %q must be an http or https URL", cfg.BaseURL)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		base.BaseURL = u
	}
	p := &Provider{base: base, now: cfg.Now, token: cfg.Token}
	switch {
	case cfg.Token != "" && cfg.AppID != 0:
		return nil, errors.New("github: set Token or AppID, not both")
	case cfg.Token != "" && cfg.CheckRuns:
		return nil, errors.New("github: CheckRuns needs App authentication (AppID and PrivateKey): GitHub lets only Apps write check runs, not a Token")
	case cfg.Token != "":
	case cfg.AppID != 0:
		key, err := jwt.ParseRSAPrivateKeyFromPEM(cfg.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("github: PrivateKey of App %d: %w", cfg.AppID, err)
		}
		if cfg.TokenRefresh < 0 || cfg.TokenRefresh >= time.Hour {
			return nil, fmt.Errorf("github: TokenRefresh (%s) must be between 0 and an hour, the life of an installation token", cfg.TokenRefresh)
		}
		p.app = newApp(cfg.AppID, key, cfg.TokenRefresh)
		if cfg.CheckRuns {
			p.runs = newRunCache(checkRunCacheSize)
		}
	default:
		return nil, errors.New("github: Config needs a Token or an AppID with its PrivateKey")
	}
	return p, nil
}

// client returns a client authenticated for owner/repo.
func (p *Provider) client(ctx context.Context, owner, repo string) (*gh.Client, error) {
	if p.app == nil {
		return p.base.WithAuthToken(p.token), nil
	}
	tok, err := p.app.installationToken(ctx, p, owner, repo)
	if err != nil {
		return nil, err
	}
	return p.base.WithAuthToken(tok), nil
}

func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("github: repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// call runs fn with a client for repo, interpreting its error; what
// names the object for errors ("file x at y").
func call[T any](ctx context.Context, p *Provider, repo, what string, fn func(c *gh.Client, owner, name string) (T, error)) (T, error) {
	var zero T
	owner, name, err := splitRepo(repo)
	if err != nil {
		return zero, err
	}
	c, err := p.client(ctx, owner, name)
	if err != nil {
		return zero, err
	}
	v, err := fn(c, owner, name)
	if err != nil {
		return zero, p.interpretError(err, fmt.Sprintf("%s of %s", what, repo))
	}
	return v, nil
}

func (p *Provider) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	return p.ReadFileMax(ctx, repo, sha, path, -1)
}

// ReadFileMax is ReadFile of a file of at most max bytes (vcs.MaxReader):
// a larger one is refused from the size the contents API tells, before
// its blob is downloaded. A negative max is no bound.
func (p *Provider) ReadFileMax(ctx context.Context, repo, sha, path string, max int64) ([]byte, error) {
	return call(ctx, p, repo, fmt.Sprintf("file %s at %s", path, sha), func(c *gh.Client, owner, name string) ([]byte, error) {
		file, _, _, err := c.Repositories.GetContents(ctx, owner, name, path, &gh.RepositoryContentGetOptions{Ref: sha})
		if err != nil {
			return nil, err
		}
		if file == nil || file.GetType() != "file" {
			return nil, notFound("not a file")
		}
		if size := int64(file.GetSize()); max >= 0 && size > max {
			return nil, &vcs.FileTooLargeError{Path: path, Size: size, Max: max}
		}
		if file.GetEncoding() == "none" {
			// Over 1 MB the contents API leaves the content out; the
			// blob API serves up to 100 MB.
			data, _, err := c.Git.GetBlobRaw(ctx, owner, name, file.GetSHA())
			return data, err
		}
		s, err := file.GetContent()
		return []byte(s), err
	})
}

func (p *Provider) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	return call(ctx, p, repo, fmt.Sprintf("directory %s at %s", dir, sha), func(c *gh.Client, owner, name string) ([]string, error) {
		_, entries, _, err := c.Repositories.GetContents(ctx, owner, name, dir, &gh.RepositoryContentGetOptions{Ref: sha})
		if err != nil {
			return nil, err
		}
		if entries == nil {
			return nil, notFound("not a directory")
		}
		var names []string
		for _, e := range entries {
			if e.GetType() == "file" {
				names = append(names, e.GetName())
			}
		}
		if len(names) == 0 {
			// vcs.Provider's directories are made of files.
			return nil, notFound("no files")
		}
		slices.Sort(names)
		return names, nil
	})
}

// ListFiles returns the paths of the files below dir of repo at sha, at
// any depth, sorted (vcs.FileLister), from one recursive read of the
// commit's tree. Symbolic links are files; submodules are not listed. A
// tree too large for GitHub to list whole (it truncates at 100,000
// entries) lists as many files as GitHub gave when they are more than
// max, and is an error otherwise.
func (p *Provider) ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error) {
	files, err := call(ctx, p, repo, fmt.Sprintf("files below %q at %s", dir, sha), func(c *gh.Client, owner, name string) ([]string, error) {
		t, _, err := c.Git.GetTree(ctx, owner, name, sha, true)
		if err != nil {
			return nil, err
		}
		prefix := ""
		if dir != "" {
			prefix = strings.TrimSuffix(dir, "/") + "/"
		}
		var files []string
		below := false
		for _, e := range t.Entries {
			path := e.GetPath()
			if !strings.HasPrefix(path, prefix) {
				continue
			}
			below = true
			if e.GetType() == "blob" {
				files = append(files, path)
			}
		}
		slices.Sort(files)
		if t.GetTruncated() && (max <= 0 || len(files) <= max) {
			return nil, fmt.Errorf("the tree of %s is too large for GitHub to list", sha)
		}
		if !below {
			return nil, notFound("no such directory")
		}
		return files, nil
	})
	if err != nil {
		return nil, err
	}
	return vcs.CapFiles(files, max)
}

func (p *Provider) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	return call(ctx, p, repo, "ref "+ref, func(c *gh.Client, owner, name string) (string, error) {
		var r *gh.Reference
		var err error
		if strings.HasPrefix(ref, "refs/") {
			r, _, err = c.Git.GetRef(ctx, owner, name, ref)
		} else {
			// A branch wins over a tag of the same name, as in git.
			r, _, err = c.Git.GetRef(ctx, owner, name, "heads/"+ref)
			if isNotFound(err) {
				r, _, err = c.Git.GetRef(ctx, owner, name, "tags/"+ref)
			}
		}
		if err != nil {
			return "", err
		}
		obj := r.GetObject()
		// An annotated tag points at a tag object, which points at a
		// commit (or, rarely, another tag).
		for obj.GetType() == "tag" {
			t, _, err := c.Git.GetTag(ctx, owner, name, obj.GetSHA())
			if err != nil {
				return "", err
			}
			obj = t.GetObject()
		}
		if obj.GetType() != "commit" {
			return "", notFound(fmt.Sprintf("ref points at a %s", obj.GetType()))
		}
		return obj.GetSHA(), nil
	})
}

func (p *Provider) DefaultBranch(ctx context.Context, repo string) (string, error) {
	return call(ctx, p, repo, "repository", func(c *gh.Client, owner, name string) (string, error) {
		r, _, err := c.Repositories.Get(ctx, owner, name)
		return r.GetDefaultBranch(), err
	})
}

func (p *Provider) ChangedFiles(ctx context.Context, repo, base, head string) ([]string, error) {
	return call(ctx, p, repo, fmt.Sprintf("comparison %s...%s", base, head), func(c *gh.Client, owner, name string) ([]string, error) {
		seen := map[string]bool{}
		var listed, firstPage int
		var mergeBaseTree string
		opts := &gh.ListOptions{PerPage: 100, Page: 1}
		for {
			cmp, resp, err := c.Repositories.CompareCommits(ctx, owner, name, base, head, opts)
			if err != nil {
				return nil, err
			}
			if opts.Page == 1 {
				firstPage = len(cmp.Files)
				mergeBaseTree = cmp.GetMergeBaseCommit().GetCommit().GetTree().GetSHA()
			}
			listed += len(cmp.Files)
			for _, f := range cmp.Files {
				seen[f.GetFilename()] = true
				if f.GetPreviousFilename() != "" {
					seen[f.GetPreviousFilename()] = true
				}
			}
			if resp.NextPage == 0 {
				break
			}
			opts.Page = resp.NextPage
		}
		if firstPage >= compareFileCap && listed == firstPage {
			// GitHub documents the files of a comparison as listed on
			// its first page only, 300 at most: a full first page and
			// nothing after may be a cut list. The trees of the merge
			// base and of head tell the whole of it.
			return treeDiff(ctx, c, owner, name, mergeBaseTree, head)
		}
		return slices.Sorted(maps.Keys(seen)), nil
	})
}

// compareFileCap is the most changed files GitHub lists in a page of a
// comparison.
const compareFileCap = 300

// treeDiff returns the paths whose content differs between the trees of
// from and to (trees, commits or refs).
func treeDiff(ctx context.Context, c *gh.Client, owner, name, from, to string) ([]string, error) {
	a, err := treeFiles(ctx, c, owner, name, from)
	if err != nil {
		return nil, err
	}
	b, err := treeFiles(ctx, c, owner, name, to)
	if err != nil {
		return nil, err
	}
	var out []string
	for p, sha := range b {
		if a[p] != sha {
			out = append(out, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// treeFiles returns the blob (or submodule commit) of every path in the
// tree of sha.
func treeFiles(ctx context.Context, c *gh.Client, owner, name, sha string) (map[string]string, error) {
	t, _, err := c.Git.GetTree(ctx, owner, name, sha, true)
	if err != nil {
		return nil, err
	}
	if t.GetTruncated() {
		return nil, fmt.Errorf("the tree of %s is too large for GitHub to list", sha)
	}
	files := map[string]string{}
	for _, e := range t.Entries {
		if e.GetType() != "tree" {
			files[e.GetPath()] = e.GetSHA()
		}
	}
	return files, nil
}

func (p *Provider) OpenPullRequest(ctx context.Context, repo, branch string) (int, bool, error) {
	n, err := call(ctx, p, repo, "pull requests of branch "+branch, func(c *gh.Client, owner, name string) (int, error) {
		prs, _, err := c.PullRequests.List(ctx, owner, name, &gh.PullRequestListOptions{
			State: "open", Head: owner + ":" + branch, ListOptions: gh.ListOptions{PerPage: 1},
		})
		if err != nil || len(prs) == 0 {
			return 0, err
		}
		return prs[0].GetNumber(), nil
	})
	return n, n != 0, err
}

func (p *Provider) PullRequest(ctx context.Context, repo string, number int) (*vcs.PullRequest, error) {
	return call(ctx, p, repo, fmt.Sprintf("pull request %d", number), func(c *gh.Client, owner, name string) (*vcs.PullRequest, error) {
		pr, _, err := c.PullRequests.Get(ctx, owner, name, number)
		if err != nil {
			return nil, err
		}
		head, base := pr.GetHead(), pr.GetBase()
		// A deleted fork leaves head.repo null: its code is still not
		// the repository's own.
		headRepo := head.GetRepo().GetFullName()
		baseRepo := cmp.Or(base.GetRepo().GetFullName(), repo)
		return &vcs.PullRequest{
			Number:     pr.GetNumber(),
			Open:       pr.GetState() == "open",
			HeadRepo:   headRepo,
			HeadBranch: head.GetRef(),
			HeadSHA:    head.GetSHA(),
			BaseBranch: base.GetRef(),
			Fork:       !strings.EqualFold(headRepo, baseRepo),
		}, nil
	})
}

func (p *Provider) SetStatus(ctx context.Context, repo, sha string, st *vcs.Status) error {
	if err := st.Validate(); err != nil {
		return err
	}
	if p.runs != nil {
		return p.setCheckRun(ctx, repo, sha, st)
	}
	state, desc := commitState(st)
	_, err := call(ctx, p, repo, "commit "+sha, func(c *gh.Client, owner, name string) (struct{}, error) {
		// Empty fields are left out: GitHub takes null, not "", for no
		// target URL.
		_, _, err := c.Repositories.CreateStatus(ctx, owner, name, sha, &gh.RepoStatus{
			State: &state, Context: &st.Context, Description: optional(desc), TargetURL: optional(st.TargetURL),
		})
		return struct{}{}, err
	})
	return err
}

func (p *Provider) Pushes(ctx context.Context, repo string, since time.Time) ([]vcs.Push, error) {
	return call(ctx, p, repo, "events", func(c *gh.Client, owner, name string) ([]vcs.Push, error) {
		var pushes []vcs.Push // newest first, as GitHub lists events
		opts := &gh.ListOptions{PerPage: 100, Page: 1}
		for {
			events, resp, err := c.Activity.ListRepositoryEvents(ctx, owner, name, opts)
			if err != nil {
				return nil, err
			}
			older := false
			for _, e := range events {
				if e.GetCreatedAt().Time.Before(since) {
					older = true
					break
				}
				push, ok, err := pushOf(e)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
				if push.Tag != "" {
					// The webhook names an annotated tag's commit
					// (head_commit); the event only the tag object.
					if push.SHA, err = peel(ctx, c, owner, name, push.SHA); err != nil {
						return nil, err
					}
				}
				pushes = append(pushes, push)
			}
			if older || resp.NextPage == 0 {
				break
			}
			opts.Page = resp.NextPage
		}
		slices.Reverse(pushes)
		return pushes, nil
	})
}

// pushOf returns the push e records; ok is false for other events, for
// a ref's deletion, and for refs that are neither branches nor tags.
func pushOf(e *gh.Event) (push vcs.Push, ok bool, err error) {
	if e.GetType() != "PushEvent" {
		return vcs.Push{}, false, nil
	}
	var pe gh.PushEvent
	if e.RawPayload == nil {
		return vcs.Push{}, false, fmt.Errorf("PushEvent %s has no payload", e.GetID())
	}
	if err := json.Unmarshal(*e.RawPayload, &pe); err != nil {
		return vcs.Push{}, false, fmt.Errorf("payload of PushEvent %s: %w", e.GetID(), err)
	}
	head := pe.GetHead()
	if strings.Trim(head, "0") == "" {
		return vcs.Push{}, false, nil
	}
	push = vcs.Push{Before: pe.GetBefore(), SHA: head, At: e.GetCreatedAt().Time, Actor: e.GetActor().GetLogin()}
	if b, ok := strings.CutPrefix(pe.GetRef(), "refs/heads/"); ok {
		push.Branch = b
	} else if t, ok := strings.CutPrefix(pe.GetRef(), "refs/tags/"); ok {
		push.Tag = t
	} else {
		return vcs.Push{}, false, nil
	}
	return push, true, nil
}

// peel returns the commit sha names: sha itself when it is no tag
// object, else the commit its tag (or chain of tags) points at.
func peel(ctx context.Context, c *gh.Client, owner, name, sha string) (string, error) {
	for {
		t, _, err := c.Git.GetTag(ctx, owner, name, sha)
		if isNotFound(err) {
			return sha, nil
		}
		if err != nil {
			return "", err
		}
		sha = t.GetObject().GetSHA()
	}
}

// commitState maps st onto GitHub's commit status state and description
// (see the package documentation).
func commitState(st *vcs.Status) (state, description string) {
	desc := st.Description
	switch st.State {
	case vcs.StateRunning:
		state = "pending"
	case vcs.StateSkipped:
		state, desc = "success", cmp.Or(desc, "Skipped")
	case vcs.StateCancelled:
		state, desc = "error", cmp.Or(desc, "Cancelled")
	default:
		state = string(st.State)
	}
	if utf8.RuneCountInString(desc) > maxDescription {
		desc = string([]rune(desc)[:maxDescription-1]) + "…"
	}
	return state, desc
}

// interpretError converts go-github's errors to vcs's: not found, rate
// limits. what names the object asked about.
func (p *Provider) interpretError(err error, what string) error {
	var nf *notFoundError
	if errors.As(err, &nf) {
		return fmt.Errorf("github: %s: %s: %w", what, nf.why, vcs.ErrNotFound)
	}
	if retry, ok := p.rateLimited(err); ok {
		return &vcs.RateLimitError{RetryAfter: retry, Err: fmt.Errorf("github: %s: %w", what, err)}
	}
	if isNotFound(err) || noCommit(err) {
		return fmt.Errorf("github: %s: %w (%w)", what, vcs.ErrNotFound, err)
	}
	return fmt.Errorf("github: %s: %w", what, err)
}

// rateLimited reports whether err is GitHub refusing a call for a rate
// limit, and how long to wait. Headers come first (Retry-After, then
// X-RateLimit-Reset against the Provider's clock): go-github reckons its
// own waits on the wall clock.
func (p *Provider) rateLimited(err error) (time.Duration, bool) {
	var (
		resp     *http.Response
		fallback time.Duration
		limited  bool
	)
	var rl *gh.RateLimitError
	var abuse *gh.AbuseRateLimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &rl):
		resp, limited = rl.Response, true
		fallback = rl.Rate.Reset.Sub(p.now())
	case errors.As(err, &abuse):
		// go-github derives a secondary limit's wait from the primary
		// limit's reset when no Retry-After came; the headers decide here.
		resp, limited = abuse.Response, true
	case errors.As(err, &er) && er.Response != nil:
		resp = er.Response
		code := resp.StatusCode
		limited = code == http.StatusTooManyRequests ||
			code == http.StatusForbidden && (resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0")
	}
	if !limited {
		return 0, false
	}
	// GitHub asks for at least a minute when it names no time.
	wait := cmp.Or(fallback, time.Minute)
	if resp != nil {
		if s, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil {
			wait = time.Duration(s) * time.Second
		} else if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil &&
			resp.Header.Get("X-RateLimit-Remaining") == "0" {
			// The reset is the primary limit's, which every answer
			// names: it says when to retry only once that limit is spent.
			wait = time.Unix(s, 0).Sub(p.now())
		}
	}
	return max(wait, 0), true
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func isNotFound(err error) bool {
	var er *gh.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound
}

// noCommit reports GitHub's answer to a status on a commit it does not
// have: 422 "No commit found for SHA: …".
func noCommit(err error) bool {
	var er *gh.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity &&
		strings.HasPrefix(er.Message, "No commit found")
}

// notFoundError is what exists but is not what was asked for: a
// directory read as a file, a file listed as a directory.
type notFoundError struct{ why string }

func (e *notFoundError) Error() string { return e.why }

func notFound(why string) error { return &notFoundError{why} }
