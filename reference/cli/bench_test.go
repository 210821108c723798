package cli

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/testenv"
)

// TestBenchCommand: cikit bench runs the scenarios it is given and prints
// them as JSON; an unknown scenario is an error and exit code 1.
func TestBenchCommand(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"bench", "-short", "-json", "-scenarios", "webhook-to-run,claim-complete"}, &stdout, &stderr)
	require.Equal(t, ExitOK, code, stderr.String())
	var results []struct {
		Scenario string `json:"scenario"`
		N        int    `json:"n"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), stdout.String())
	require.Len(t, results, 2)
	require.Equal(t, "webhook-to-run", results[0].Scenario)
	require.Equal(t, "claim-complete", results[1].Scenario)
	require.Positive(t, results[1].N)

	stdout.Reset()
	stderr.Reset()
	code = Main(t.Context(), []string{"bench", "-scenarios", "nope"}, &stdout, &stderr)
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, stderr.String(), `unknown scenario "nope"`)
}
