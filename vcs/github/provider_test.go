package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg  github.Config
		want string
	}{
		"no auth":      {github.Config{}, "needs a Token or an AppID"},
		"both":         {github.Config{Token: "t", AppID: 1}, "not both"},
		"bad key":      {github.Config{AppID: 1, PrivateKey: []byte("nope")}, "PrivateKey of App 1"},
		"bad URL":      {github.Config{Token: "t", BaseURL: "ftp://x/"}, "http or https"},
		"long refresh": {github.Config{AppID: 1, PrivateKey: keyPEM(appKey()), TokenRefresh: 2 * time.Hour}, "TokenRefresh"},
		"check runs with a token": {github.Config{Token: "t", CheckRuns: true},
			"CheckRuns needs App authentication (AppID and PrivateKey)"},
	} {
		_, err := github.New(tc.cfg)
		require.ErrorContains(t, err, tc.want, name)
	}
	p, err := github.New(github.Config{Token: "t", BaseURL: "http://127.0.0.1:1/api/v3"})
	require.NoError(t, err)
	_, err = p.DefaultBranch(context.Background(), "acme/platform/api")
	require.ErrorContains(t, err, "not owner/name", "GitHub has no nested groups")
}

// Files over 1 MB come without content from the contents API; the
// Provider reads them from the blob API, one request more.
func TestReadFileLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef", 1<<16+1) // 1 MiB + 16 bytes
	sha := b.repo(t, "acme/api", map[string]string{"big.bin": big, "small.txt": "small"})
	p := b.pat(t)

	before := b.srv.Stats().Requests
	data, err := p.ReadFile(ctx, "acme/api", sha, "small.txt")
	require.NoError(t, err)
	require.Equal(t, "small", string(data))
	require.Equal(t, 1, b.srv.Stats().Requests-before, "a small file is one request")

	before = b.srv.Stats().Requests
	data, err = p.ReadFile(ctx, "acme/api", sha, "big.bin")
	require.NoError(t, err)
	require.Equal(t, len(big), len(data))
	require.True(t, string(data) == big, "content intact")
	require.Equal(t, 2, b.srv.Stats().Requests-before, "contents, then the blob")

	_, err = p.ReadFile(ctx, "acme/api", sha, "")
	require.ErrorIs(t, err, vcs.ErrNotFound, "the root is a directory, not a file")
}

// TestReadFileMax: a file over the bound is refused from the size the
// contents API gives, without downloading its blob.
func TestReadFileMax(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef", 1<<16+1) // 1 MiB + 16 bytes
	sha := b.repo(t, "acme/api", map[string]string{"big.bin": big})
	p := b.pat(t)

	before := b.srv.Stats().Requests
	_, err := vcs.ReadFileMax(ctx, p, "acme/api", sha, "big.bin", 1<<20)
	tl, ok := errors.AsType[*vcs.FileTooLargeError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, int64(len(big)), tl.Size)
	require.Equal(t, 1, b.srv.Stats().Requests-before, "the contents only, not the blob")

	data, err := vcs.ReadFileMax(ctx, p, "acme/api", sha, "big.bin", 2<<20)
	require.NoError(t, err)
	require.Len(t, data, len(big))
}

