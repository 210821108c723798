package githubtest_test

import (
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

// TestGitWhileSeeding: git fetches every commit while the test keeps
// committing and moving refs: each fetch sees a whole repository.
func TestGitWhileSeeding(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	srv := githubtest.NewServer(githubtest.Config{GitDir: t.TempDir()})
	srv.AddToken(pat)
	require.NoError(t, srv.CreateRepo("acme/api", "main"))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	shas := make(chan string, 8)
	var wg sync.WaitGroup
	var seedErr error
	wg.Go(func() {
		defer close(shas)
		for i := range 8 {
			sha, err := srv.Commit("acme/api", "main", map[string]string{"n.txt": strings.Repeat("x", i)})
			if err == nil {
				err = srv.Tag("acme/api", "latest", sha)
			}
			if err != nil {
				seedErr = err
				return
			}
			shas <- sha
		}
	})
	work := t.TempDir()
	git := func(args ...string) (string, error) {
		return gitservetest.Client(t, work, &cikit.CheckoutSource{Username: "x", Token: pat}, args...)
	}
	_, err := git("init", "-q")
	require.NoError(t, err)
	for sha := range shas {
		out, err := git("fetch", "-q", "--depth=1", ts.URL+"/acme/api.git", sha)
		require.NoError(t, err, out)
		_, err = git("ls-remote", ts.URL+"/acme/api.git")
		require.NoError(t, err)
	}
	wg.Wait()
	require.NoError(t, seedErr)
	st := srv.Stats()
	require.Positive(t, st.GitRequests)
	require.Zero(t, st.GitRefused)
}
