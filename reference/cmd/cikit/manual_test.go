package main_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunManualJob: a `when: manual` deploy-prod job does not run on its
// own (it used to run as if on_success); named with -job it runs, with
// the jobs it needs. The delayed job waits its start_in, unless
// -no-delay.
func TestRunManualJob(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/manual", nil, "run", "--report", rep)
	require.Equal(t, 0, out.code, "a manual job that may fail does not fail the run: %s\n%s", out.stdout, out.stderr)
	require.NotContains(t, out.stdout, "DEPLOYING TO PRODUCTION")
	r := readReport(t, rep)
	require.Equal(t, "succeeded", r.State)
	require.Equal(t, map[string]string{"build": "succeeded", "later": "succeeded", "deploy-prod": "manual", "verify-prod": "pending"}, states(r))
	require.Regexp(t, `(?m)^deploy-prod\s+MANUAL\s+-\s+manual: not run \(start with -job deploy-prod\)$`, out.stdout)
	require.Regexp(t, `(?m)^verify-prod\s+PENDING\s+-\s+not run: needs deploy-prod, a manual job that did not run$`, out.stdout)
	require.Regexp(t, `(?m)^\[later\] +⏲ delayed until `, out.stdout)
	var built, later *reportJob
	for i := range r.Jobs {
		switch r.Jobs[i].ID {
		case "build":
			built = &r.Jobs[i]
		case "later":
			later = &r.Jobs[i]
		}
	}
	require.GreaterOrEqual(t, later.StartedAt.Sub(*built.FinishedAt).Seconds(), 1.0, "the delayed job waited its start_in")

	out = cikit(t, "testdata/manual", nil, "run", "--report", rep, "--job", "verify-prod", "--job", "deploy-prod")
	require.Equal(t, 0, out.code, out.stdout)
	require.Contains(t, out.stdout, "[deploy-prod] DEPLOYING TO PRODUCTION")
	require.Equal(t, map[string]string{"build": "succeeded", "deploy-prod": "succeeded", "verify-prod": "succeeded"},
		states(readReport(t, rep)), "-job runs the jobs named and what they need, nothing else")

	out = cikit(t, "testdata/manual", nil, "run", "--report", rep, "--job", "later", "--no-delay")
	require.Equal(t, 0, out.code, out.stdout)
	require.Equal(t, map[string]string{"build": "succeeded", "later": "succeeded"}, states(readReport(t, rep)))

	out = cikit(t, "testdata/manual", nil, "run", "--job", "deploy")
	require.Equal(t, 2, out.code)
	require.Contains(t, out.stderr, "-job deploy: the pipeline has no job deploy for this event (its jobs: build, later, deploy-prod, verify-prod)")
}

// TestRunBlockingManualJob: a manual job that blocks the pipeline (rules,
// no allow_failure) holds the run, which ends blocked and not succeeded.
func TestRunBlockingManualJob(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/blocking", nil, "run", "--report", rep)
	require.Equal(t, 1, out.code, out.stdout)
	require.NotContains(t, out.stdout, "DEPLOYING TO PRODUCTION")
	require.Equal(t, "blocked", readReport(t, rep).State)
	require.Contains(t, out.stdout, "run blocked in ")
	require.Contains(t, out.stderr, "cikit run: the run is blocked: the manual job(s) deploy-prod must run and were not started (start with -job deploy-prod)")

	out = cikit(t, "testdata/blocking", nil, "run", "--job", "deploy-prod")
	require.Equal(t, 0, out.code, out.stdout)
	require.Contains(t, out.stdout, "DEPLOYING TO PRODUCTION")
}