func TestResolveRefAnnotatedTag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c1 := b.repo(t, "acme/api", map[string]string{"a": "1"})
	c2, err := b.srv.Commit("acme/api", "main", map[string]string{"a": "2"})
	require.NoError(t, err)
	require.NoError(t, b.srv.AnnotatedTag("acme/api", "v1.0.0", c1, "release 1.0.0"))
	require.NoError(t, b.srv.Tag("acme/api", "main", c1)) // a tag named like a branch
	p := b.pat(t)
	for ref, want := range map[string]string{
		"v1.0.0":           c1,
		"refs/tags/v1.0.0": c1,
		"main":             c2,
		"refs/heads/main":  c2,
		"refs/tags/main":   c1,
	} {
		got, err := p.ResolveRef(ctx, "acme/api", ref)
		require.NoError(t, err, ref)
		require.Equal(t, want, got, ref)
	}
	_, err = p.ResolveRef(ctx, "acme/api", "refs/tags/nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

// ChangedFiles follows the comparison's pages: 300 files a page, and a
// hundred commits a page.
func TestChangedFilesPaginated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	base := b.repo(t, "acme/api", map[string]string{"keep": "k"})
	require.NoError(t, b.srv.Branch("acme/api", "feature/many", base))
	var want []string
	for i := range 150 {
		files := map[string]string{}
		for j := range 5 {
			p := fmt.Sprintf("dir%03d/f%d.go", i, j)
			files[p] = "x"
			want = append(want, p)
		}
		_, err := b.srv.Commit("acme/api", "feature/many", files)
		require.NoError(t, err)
	}
	_, err := b.srv.Commit("acme/api", "main", map[string]string{"main-only": "m"})
	require.NoError(t, err)

	before := b.srv.Stats().Requests
	got, err := b.pat(t).ChangedFiles(ctx, "acme/api", "main", "feature/many")
	require.NoError(t, err)
	require.Equal(t, want, got, "750 files over three pages, none of main's")
	require.Equal(t, 3, b.srv.Stats().Requests-before, "max(750/300, 150/100) rounded up")
}

// GitHub documents a comparison's files as listed on its first page
// only, 300 at most. A full first page and no files after it make the
// Provider compare the trees of the merge base and head instead.
func TestChangedFilesCapped(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		capped   bool
		files    int
		requests int
	}{
		"capped at 300 of 450":  {capped: true, files: 450, requests: 1 + 2},
		"exactly 300, one page": {capped: false, files: 300, requests: 1 + 2},
		"299 need no trees":     {capped: true, files: 299, requests: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupServer(t, githubtest.Config{CapCompareFiles: tc.capped})
			ctx := context.Background()
			base := b.repo(t, "acme/api", map[string]string{"gone.txt": "g", "old.txt": "moved", "same.txt": "s"})
			require.NoError(t, b.srv.Branch("acme/api", "feature", base))
			files := map[string]string{"new.txt": "moved"} // a rename of old.txt
			want := []string{"gone.txt", "new.txt", "old.txt"}
			for i := range tc.files - 2 { // the rename counts once
				p := fmt.Sprintf("d/%03d/f.go", i)
				files[p] = "x"
				want = append(want, p)
			}
			_, err := b.srv.Commit("acme/api", "feature", files, "gone.txt", "old.txt")
			require.NoError(t, err)
			_, err = b.srv.Commit("acme/api", "main", map[string]string{"main-only": "m"})
			require.NoError(t, err)

			before := b.srv.Stats().Requests
			got, err := b.pat(t).ChangedFiles(ctx, "acme/api", "main", "feature")
			require.NoError(t, err)
			slices.Sort(want)
			require.Equal(t, want, got)
			require.Equal(t, tc.requests, b.srv.Stats().Requests-before)
		})
	}
}

func TestPullRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	require.NoError(t, b.srv.CreateRepo("someone/api", "main"))
	_, err := b.srv.Commit("someone/api", "main", map[string]string{"a": "1"})
	require.NoError(t, err)
	forkHead, err := b.srv.Commit("someone/api", "feature", map[string]string{"a": "fork"})
	require.NoError(t, err)
	head, err := b.srv.Commit("acme/api", "feature", map[string]string{"a": "2"})
	require.NoError(t, err)
	fromFork, err := b.srv.OpenPullRequest("acme/api", "someone/api", "feature", "main")
	require.NoError(t, err)
	own, err := b.srv.OpenPullRequest("acme/api", "acme/api", "feature", "main")
	require.NoError(t, err)
	p := b.pat(t)

	n, ok, err := p.OpenPullRequest(ctx, "acme/api", "feature")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, own, n, "a fork's branch of the same name is not the repository's branch")

	pr, err := p.PullRequest(ctx, "acme/api", fromFork)
	require.NoError(t, err)
	require.Equal(t, &vcs.PullRequest{Number: fromFork, Open: true, HeadRepo: "someone/api", HeadBranch: "feature",
		HeadSHA: forkHead, BaseBranch: "main", Fork: true}, pr)
	pr, err = p.PullRequest(ctx, "acme/api", own)
	require.NoError(t, err)
	require.Equal(t, &vcs.PullRequest{Number: own, Open: true, HeadRepo: "acme/api", HeadBranch: "feature",
		HeadSHA: head, BaseBranch: "main"}, pr)
}

