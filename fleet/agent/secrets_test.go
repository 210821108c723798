package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/secrets"
)

// secretsAudience is the platform's own audience, of the tokens runners
// present for the secrets call.
const secretsAudience = "https://ci.example.com/v1/secrets"

// withSecrets gives the server secrets: a real issuer and broker over a
// memory store holding acme/api's DEPLOY_TOKEN and OTHER_SECRET.
func withSecrets(t *testing.T) option {
	t.Helper()
	opt, _ := withSecretsIssuer(t)
	return opt
}

// withSecretsIssuer is withSecrets, and returns the issuer.
func withSecretsIssuer(t *testing.T) (option, *secrets.Issuer) {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	kr, err := secrets.NewKeyring(secrets.Key{ID: "test", Secret: bytes.Repeat([]byte{7}, secrets.KeyBytes)})
	require.NoError(t, err)
	iss, err := secrets.NewIssuer(ctx, secrets.IssuerConfig{URL: "https://ci.example.com", Keys: secrets.NewMemoryKeyStore(kr), Logger: quiet})
	require.NoError(t, err)
	store := secrets.NewMemoryStore(kr)
	require.NoError(t, store.Set(ctx, secrets.RepoScope("acme/api"), "DEPLOY_TOKEN", "deploy-token-of-api"))
	require.NoError(t, store.Set(ctx, secrets.RepoScope("acme/api"), "OTHER_SECRET", "other-secret-of-api"))
	broker, err := secrets.NewBroker(secrets.BrokerConfig{Verifier: iss.Verifier(secretsAudience), Replays: secrets.NewMemoryReplays(nil),
		Providers: []secrets.Provider{store}, Logger: quiet})
	require.NoError(t, err)
	return func(_ *logs.Config, sc *fleet.ServerConfig) {
		sc.Secrets = &fleet.JobSecrets{Issuer: iss, Broker: broker, Audience: secretsAudience}
		sc.Logger = quiet
	}, iss
}

// processExecutor is a real process executor running jobs as plain
// processes; their output goes to the server.
func processExecutor(t *testing.T) agent.Executor {
	t.Helper()
	work := t.TempDir()
	require.NoError(t, os.Chmod(work, 0o711))
	e, err := process.New(process.Config{Source: t.TempDir(), WorkRoot: work, Grace: 500 * time.Millisecond,
		Env: []string{"PATH=" + os.Getenv("PATH")}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return agent.ProcessExecutor{Executor: e}
}

// newSecretsRun creates and dispatches a run of acme/api's main of job.
func (e *env) newSecretsRun(t *testing.T, job *cikit.JobSpec) string {
	t.Helper()
	rc := &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main", RefName: "main", RefType: "branch",
		SHA: "4f2a9c1e0b7d3a5f6c8e9d0a1b2c3d4e5f6a7b8c"}
	run, err := e.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{job}, Context: rc})
	require.NoError(t, err)
	require.NoError(t, e.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

// waitEnded waits for the job of runID to end, and returns it.
func waitEnded(t *testing.T, e *env, runID string) *dag.Job {
	t.Helper()
	require.Eventually(t, func() bool { return e.job(t, runID).State.Terminal() }, time.Minute, 5*time.Millisecond, "the job ends")
	return e.job(t, runID)
}

// TestAgentFetchesTheJobsSecrets: the agent makes the secrets call with
// the claim's secrets token before the job's first step, after the
// server answered it 503 twice, and the job's steps get exactly the
// secrets the job names.
func TestAgentFetchesTheJobsSecrets(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL, withSecrets(t))
	e.failSecrets.Store(2)
	e.startWith(t, processExecutor(t))
	runID := e.newSecretsRun(t, &cikit.JobSpec{ID: "deploy", Secrets: []string{"DEPLOY_TOKEN"}, Steps: []cikit.Step{
		{Run: `test "$DEPLOY_TOKEN" = deploy-token-of-api`},
		{Run: `test -z "${OTHER_SECRET:-}"`},
	}})
	j := waitEnded(t, e, runID)
	require.Equal(t, cikit.JobSucceeded, j.State, j.Reason)
	require.Equal(t, int32(-1), e.failSecrets.Load(), "three secrets calls: two answered 503, and the third went through")
	calls := e.callsMade()
	require.Contains(t, calls, "secrets OK", "%v", calls)
	out, _ := e.logOf(t, runID, "deploy")
	require.Contains(t, out, "--- secrets: 1 given")
	require.NotContains(t, out, "deploy-token-of-api")
}

