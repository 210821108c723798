package gitlab_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

type bundle struct {
	srv   *gitlabtest.Server
	url   string
	http  *http.Client
	clock *clocktest.Clock
	p     *gitlab.Provider
}

func setup(t *testing.T, cfg gitlabtest.Config) *bundle {
	t.Helper()
	c := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Now = c.Now
	srv := gitlabtest.New(cfg)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	b := &bundle{srv: srv, url: ts.URL, http: ts.Client(), clock: c}
	b.p = b.provider(t, srv.Token())
	return b
}

func (b *bundle) provider(t *testing.T, token string) *gitlab.Provider {
	t.Helper()
	p, err := gitlab.New(gitlab.Config{BaseURL: b.url, Token: token, HTTPClient: b.http, Now: b.clock.Now})
	require.NoError(t, err)
	return p
}

func (b *bundle) project(t *testing.T, path, defaultBranch string) {
	t.Helper()
	_, err := b.srv.CreateProject(path, defaultBranch)
	require.NoError(t, err)
}

func (b *bundle) commit(t *testing.T, project, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	sha, err := b.srv.Commit(project, branch, files, deleted...)
	require.NoError(t, err)
	return sha
}

func (b *bundle) mergeRequest(t *testing.T, project, source, branch, target string) int {
	t.Helper()
	iid, err := b.srv.OpenMergeRequest(project, source, branch, target)
	require.NoError(t, err)
	return iid
}

const repo = "acme/platform/api" // a nested group

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := gitlab.New(gitlab.Config{})
	require.ErrorContains(t, err, "Config.Token is empty")
	_, err = gitlab.New(gitlab.Config{Token: "t", BaseURL: "gitlab.example.com"})
	require.ErrorContains(t, err, `Config.BaseURL "gitlab.example.com" is not an http or https URL`)
	p, err := gitlab.New(gitlab.Config{Token: "t"})
	require.NoError(t, err)
	require.NotNil(t, p)
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	first := b.commit(t, repo, "main", map[string]string{".gitlab-ci.yml": "stages: [build]\n", "ci/jobs.v2.yml": "build: {}\n"})
	second := b.commit(t, repo, "main", map[string]string{".gitlab-ci.yml": "stages: [test]\n"})

	data, err := b.p.ReadFile(ctx, repo, first, ".gitlab-ci.yml")
	require.NoError(t, err)
	require.Equal(t, "stages: [build]\n", string(data), "the file as it was at the commit")
	data, err = b.p.ReadFile(ctx, repo, second, ".gitlab-ci.yml")
	require.NoError(t, err)
	require.Equal(t, "stages: [test]\n", string(data))
	data, err = b.p.ReadFile(ctx, repo, second, "ci/jobs.v2.yml")
	require.NoError(t, err, "a path with a slash and dots is encoded as one segment")
	require.Equal(t, "build: {}\n", string(data))

	for name, call := range map[string]func() error{
		"missing file": func() error { _, err := b.p.ReadFile(ctx, repo, first, "nope.yml"); return err },
		"missing commit": func() error {
			_, err := b.p.ReadFile(ctx, repo, "0000000000000000000000000000000000000000", ".gitlab-ci.yml")
			return err
		},
		"missing project": func() error { _, err := b.p.ReadFile(ctx, "acme/other", first, ".gitlab-ci.yml"); return err },
	} {
		err := call()
		require.ErrorIs(t, err, vcs.ErrNotFound, name)
		require.True(t, vcs.IsNotFound(err), name)
	}
}

func TestReadDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	files := map[string]string{"README.md": "hi", ".github/workflows/nested/x.yml": "x"}
	var want []string
	for i := range 230 { // three pages of 100
		name := fmt.Sprintf("w%03d.yml", i)
		files[".github/workflows/"+name] = "on: push"
		want = append(want, name)
	}
	sha := b.commit(t, repo, "main", files)

	before := b.srv.Requests()
	names, err := b.p.ReadDir(ctx, repo, sha, ".github/workflows")
	require.NoError(t, err)
	require.Equal(t, want, names, "every page, files only, sorted")
	require.Equal(t, 3, b.srv.Requests()-before, "one request per page")

	names, err = b.p.ReadDir(ctx, repo, sha, "")
	require.NoError(t, err)
	require.Equal(t, []string{"README.md"}, names, "the root; .github is a directory")

	_, err = b.p.ReadDir(ctx, repo, sha, "nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	_, err = b.p.ReadDir(ctx, "acme/other", sha, "")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestResolveRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	one := b.commit(t, repo, "main", map[string]string{"a": "1"})
	two := b.commit(t, repo, "feature/login", map[string]string{"a": "2"})
	require.NoError(t, b.srv.Tag(repo, "v1.0.0", one))

	for ref, want := range map[string]string{"main": one, "feature/login": two, "v1.0.0": one} {
		sha, err := b.p.ResolveRef(ctx, repo, ref)
		require.NoError(t, err, ref)
		require.Equal(t, want, sha, ref)
	}
	_, err := b.p.ResolveRef(ctx, repo, "nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	require.ErrorContains(t, err, "neither a branch nor a tag")
}

func TestDefaultBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "trunk")
	br, err := b.p.DefaultBranch(ctx, repo)
	require.NoError(t, err)
	require.Equal(t, "trunk", br)
	_, err = b.p.DefaultBranch(ctx, "acme/nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestChangedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	b.commit(t, repo, "main", map[string]string{"a": "a", "b": "b content", "c": "c"})
	b.commit(t, repo, "feature", map[string]string{"a": "a changed", "b2": "b content", "d": "d"}, "b")
	feature := b.commit(t, repo, "feature", map[string]string{"d": "d again"})
	main := b.commit(t, repo, "main", map[string]string{"c": "c changed", "e": "e"})

	files, err := b.p.ChangedFiles(ctx, repo, main, feature)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "b2", "d"}, files,
		"from the merge base: main's own changes (c, e) are not the branch's; the rename lists both paths, d once")
	files, err = b.p.ChangedFiles(ctx, repo, "main", "feature")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "b2", "d"}, files, "branch names work as well as SHAs")

	files, err = b.p.ChangedFiles(ctx, repo, main, main)
	require.NoError(t, err)
	require.Empty(t, files)

	_, err = b.p.ChangedFiles(ctx, repo, main, "nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestOpenPullRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	b.commit(t, repo, "main", map[string]string{"a": "1"})
	b.commit(t, repo, "fix", map[string]string{"a": "2"})

	_, ok, err := b.p.OpenPullRequest(ctx, repo, "fix")
	require.NoError(t, err)
	require.False(t, ok, "no merge request yet")

	own := b.mergeRequest(t, repo, repo, "fix", "main")
	// Forks' merge requests from branches also named fix come after it in
	// GitLab's newest-first order and fill the first page.
	for i := range 101 {
		fork := fmt.Sprintf("user%d/api", i)
		_, err := b.srv.ForkProject(repo, fork)
		require.NoError(t, err)
		b.commit(t, fork, "fix", map[string]string{"a": strconv.Itoa(i)})
		b.mergeRequest(t, repo, fork, "fix", "main")
	}
	before := b.srv.Requests()
	n, ok, err := b.p.OpenPullRequest(ctx, repo, "fix")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, own, n, "the project's own merge request, not a fork's")
	require.Equal(t, 2, b.srv.Requests()-before, "it was on the second page")

	require.NoError(t, b.srv.CloseMergeRequest(repo, own))
	_, ok, err = b.p.OpenPullRequest(ctx, repo, "fix")
	require.NoError(t, err)
	require.False(t, ok, "closed; the forks' do not count")

	_, _, err = b.p.OpenPullRequest(ctx, "acme/nope", "fix")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestPullRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	b.commit(t, repo, "main", map[string]string{"a": "1"})
	_, err := b.srv.ForkProject(repo, "alice/api")
	require.NoError(t, err)
	head := b.commit(t, repo, "feature", map[string]string{"a": "2"})
	forkHead := b.commit(t, "alice/api", "patch", map[string]string{"a": "3"})
	own := b.mergeRequest(t, repo, repo, "feature", "main")
	fork := b.mergeRequest(t, repo, "alice/api", "patch", "main")

	pr, err := b.p.PullRequest(ctx, repo, own)
	require.NoError(t, err)
	require.Equal(t, &vcs.PullRequest{Number: own, Open: true, HeadRepo: repo, HeadBranch: "feature", HeadSHA: head, BaseBranch: "main"}, pr)

	pr, err = b.p.PullRequest(ctx, repo, fork)
	require.NoError(t, err)
	require.Equal(t, &vcs.PullRequest{Number: fork, Open: true, HeadRepo: "alice/api", HeadBranch: "patch", HeadSHA: forkHead, BaseBranch: "main", Fork: true}, pr)

	require.NoError(t, b.srv.CloseMergeRequest(repo, fork))
	pr, err = b.p.PullRequest(ctx, repo, fork)
	require.NoError(t, err)
	require.False(t, pr.Open)

	_, err = b.p.PullRequest(ctx, repo, 99)
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	sha := b.commit(t, repo, "main", map[string]string{"a": "1"})

	post := func(name string, state vcs.State) {
		t.Helper()
		require.NoError(t, b.p.SetStatus(ctx, repo, sha, &vcs.Status{Context: name, State: state,
			Description: string(state) + " " + name, TargetURL: "https://ci.example.com/" + name}))
	}
	post("cikit/build", vcs.StatePending)
	post("cikit/build", vcs.StatePending) // GitLab refuses this transition; it is the state asked for
	post("cikit/build", vcs.StateRunning)
	post("cikit/build", vcs.StateRunning)
	post("cikit/build", vcs.StateSuccess)
	post("cikit/lint", vcs.StateFailure)
	post("cikit/test", vcs.StateCancelled)
	post("cikit/deploy", vcs.StateSkipped)
	post("cikit/deploy", vcs.StateSkipped) // a finished status is replaced, not refused

	got, err := b.srv.Statuses(repo, sha)
	require.NoError(t, err)
	type status struct{ name, state, desc, url string }
	var states []status
	for _, st := range got {
		states = append(states, status{st.Name, st.State, st.Description, st.TargetURL})
	}
	require.Equal(t, []status{
		{"cikit/build", "success", "success cikit/build", "https://ci.example.com/cikit/build"},
		{"cikit/deploy", "skipped", "skipped cikit/deploy", "https://ci.example.com/cikit/deploy"},
		{"cikit/lint", "failed", "failure cikit/lint", "https://ci.example.com/cikit/lint"},
		{"cikit/test", "canceled", "cancelled cikit/test", "https://ci.example.com/cikit/test"},
	}, states, "one status per name, the latest; our states in GitLab's words")

	before := b.srv.Requests()
	err = b.p.SetStatus(ctx, repo, sha, &vcs.Status{Context: "cikit", State: "done"})
	require.ErrorContains(t, err, `status state "done"`)
	require.Equal(t, before, b.srv.Requests(), "an invalid status is not sent")

	err = b.p.SetStatus(ctx, repo, "0000000000000000000000000000000000000000", &vcs.Status{Context: "cikit", State: vcs.StatePending})
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{RateLimit: 3, RateWindow: time.Minute})
	b.project(t, repo, "main")
	for range 3 {
		_, err := b.p.DefaultBranch(ctx, repo)
		require.NoError(t, err)
	}
	b.clock.Advance(20 * time.Second)
	before := b.srv.Requests()
	_, err := b.p.DefaultBranch(ctx, repo)
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, 40*time.Second, rl.RetryAfter, "the rest of the window, from Retry-After")
	require.Equal(t, 1, b.srv.Requests()-before, "not retried")
	require.ErrorContains(t, err, "429")

	b.clock.Advance(40 * time.Second)
	br, err := b.p.DefaultBranch(ctx, repo)
	require.NoError(t, err, "a new window")
	require.Equal(t, "main", br)
}

