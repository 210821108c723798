package process_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

// secretEnv is what a server or runner keeps in its environment and a
// job must never see.
var secretEnv = map[string]string{
	"CIKIT_RUNNERS_SIGNING_KEYS":        "signing-key-0123456789abcdef0123456789",
	"CIKIT_RUNNERS_REGISTRATION_TOKENS": "registration-token-secret",
	"CIKIT_POSTGRES_URL":                "postgres://cikit:pg-password@db/cikit",
	"DATABASE_URL":                      "postgres://app:db-password@db/app",
	"PGPASSWORD":                        "pg-password",
	"AWS_SECRET_ACCESS_KEY":             "aws-secret",
	"GITHUB_TOKEN":                      "ghp_secret",
	"HTTPS_PROXY":                       "http://user:proxy-password@proxy:3128",
}

// TestJobEnvironmentIsBuiltFromScratch: a job sees the allow-listed host
// variables and those passed by name, never the rest of the executor's
// environment. It failed before the allow-list, when Config.Env defaulted
// to os.Environ().
func TestJobEnvironmentIsBuiltFromScratch(t *testing.T) {
	// t.Setenv: not parallel.
	for k, v := range secretEnv {
		t.Setenv(k, v)
	}
	t.Setenv("LC_MESSAGES", "C")
	t.Setenv("PASSED_BY_NAME", "passed")
	for _, mode := range []struct {
		name  string
		apply func(*process.Config)
	}{{"plain", func(*process.Config) {}}, {"sandbox", sandboxed}} {
		t.Run(mode.name, func(t *testing.T) {
			b := setup(t, mode.apply, func(c *process.Config) { c.Env, c.PassEnv = nil, []string{"PASSED_BY_NAME"} })
			res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "env", Env: map[string]string{"JOB": "job"},
				Steps: []cikit.Step{{Name: "env", Run: "env", Env: map[string]string{"STEP": "step"}}}})
			require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
			out := printed(b.out.String())
			for k, v := range secretEnv {
				require.NotContains(t, out, k+"=", "the job saw the executor's %s", k)
				require.NotContains(t, out, v)
			}
			// The mark that makes the executor's program a job's
			// supervisor stays the supervisor's.
			require.NotContains(t, out, "CIKIT_SANDBOX_SUPERVISOR")
			for _, want := range []string{"PATH=" + os.Getenv("PATH"), "LC_MESSAGES=C", "PASSED_BY_NAME=passed", "CI=true", "CIKIT_JOB_ID=env", "JOB=job", "STEP=step"} {
				require.Contains(t, strings.Split(out, "\n"), want)
			}
		})
	}
}

func TestHostEnv(t *testing.T) {
	t.Parallel()
	environ := []string{"PATH=/bin", "LC_ALL=C", "LCX=no", "SECRET=x", "CIKIT_X=y", "TZ=UTC", "MINE=1", "broken"}
	require.Equal(t, []string{"PATH=/bin", "LC_ALL=C", "TZ=UTC", "MINE=1"}, process.HostEnv(environ, []string{"MINE"}))
	require.True(t, slices.Contains(process.AllowedEnv(), "PATH"))

	src := t.TempDir()
	for _, bad := range []string{"CIKIT_RUNNERS_SIGNING_KEYS", "", "A=B", "LC_*"} {
		_, err := process.New(process.Config{Source: src, PassEnv: []string{bad}})
		require.Error(t, err, "PassEnv %q", bad)
	}
	_, err := process.New(process.Config{Source: src, Env: []string{"NOEQUALS"}})
	require.ErrorContains(t, err, "not NAME=value")
}
