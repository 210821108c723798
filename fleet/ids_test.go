package fleet_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

// TestJobIDsWithAnyText: job IDs of matrix variants and parallel jobs hold
// spaces, parentheses, commas and slashes; every call about them works
// with the IDs escaped as path segments.
func TestJobIDsWithAnyText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	ids := []string{"test (linux, 20)", "test 1/3", "deploy: [aws, app1]"}
	var specs []*cikit.JobSpec
	for _, id := range ids {
		specs = append(specs, spec(id))
	}
	b.newRun(t, specs...)
	for range ids {
		c := b.claim(t, runner, "5")
		require.Contains(t, ids, c.JobID)
		status, out := b.call(t, http.MethodPost, jobPath(c, "heartbeat"), c.Token, nil)
		require.Equal(t, http.StatusOK, status, "%s: %v", c.JobID, out)
		status, out = b.chunk(t, c, 0, "output of "+c.JobID)
		require.Equal(t, http.StatusAccepted, status, "%s: %v", c.JobID, out)
		status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
		require.Equal(t, http.StatusOK, status, "%s: %v", c.JobID, out)
	}
}