// TestRateLimitReset covers a 429 that names only the reset time. The
// server is hand-written because gitlabtest always sends Retry-After.
func TestRateLimitReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		header, value string
		want          time.Duration
	}{
		"reset":            {"RateLimit-Reset", strconv.FormatInt(now.Add(90*time.Second).Unix(), 10), 90 * time.Second},
		"retry-after date": {"Retry-After", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		"neither":          {"X-Other", "1", gitlab.DefaultRetryAfter},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tc.header, tc.value)
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, "Retry later\n")
			}))
			t.Cleanup(ts.Close)
			p, err := gitlab.New(gitlab.Config{BaseURL: ts.URL, Token: "t", HTTPClient: ts.Client(), Now: func() time.Time { return now }})
			require.NoError(t, err)
			_, err = p.ReadFile(context.Background(), repo, "abc", "a")
			var rl *vcs.RateLimitError
			require.ErrorAs(t, err, &rl)
			require.Equal(t, tc.want, rl.RetryAfter)
		})
	}
}

func TestWrongToken(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{Token: "glpat-right"})
	b.project(t, repo, "main")
	_, err := b.provider(t, "glpat-wrong").DefaultBranch(context.Background(), repo)
	require.ErrorIs(t, err, gitlab.ErrUnauthorized)
	require.NotErrorIs(t, err, vcs.ErrNotFound)
	require.ErrorContains(t, err, "401")
	require.ErrorContains(t, err, repo)

	_, err = b.p.DefaultBranch(context.Background(), repo)
	require.NoError(t, err, "the right token")
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.p.DefaultBranch(ctx, repo)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
}