func TestSetStatusMapping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	p := b.pat(t)
	long := strings.Repeat("é", 200) // GitHub counts characters, not bytes
	for _, st := range []vcs.Status{
		{Context: "running", State: vcs.StateRunning, Description: "building"},
		{Context: "skipped", State: vcs.StateSkipped},
		{Context: "skipped-why", State: vcs.StateSkipped, Description: "no changes under api/"},
		{Context: "cancelled", State: vcs.StateCancelled},
		{Context: "long", State: vcs.StateFailure, Description: long, TargetURL: "https://ci.example.com/1"},
	} {
		require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &st), st.Context)
	}
	got, err := b.srv.Statuses("acme/api", sha)
	require.NoError(t, err)
	require.Equal(t, []githubtest.Status{
		{Context: "cancelled", State: "error", Description: "Cancelled"},
		{Context: "long", State: "failure", Description: strings.Repeat("é", 139) + "…", TargetURL: "https://ci.example.com/1"},
		{Context: "running", State: "pending", Description: "building"},
		{Context: "skipped", State: "success", Description: "Skipped"},
		{Context: "skipped-why", State: "success", Description: "no changes under api/"},
	}, got)

	err = p.SetStatus(ctx, "acme/api", "0123456789abcdef0123456789abcdef01234567", &vcs.Status{Context: "c", State: vcs.StateSuccess})
	require.ErrorIs(t, err, vcs.ErrNotFound, "GitHub's 422 No commit found for SHA")
}

func TestAppAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	other := b.repo(t, "acme/other", map[string]string{"a": "1"})
	p := b.app(t)

	// Concurrent first callers share one installation lookup and one
	// token exchange.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = p.DefaultBranch(ctx, "acme/api") })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	st := b.srv.Stats()
	require.Equal(t, 1, st.InstallationLookups)
	require.Equal(t, 1, st.TokensIssued)

	_, err := p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	require.Equal(t, 1, b.srv.Stats().TokensIssued, "the token is reused")

	// Tokens last an hour; the Provider exchanges a new one five
	// minutes before the end, and not earlier.
	b.clock.Advance(54 * time.Minute)
	_, err = p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	require.Equal(t, 1, b.srv.Stats().TokensIssued, "55 minutes before the refresh")
	b.clock.Advance(time.Minute + time.Second)
	_, err = p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	st = b.srv.Stats()
	require.Equal(t, 2, st.TokensIssued, "within five minutes of expiry")
	require.Equal(t, 1, st.InstallationLookups, "the installation is cached")

	// Another repository is another installation.
	_, err = p.ReadFile(ctx, "acme/other", other, "a")
	require.NoError(t, err)
	st = b.srv.Stats()
	require.Equal(t, 2, st.InstallationLookups)
	require.Equal(t, 3, st.TokensIssued)

	require.NoError(t, b.srv.CreateRepo("acme/private", "main"))
	_, err = p.DefaultBranch(ctx, "acme/private")
	require.ErrorIs(t, err, github.ErrNotInstalled, "the App is not installed there")
	require.ErrorIs(t, err, vcs.ErrNotFound, "which GitHub cannot tell from a missing repository")
	require.ErrorContains(t, err, "installation of App 42")
}

