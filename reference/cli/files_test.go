package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

// localFilesPipeline: build fills a cache path when it misses and makes
// a binary it keeps as an artifact; test, which needs build, runs those
// bytes. Neither finds the run's state directory in its workspace.
const localFilesPipeline = `jobs:
  build:
    cache:
      key: deps-{{ hash("deps.lock") }}
      paths: [deps/]
    artifacts:
      paths: [dist/]
    steps:
      - test ! -e .cikit
      - |
        if [ -f deps/installed ]; then echo "CACHE=warm"; else echo "CACHE=cold"; mkdir -p deps; echo yes > deps/installed; fi
      - mkdir -p dist && head -c 4096 /dev/urandom > dist/app && echo "BUILT=$(sha256sum dist/app | cut -c1-64)"
  test:
    needs: [build]
    steps:
      - test ! -e .cikit
      - echo "TESTED=$(sha256sum dist/app | cut -c1-64)"
`

var (
	cacheLineRE  = regexp.MustCompile(`(?m)^CACHE=(\w+)$`)
	builtLineRE  = regexp.MustCompile(`BUILT=([0-9a-f]{64})`)
	testedLineRE = regexp.MustCompile(`TESTED=([0-9a-f]{64})`)
)

// TestRunPassesArtifactsAndReusesCache: `cikit run` passes build's
// artifact to test, byte for byte, through the same Service and signed
// transfers as the platform, and the second run restores the cache the
// first saved (an exact hit, nothing saved again), from the state the
// first left in .cikit.
func TestRunPassesArtifactsAndReusesCache(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".cikit.yml": localFilesPipeline, "deps.lock": "left-pad 1.0\n"})

	run := func(wantCache string) jobResult {
		t.Helper()
		out, r := reportOf(t, dir)
		require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "test": cikit.JobSucceeded}, jobStates(r))
		logs := jobLines(out.stdout, r)
		m := cacheLineRE.FindStringSubmatch(logs["build"])
		require.NotNil(t, m, logs["build"])
		require.Equal(t, wantCache, m[1], logs["build"])
		built, tested := builtLineRE.FindStringSubmatch(logs["build"]), testedLineRE.FindStringSubmatch(logs["test"])
		require.NotNil(t, built, logs["build"])
		require.NotNil(t, tested, logs["test"])
		require.Equal(t, built[1], tested[1], "test ran the bytes build made")
		for _, j := range r.Jobs {
			if j.ID == "build" {
				require.Len(t, j.Caches, 1, "%+v", j)
				return j
			}
		}
		t.Fatal("no build job in the report")
		return jobResult{}
	}

	cold := run("cold")
	c := cold.Caches[0]
	require.False(t, c.Hit, "%+v", c)
	require.True(t, c.Saved, "%+v", c)
	require.Regexp(t, `^deps-[0-9a-f]{64}$`, c.Key, "the key's hash was rendered from deps.lock")
	_, err := os.Stat(filepath.Join(dir, stateDir, cacheIndexFile))
	require.NoError(t, err, "the cache index is kept for the next run")

	warm := run("warm")
	w := warm.Caches[0]
	require.True(t, w.Hit, "%+v", w)
	require.True(t, w.Exact, "%+v", w)
	require.Equal(t, c.Key, w.MatchedKey)
	require.False(t, w.Saved, "an exact hit saves nothing: %+v", w)
}
