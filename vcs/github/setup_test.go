package github_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

const (
	appID = 42
	pat   = "ghp_test"
)

// appKey is one RSA key for every test: generating one takes long
// enough under the race detector to be worth sharing.
var appKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func keyPEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// bundle is a fake GitHub on a settable clock, knowing the token pat and
// App appID.
type bundle struct {
	srv   *githubtest.Server
	ts    *httptest.Server
	clock *clocktest.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupServer(t, githubtest.Config{})
}

// setupServer is setup with a server of cfg, on the bundle's clock.
func setupServer(t *testing.T, cfg githubtest.Config) *bundle {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Now = clock.Now
	srv := githubtest.NewServer(cfg)
	srv.AddToken(pat)
	srv.AddApp(appID, &appKey().PublicKey)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &bundle{srv: srv, ts: ts, clock: clock}
}

// pat returns a Provider authenticating with the personal access token.
func (b *bundle) pat(t *testing.T) *github.Provider {
	t.Helper()
	p, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), Token: pat, Now: b.clock.Now})
	require.NoError(t, err)
	return p
}

// app returns a Provider authenticating as the App.
func (b *bundle) app(t *testing.T) *github.Provider {
	t.Helper()
	p, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), AppID: appID,
		PrivateKey: keyPEM(appKey()), Now: b.clock.Now})
	require.NoError(t, err)
	return p
}

// checks returns a Provider authenticating as the App that reports check
// runs.
func (b *bundle) checks(t *testing.T) *github.Provider {
	t.Helper()
	p, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), AppID: appID,
		PrivateKey: keyPEM(appKey()), Now: b.clock.Now, CheckRuns: true})
	require.NoError(t, err)
	return p
}

// repo creates repo, installs the App on it and commits files on its
// default branch main, returning the commit.
func (b *bundle) repo(t *testing.T, repo string, files map[string]string) string {
	t.Helper()
	require.NoError(t, b.srv.CreateRepo(repo, "main"))
	_, err := b.srv.Install(appID, repo)
	require.NoError(t, err)
	sha, err := b.srv.Commit(repo, "main", files)
	require.NoError(t, err)
	return sha
}

// fixture is vcstest's Fixture over the fake; app says whether it
// installs the App on the repositories it creates, checks that statuses
// are read back from check runs.
type fixture struct {
	srv    *githubtest.Server
	app    bool
	checks bool
}

func (f fixture) CreateRepo(t *testing.T, repo, defaultBranch string) {
	t.Helper()
	require.NoError(t, f.srv.CreateRepo(repo, defaultBranch))
	if f.app {
		_, err := f.srv.Install(appID, repo)
		require.NoError(t, err)
	}
}

func (f fixture) Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	sha, err := f.srv.Commit(repo, branch, files, deleted...)
	require.NoError(t, err)
	return sha
}

func (f fixture) Branch(t *testing.T, repo, branch, sha string) {
	t.Helper()
	require.NoError(t, f.srv.Branch(repo, branch, sha))
}

func (f fixture) Tag(t *testing.T, repo, tag, sha string) {
	t.Helper()
	require.NoError(t, f.srv.Tag(repo, tag, sha))
}

func (f fixture) OpenPullRequest(t *testing.T, repo, headRepo, headBranch, baseBranch string) int {
	t.Helper()
	n, err := f.srv.OpenPullRequest(repo, headRepo, headBranch, baseBranch)
	require.NoError(t, err)
	return n
}

func (f fixture) ClosePullRequest(t *testing.T, repo string, number int) {
	t.Helper()
	require.NoError(t, f.srv.ClosePullRequest(repo, number))
}

// Statuses maps GitHub's states back: error is what SetStatus makes of
// cancelled.
func (f fixture) Statuses(t *testing.T, repo, sha string) []vcs.Status {
	t.Helper()
	if f.checks {
		return f.checkRuns(t, repo, sha)
	}
	list, err := f.srv.Statuses(repo, sha)
	require.NoError(t, err)
	out := make([]vcs.Status, len(list))
	for i, st := range list {
		state := vcs.State(st.State)
		if st.State == "error" {
			state = vcs.StateCancelled
		}
		out[i] = vcs.Status{Context: st.Context, State: state, Description: st.Description, TargetURL: st.TargetURL}
	}
	return out
}

// checkRuns maps check runs back: queued is pending, in_progress
// running, and a completed run's conclusion its state.
func (f fixture) checkRuns(t *testing.T, repo, sha string) []vcs.Status {
	t.Helper()
	runs, err := f.srv.CheckRuns(repo, sha)
	require.NoError(t, err)
	out := make([]vcs.Status, len(runs))
	for i, cr := range runs {
		state := map[string]vcs.State{"queued": vcs.StatePending, "in_progress": vcs.StateRunning}[cr.Status]
		if cr.Status == "completed" {
			state = vcs.State(cr.Conclusion)
		}
		out[i] = vcs.Status{Context: cr.Name, State: state, Description: cr.Summary, TargetURL: cr.DetailsURL}
	}
	return out
}