// TestAgentFailsAJobWhoseSecretIsMissing: a secret not found (the
// secrets call answers 422) fails the job before its first step as a
// configuration failure, which is not retried, naming the secret.
func TestAgentFailsAJobWhoseSecretIsMissing(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL, withSecrets(t))
	e.startWith(t, processExecutor(t))
	runID := e.newSecretsRun(t, &cikit.JobSpec{ID: "deploy", Secrets: []string{"DEPLOY_TOKEN", "NOPE"}, Retry: &cikit.Retry{Max: 2},
		Steps: []cikit.Step{{Run: `echo the first step ran`}}})
	j := waitEnded(t, e, runID)
	require.Equal(t, cikit.JobFailed, j.State)
	require.Equal(t, 1, j.Attempt, "a configuration failure is not retried")
	require.Contains(t, j.Reason, "secret NOPE not found in the scopes the job may read (repo:acme/api, org:acme)")
	out, _ := e.logOf(t, runID, "deploy")
	require.NotContains(t, out, "the first step ran")
	calls := e.callsMade()
	require.Contains(t, calls, "secrets Unprocessable Entity", "%v", calls)
	require.False(t, strings.Contains(strings.Join(calls, ","), "secrets OK"))
}

// TestAgentGivesTheIDTokenRequest: a GitHub job with the permission
// id-token: write is given where its steps request ID tokens, and the
// request token to do so with: a request there gets a token for the
// audience asked.
func TestAgentGivesTheIDTokenRequest(t *testing.T) {
	t.Parallel()
	opt, iss := withSecretsIssuer(t)
	e := setup(t, longTTL, opt)
	got := make(chan string, 1)
	e.startWith(t, agent.ExecutorFunc(func(ctx context.Context, job process.Job) agent.Result {
		f, err := job.FetchSecrets(ctx)
		if err != nil {
			return agent.Result{State: cikit.JobFailed, Reason: err.Error()}
		}
		if f.IDTokenRequest == nil {
			return agent.Result{State: cikit.JobFailed, Reason: "no ID token request"}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.IDTokenRequest.URL+"&audience=sts.amazonaws.com", nil)
		if err != nil {
			return agent.Result{State: cikit.JobFailed, Reason: err.Error()}
		}
		req.Header.Set("Authorization", "Bearer "+f.IDTokenRequest.Token)
		req.Close = true // no idle connection outlives the test
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return agent.Result{State: cikit.JobFailed, Reason: err.Error()}
		}
		defer resp.Body.Close()
		var body struct {
			Count int    `json:"count"`
			Value string `json:"value"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Count != 1 {
			return agent.Result{State: cikit.JobFailed, Reason: fmt.Sprintf("the ID token request was answered %d (%v)", resp.StatusCode, err)}
		}
		got <- body.Value
		return agent.Result{State: cikit.JobSucceeded}
	}))
	runID := e.newSecretsRun(t, &cikit.JobSpec{ID: "oidc", Format: "github", Permissions: map[string]string{"id-token": "write"},
		Steps: []cikit.Step{{Run: "true"}}})
	j := waitEnded(t, e, runID)
	require.Equal(t, cikit.JobSucceeded, j.State, j.Reason)
	c, err := iss.Verifier("sts.amazonaws.com").Verify(t.Context(), <-got)
	require.NoError(t, err)
	require.Equal(t, "oidc", c.JobID)
	require.Equal(t, runID, c.RunID)
	require.Equal(t, "acme/api", c.Repository)
}
