package githubtest_test

import (
	"encoding/base64"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/vcs/github/githubtest"
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
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte("x:"+pat)))
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
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