// An App whose key GitHub does not know gets 401 for its JWT, which is
// not a missing repository.
func TestAppAuthWrongKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	b.srv.AddApp(appID, &other.PublicKey)
	_, err = b.app(t).DefaultBranch(context.Background(), "acme/api")
	require.Error(t, err)
	require.NotErrorIs(t, err, vcs.ErrNotFound)
	require.ErrorContains(t, err, "401")
}

func TestTokenAuthRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	p, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), Token: "ghp_wrong"})
	require.NoError(t, err)
	_, err = p.DefaultBranch(context.Background(), "acme/api")
	require.ErrorContains(t, err, "401 Bad credentials")
	require.NotErrorIs(t, err, vcs.ErrNotFound)
}

// The fake's limiter refuses the third request of a minute; each kind
// of refusal is a *vcs.RateLimitError waiting for the window's end.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	for name, kind := range map[string]githubtest.LimitKind{
		"secondary 403 Retry-After": githubtest.Secondary,
		"primary 403 reset":         githubtest.Primary,
		"429 Retry-After":           githubtest.TooMany,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
			p := b.pat(t)
			b.srv.SetRateLimit(githubtest.RateLimit{Requests: 2, Window: time.Minute, Kind: kind})
			for range 2 {
				_, err := p.ReadFile(ctx, "acme/api", sha, "a")
				require.NoError(t, err)
			}
			b.clock.Advance(20 * time.Second)
			before := b.srv.Stats()
			err := p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateRunning})
			var rl *vcs.RateLimitError
			require.ErrorAs(t, err, &rl)
			require.Equal(t, 40*time.Second, rl.RetryAfter)
			after := b.srv.Stats()
			require.Equal(t, 1, after.Requests-before.Requests, "no retry inside the Provider")
			require.Equal(t, 1, after.Limited-before.Limited)
			require.Zero(t, after.StatusesCreated)

			b.clock.Advance(40 * time.Second)
			require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateRunning}),
				"a new window: no memory of the refusal in the Provider")
		})
	}
}

// An App's token exchange is rate limited like any call.
func TestRateLimitTokenExchange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: time.Minute})
	_, err := b.app(t).DefaultBranch(context.Background(), "acme/api")
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Minute, rl.RetryAfter)
	require.ErrorContains(t, err, "token of installation")
}

// TestSecondaryLimitWithoutRetryAfter: a secondary rate limit that names
// no time waits a minute, not until the primary limit's reset, which
// every answer carries.
func TestSecondaryLimitWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-RateLimit-Remaining", "4000")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(50*time.Minute).Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",`+
			`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
	}))
	defer ts.Close()
	p, err := github.New(github.Config{BaseURL: ts.URL + "/", HTTPClient: ts.Client(), Token: "t", Now: func() time.Time { return now }})
	require.NoError(t, err)
	err = p.SetStatus(context.Background(), "acme/api", strings.Repeat("a", 40), &vcs.Status{Context: "cikit", State: vcs.StateSuccess})
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Minute, rl.RetryAfter)
}

// TestAppReinstalled: after the App is uninstalled and installed again
// (under another installation id), the provider finds the new
// installation once its token must be renewed, instead of taking the old
// installation's absence for missing files.
func TestAppReinstalled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, b.srv.CreateRepo("acme/api", "main"))
	old, err := b.srv.Install(appID, "acme/api")
	require.NoError(t, err)
	sha, err := b.srv.Commit("acme/api", "main", map[string]string{"a": "1"})
	require.NoError(t, err)
	p := b.app(t)
	_, err = p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	require.NoError(t, b.srv.Uninstall(old))
	_, err = b.srv.Install(appID, "acme/api")
	require.NoError(t, err)
	b.clock.Advance(time.Hour) // the cached token expired
	data, err := p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	require.Equal(t, "1", string(data))
	require.Equal(t, 2, b.srv.Stats().InstallationLookups, "the installation was looked up again")
}
