package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/secrets"
)

// secretsAudience is the platform's own audience: that of the tokens
// runners present for the secrets call.
const secretsAudience = "https://ci.example.com/v1/secrets"

var quietLog = slog.New(slog.DiscardHandler)

// oidcKeys is the OIDC signing key store the tests' issuers share:
// making an RSA key for each test takes long under the race detector.
var oidcKeys = sync.OnceValues(func() (*secrets.MemoryKeyStore, error) {
	kr, err := secrets.NewKeyring(secrets.Key{ID: "test", Secret: bytes.Repeat([]byte{7}, secrets.KeyBytes)})
	if err != nil {
		return nil, err
	}
	return secrets.NewMemoryKeyStore(kr), nil
})

// secretsBundle is a bundle whose server gives jobs their secrets: a real
// issuer, broker and keeper over memory stores.
type secretsBundle struct {
	*bundle
	issuer *secrets.Issuer
	store  *secrets.MemoryStore
	dyn    *recordingDynamic
	leases *countingLeases
	runner string
}

// countingLeases counts the reads of a lease store's owners.
type countingLeases struct {
	*secrets.MemoryLeaseStore
	owned atomic.Int32
}

func (c *countingLeases) Owned(ctx context.Context, owner string) ([]secrets.Lease, error) {
	c.owned.Add(1)
	return c.MemoryLeaseStore.Owned(ctx, owner)
}

// setupSecrets returns a server with secrets over a store holding, for
// acme/api, DEPLOY_TOKEN and OTHER_SECRET in its repository's scope,
// DEPLOY_TOKEN and PROD_KEY in its environment prod's, ORG_TOKEN in its
// owner's, and another repository's DEPLOY_TOKEN; names starting DB_
// come from a dynamic provider.
func setupSecrets(t *testing.T) *secretsBundle {
	t.Helper()
	sb := &secretsBundle{}
	sb.bundle = setupWith(t, memoryStores, func(c *fleet.ServerConfig) {
		sb.secrets(t, c)
	})
	sb.runner = sb.register(t)
	return sb
}

// secrets configures c's secrets.
func (sb *secretsBundle) secrets(t *testing.T, c *fleet.ServerConfig) {
	t.Helper()
	ctx := context.Background()
	keys, err := oidcKeys()
	require.NoError(t, err)
	sb.issuer, err = secrets.NewIssuer(ctx, secrets.IssuerConfig{URL: "https://ci.example.com", Keys: keys, Now: c.Now, Logger: quietLog})
	require.NoError(t, err)
	kr, err := secrets.NewKeyring(secrets.Key{ID: "store", Secret: bytes.Repeat([]byte{3}, secrets.KeyBytes)})
	require.NoError(t, err)
	sb.store = secrets.NewMemoryStore(kr)
	for _, s := range []struct {
		scope       secrets.Scope
		name, value string
	}{
		{secrets.RepoScope("acme/api"), "DEPLOY_TOKEN", "deploy-token-of-api"},
		{secrets.RepoScope("acme/api"), "OTHER_SECRET", "other-secret-of-api"},
		{secrets.EnvScope("acme/api", "prod"), "DEPLOY_TOKEN", "deploy-token-of-prod"},
		{secrets.EnvScope("acme/api", "prod"), "PROD_KEY", "prod-key-of-api"},
		{secrets.OrgScope("acme"), "ORG_TOKEN", "org-token-of-acme"},
		{secrets.RepoScope("evil/fork"), "DEPLOY_TOKEN", "deploy-token-of-evil"},
	} {
		require.NoError(t, sb.store.Set(ctx, s.scope, s.name, s.value))
	}
	sb.dyn = newRecordingDynamic(c.Now)
	sb.leases = &countingLeases{MemoryLeaseStore: secrets.NewMemoryLeaseStore()}
	keeper, err := secrets.NewKeeper(secrets.KeeperConfig{Leases: sb.leases, Providers: []secrets.Dynamic{sb.dyn}, Now: c.Now})
	require.NoError(t, err)
	broker, err := secrets.NewBroker(secrets.BrokerConfig{Verifier: sb.issuer.Verifier(secretsAudience), Replays: secrets.NewMemoryReplays(c.Now),
		Providers: []secrets.Provider{sb.store, sb.dyn}, Leases: keeper, Logger: quietLog})
	require.NoError(t, err)
	c.Secrets = &fleet.JobSecrets{Issuer: sb.issuer, Broker: broker, Audience: secretsAudience}
	c.Logger = quietLog
}

// recordingDynamic is a Dynamic provider of the secrets whose names
// start with DB_, each a new lease lasting two minutes, recording the
// renewals and revocations it is asked for: it stands for a database's
// credentials, to test how the server drives the keeper.
type recordingDynamic struct {
	now func() time.Time

	mu      sync.Mutex
	next    int
	granted []string
	renews  map[string]int
	revokes map[string]int
}

func newRecordingDynamic(now func() time.Time) *recordingDynamic {
	return &recordingDynamic{now: now, renews: map[string]int{}, revokes: map[string]int{}}
}

func (d *recordingDynamic) Name() string { return "db" }

func (d *recordingDynamic) Fetch(ctx context.Context, r secrets.Request) ([]secrets.Secret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []secrets.Secret
	for _, n := range r.Names {
		if !strings.HasPrefix(n, "DB_") {
			continue
		}
		d.next++
		id := fmt.Sprintf("db-lease-%d", d.next)
		d.granted = append(d.granted, id)
		out = append(out, secrets.Secret{Name: n, Value: "password-of-" + id, Scope: r.Scopes[0],
			Lease: &secrets.Lease{ID: id, Expires: d.now().Add(2 * time.Minute)}})
	}
	return out, nil
}

func (d *recordingDynamic) Renew(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.renews[id]++
	return d.now().Add(2 * time.Minute), nil
}

func (d *recordingDynamic) Revoke(ctx context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revokes[id]++
	return nil
}

// calls returns the leases granted and how often each was renewed and
// revoked.
func (d *recordingDynamic) calls() (granted []string, renews, revokes map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	renews, revokes = map[string]int{}, map[string]int{}
	for k, v := range d.renews {
		renews[k] = v
	}
	for k, v := range d.revokes {
		revokes[k] = v
	}
	return append([]string(nil), d.granted...), renews, revokes
}

// pushContext is the context of a run of a push to acme/api's main.
func pushContext() *cikit.RunContext {
	return &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main", RefName: "main", RefType: "branch",
		SHA: "4f2a9c1e0b7d3a5f6c8e9d0a1b2c3d4e5f6a7b8c", Actor: "octocat"}
}

// forkContext is the context of a run of a pull request from a fork.
func forkContext() *cikit.RunContext {
	rc := pushContext()
	rc.Event, rc.Ref, rc.RefName, rc.HeadRef, rc.BaseRef, rc.PRNumber, rc.Fork = "pull_request", "refs/pull/7/merge", "7/merge", "feature", "main", 7, true
	return rc
}

// newRunIn creates and dispatches a run of context rc.
func (b *bundle) newRunIn(t *testing.T, rc *cikit.RunContext, specs ...*cikit.JobSpec) string {
	t.Helper()
	run, err := b.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs, Context: rc})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

// claimedSecrets is a claimed job with its secrets token.
type claimedSecrets struct {
	*claimed
	SecretsToken string
	HasToken     bool // the claim's answer had the field
}

// claimOne claims the next job, which must come.
func (sb *secretsBundle) claimOne(t *testing.T) *claimedSecrets {
	t.Helper()
	status, out := sb.call(t, http.MethodGet, "/v1/jobs/claim?wait=5", sb.runner, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	c := &claimedSecrets{claimed: &claimed{RunID: out["run_id"].(string), JobID: out["job_id"].(string), Token: out["job_token"].(string),
		Attempt: int(out["attempt"].(float64))}}
	if v, ok := out["secrets_token"]; ok {
		c.HasToken = true
		c.SecretsToken, _ = v.(string)
	}
	return c
}

// claimJobs claims n jobs, by job ID.
func (sb *secretsBundle) claimJobs(t *testing.T, n int) map[string]*claimedSecrets {
	t.Helper()
	out := map[string]*claimedSecrets{}
	for range n {
		c := sb.claimOne(t)
		out[c.JobID] = c
	}
	return out
}

// fetch makes c's secrets call with its job token and its secrets token.
func (sb *secretsBundle) fetch(t *testing.T, c *claimedSecrets) (int, map[string]any) {
	t.Helper()
	return sb.call(t, http.MethodPost, jobPath(c.claimed, "secrets"), c.Token, map[string]any{"id_token": c.SecretsToken})
}

// raw sends body as it is.
func (b *bundle) raw(t *testing.T, method, path, token string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out
}

// complete completes c as succeeded.
func (b *bundle) complete(t *testing.T, c *claimed) {
	t.Helper()
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
}

func secretSpec(id string, names ...string) *cikit.JobSpec {
	s := spec(id)
	s.Secrets = names
	return s
}

// TestClaimHandsOutTheSecretsToken: the claim of a job that names secrets
// or asks for ID tokens carries the job's ID token for the platform's
// audience, naming the run, job, attempt, repository, ref and
// environment; that of a job that needs neither carries none.
func TestClaimHandsOutTheSecretsToken(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	deploy := secretSpec("deploy", "DEPLOY_TOKEN")
	deploy.Environment = &cikit.Environment{Name: "prod"}
	ids := spec("ids")
	ids.IDTokens = []cikit.IDToken{{Name: "AWS_TOKEN", Audience: []string{"sts.amazonaws.com"}}}
	oidc := spec("oidc")
	oidc.Format, oidc.Permissions = "github", map[string]string{"id-token": "write"}
	runID := sb.newRunIn(t, pushContext(), spec("plain"), deploy, ids, oidc)
	got := sb.claimJobs(t, 4)

	require.False(t, got["plain"].HasToken, "a job without secrets gets no secrets_token")
	for _, id := range []string{"ids", "oidc"} {
		require.NotEmpty(t, got[id].SecretsToken, id)
		_, err := sb.issuer.Verifier(secretsAudience).Verify(t.Context(), got[id].SecretsToken)
		require.NoError(t, err, id)
	}
	c, err := sb.issuer.Verifier(secretsAudience).Verify(t.Context(), got["deploy"].SecretsToken)
	require.NoError(t, err)
	require.Equal(t, []string{secretsAudience}, c.Audience)
	require.Equal(t, runID, c.RunID)
	require.Equal(t, "deploy", c.JobID)
	require.Equal(t, "1", c.RunAttempt)
	require.Equal(t, "acme/api", c.Repository)
	require.Equal(t, "acme", c.RepositoryOwner)
	require.Equal(t, "refs/heads/main", c.Ref)
	require.Equal(t, "prod", c.Environment)
	require.Equal(t, "repo:acme/api:environment:prod", c.Subject)
	require.Equal(t, "self-hosted", c.RunnerEnvironment)
	_, err = sb.issuer.Verifier("sts.amazonaws.com").Verify(t.Context(), got["deploy"].SecretsToken)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid, "the secrets token is for the platform only")
}

// TestSecretsCallReleasesExactlyTheNamedSecrets: the secrets call answers
// the secrets the stored spec names, from the narrowest scope that has
// each, and no other secret of those scopes; its token is good once.
func TestSecretsCallReleasesExactlyTheNamedSecrets(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	deploy := secretSpec("deploy", "DEPLOY_TOKEN", "PROD_KEY", "ORG_TOKEN")
	deploy.Environment = &cikit.Environment{Name: "prod"}
	sb.newRunIn(t, pushContext(), deploy)
	c := sb.claimOne(t)

	status, out := sb.fetch(t, c)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, map[string]any{"DEPLOY_TOKEN": "deploy-token-of-prod", "PROD_KEY": "prod-key-of-api", "ORG_TOKEN": "org-token-of-acme"}, out["secrets"],
		"OTHER_SECRET is in scope, and not named")
	require.Equal(t, []any{"env:acme/api:prod", "repo:acme/api", "org:acme"}, out["scopes"])
	require.Equal(t, map[string]any{"DEPLOY_TOKEN": "env:acme/api:prod", "PROD_KEY": "env:acme/api:prod", "ORG_TOKEN": "org:acme"}, out["from"])
	require.NotContains(t, out, "id_tokens")
	require.NotContains(t, out, "id_token_request_token", "the job may not request ID tokens")
	require.NotContains(t, out, "withheld")

	status, out = sb.fetch(t, c)
	require.Equal(t, http.StatusUnauthorized, status, "a replayed token: %v", out)
	require.Contains(t, out["error"], "replayed")
	require.NotContains(t, out, "secrets")
}

// TestSecretsCallRefusesBadRequests: every request that is not the
// attempt's own, well-formed call is refused, and releases nothing.
func TestSecretsCallRefusesBadRequests(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	sb.newRunIn(t, pushContext(), secretSpec("a", "DEPLOY_TOKEN"), secretSpec("b", "DEPLOY_TOKEN"))
	got := sb.claimJobs(t, 2)
	a, b := got["a"], got["b"]
	path := jobPath(a.claimed, "secrets")
	body := map[string]any{"id_token": a.SecretsToken}

	for _, tc := range []struct {
		name, token string
		body        any
		status      int
		field       string
	}{
		{name: "no job token", body: body, status: http.StatusUnauthorized},
		{name: "a garbled job token", token: "garbled.token", body: body, status: http.StatusUnauthorized},
		{name: "the secrets token as the job token", token: a.SecretsToken, body: body, status: http.StatusUnauthorized},
		{name: "another job's job token", token: b.Token, body: body, status: http.StatusForbidden},
		{name: "another job's secrets token", token: a.Token, body: map[string]any{"id_token": b.SecretsToken}, status: http.StatusForbidden},
		{name: "a garbled secrets token", token: a.Token, body: map[string]any{"id_token": "not.a.jwt"}, status: http.StatusUnauthorized},
		{name: "no id_token", token: a.Token, body: map[string]any{}, status: http.StatusBadRequest, field: "id_token"},
	} {
		status, out := sb.call(t, http.MethodPost, path, tc.token, tc.body)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		require.NotEmpty(t, out["error"], tc.name)
		require.NotContains(t, out, "secrets", tc.name)
		if tc.field != "" {
			require.Equal(t, tc.field, out["field"], tc.name)
		}
	}
	status, out := sb.raw(t, http.MethodPost, path, a.Token, []byte(`{"id_token": `))
	require.Equal(t, http.StatusBadRequest, status, "bad JSON: %v", out)
	require.Contains(t, out["error"], "not the JSON this call takes")
	big, err := json.Marshal(map[string]any{"id_token": strings.Repeat("x", 32<<10)})
	require.NoError(t, err)
	status, out = sb.raw(t, http.MethodPost, path, a.Token, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "%v", out)
	require.Contains(t, out["error"], "larger than 32768 bytes")

	// None of that used the token up.
	status, out = sb.fetch(t, a)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, map[string]any{"DEPLOY_TOKEN": "deploy-token-of-api"}, out["secrets"])

	// Once the attempt ended, its secrets are not handed out.
	sb.complete(t, b.claimed)
	status, out = sb.fetch(t, b)
	require.Equal(t, http.StatusConflict, status, "%v", out)
	require.Equal(t, true, out["stale"])
	require.NotContains(t, out, "secrets")
}

// TestSecretsCallTokenOfAnotherAttempt: the secrets token of an earlier
// attempt of the job is refused for the attempt after it.
func TestSecretsCallTokenOfAnotherAttempt(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	flaky := secretSpec("flaky", "DEPLOY_TOKEN")
	flaky.Retry = &cikit.Retry{Max: 1}
	sb.newRunIn(t, pushContext(), flaky)
	first := sb.claimOne(t)
	status, out := sb.call(t, http.MethodPost, jobPath(first.claimed, "complete"), first.Token, map[string]any{"result": "failed", "exit_code": 1})
	require.Equal(t, http.StatusOK, status, "%v", out)
	second := sb.claimOne(t)
	require.Equal(t, 2, second.Attempt)

	status, out = sb.call(t, http.MethodPost, jobPath(second.claimed, "secrets"), second.Token, map[string]any{"id_token": first.SecretsToken})
	require.Equal(t, http.StatusForbidden, status, "%v", out)
	require.Contains(t, out["error"], "attempt 1")
	status, out = sb.fetch(t, second)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, map[string]any{"DEPLOY_TOKEN": "deploy-token-of-api"}, out["secrets"])
}

// TestSecretsCallMissing: a secret the job names that none of its scopes
// holds fails the call, naming it and the scopes searched, and releases
// none of the others; another repository's job reads nothing of acme's.
func TestSecretsCallMissing(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	sb.newRunIn(t, pushContext(), secretSpec("deploy", "DEPLOY_TOKEN", "NOPE"), secretSpec("prod", "PROD_KEY"))
	other := pushContext()
	other.Repository = "other/app"
	sb.newRunIn(t, other, secretSpec("steal", "DEPLOY_TOKEN", "ORG_TOKEN"), secretSpec("all", "*"))
	got := sb.claimJobs(t, 4)

	status, out := sb.fetch(t, got["all"])
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	require.Equal(t, "invalid", out["code"])
	require.Contains(t, out["error"], "a job must name the secrets it reads")

	for _, tc := range []struct {
		job     string
		missing []any
		scopes  []any
	}{
		{"deploy", []any{"NOPE"}, []any{"repo:acme/api", "org:acme"}},
		{"prod", []any{"PROD_KEY"}, []any{"repo:acme/api", "org:acme"}}, // of no environment: no environment's secrets
		{"steal", []any{"DEPLOY_TOKEN", "ORG_TOKEN"}, []any{"repo:other/app", "org:other"}},
	} {
		status, out := sb.fetch(t, got[tc.job])
		require.Equal(t, http.StatusUnprocessableEntity, status, "%s: %v", tc.job, out)
		require.Equal(t, "missing", out["code"], tc.job)
		require.Equal(t, tc.missing, out["missing"], tc.job)
		require.Equal(t, tc.scopes, out["scopes"], tc.job)
		require.Contains(t, out["error"], "not found in the scopes the job may read", tc.job)
		require.NotContains(t, out, "secrets", tc.job)
	}
}

// TestSecretsCallFork: a pull request from a fork gets no secrets: a
// GitHub job reads them as empty (200, withheld), a native or GitLab job
// fails (422 "withheld").
func TestSecretsCallFork(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	gh := secretSpec("github", "DEPLOY_TOKEN")
	gh.Format, gh.Permissions = "github", map[string]string{"id-token": "write"}
	native := secretSpec("native", "DEPLOY_TOKEN")
	gitlab := spec("gitlab")
	gitlab.Format, gitlab.IDTokens = "gitlab", []cikit.IDToken{{Name: "AWS_TOKEN", Audience: []string{"sts.amazonaws.com"}}}
	sb.newRunIn(t, forkContext(), gh, native, gitlab)
	got := sb.claimJobs(t, 3)

	c, err := sb.issuer.Verifier(secretsAudience).Verify(t.Context(), got["github"].SecretsToken)
	require.NoError(t, err)
	require.True(t, c.Fork)
	status, out := sb.fetch(t, got["github"])
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["withheld"])
	require.Equal(t, map[string]any{}, out["secrets"])
	require.Equal(t, []any{}, out["scopes"], "a fork's job may read no scope")
	require.NotContains(t, out, "id_token_request_token", "a fork's job requests no ID tokens")

	for _, job := range []string{"native", "gitlab"} {
		status, out := sb.fetch(t, got[job])
		require.Equal(t, http.StatusUnprocessableEntity, status, "%s: %v", job, out)
		require.Equal(t, "withheld", out["code"], job)
		require.Contains(t, out["error"], "the job may read no secret scope (by default a pull request from a fork reads none)", job)
		require.NotContains(t, out, "secrets", job)
		require.NotContains(t, out, "id_tokens", job)
	}
	require.Contains(t, must(sb.fetch(t, got["native"]))["error"], "replayed", "the refusal used the token up")
}

func must(_ int, out map[string]any) map[string]any { return out }

// TestSecretsCallIDTokens: the ID tokens a job's spec asks for come with
// its secrets, each for its audiences and naming the job; the platform's
// own audience is refused, and no secret is released then.
func TestSecretsCallIDTokens(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	gl := secretSpec("gitlab", "DB_PASSWORD")
	gl.Format = "gitlab"
	gl.IDTokens = []cikit.IDToken{{Name: "AWS_TOKEN", Audience: []string{"sts.amazonaws.com"}}, {Name: "VAULT_TOKEN", Audience: []string{"https://vault.example.com", "vault"}}}
	greedy := secretSpec("greedy", "DB_PASSWORD")
	greedy.IDTokens = []cikit.IDToken{{Name: "OK_TOKEN", Audience: []string{"vault"}}, {Name: "PLATFORM_TOKEN", Audience: []string{"vault", secretsAudience}}}
	runID := sb.newRunIn(t, pushContext(), gl, greedy)
	got := sb.claimJobs(t, 2)

	status, out := sb.fetch(t, got["gitlab"])
	require.Equal(t, http.StatusOK, status, "%v", out)
	toks, _ := out["id_tokens"].(map[string]any)
	require.Len(t, toks, 2, "%v", out)
	for name, aud := range map[string][]string{"AWS_TOKEN": {"sts.amazonaws.com"}, "VAULT_TOKEN": {"https://vault.example.com", "vault"}} {
		raw, _ := toks[name].(string)
		for _, a := range aud {
			c, err := sb.issuer.Verifier(a).Verify(t.Context(), raw)
			require.NoError(t, err, "%s for %s", name, a)
			require.Equal(t, aud, c.Audience, name)
			require.Equal(t, runID, c.RunID, name)
			require.Equal(t, "gitlab", c.JobID, name)
			require.Equal(t, "acme/api", c.Repository, name)
			require.Equal(t, "refs/heads/main", c.Ref, name)
		}
		_, err := sb.issuer.Verifier(secretsAudience).Verify(t.Context(), raw)
		require.ErrorIs(t, err, secrets.ErrTokenInvalid, "%s is not good for the secrets call", name)
	}
	_, err := sb.issuer.Verifier("vault").Verify(t.Context(), toks["AWS_TOKEN"].(string))
	require.Error(t, err)

	status, out = sb.fetch(t, got["greedy"])
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	require.Equal(t, "audience", out["code"])
	require.Contains(t, out["error"], "PLATFORM_TOKEN")
	require.NotContains(t, out, "secrets")
	require.NotContains(t, out, "id_tokens")
	granted, _, revokes := sb.dyn.calls()
	require.Len(t, granted, 1, "the refused job was granted no database credential")
	require.Empty(t, revokes)
}

// TestIDTokenCall: a GitHub job with the permission id-token: write gets
// a request token with its secrets, with which its steps request ID
// tokens for audiences of their choosing (GitHub's
// ACTIONS_ID_TOKEN_REQUEST_URL), while the attempt is current.
func TestIDTokenCall(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	oidc := spec("oidc")
	oidc.Format, oidc.Permissions = "github", map[string]string{"id-token": "write", "contents": "read"}
	oidc.Environment = &cikit.Environment{Name: "prod"}
	runID := sb.newRunIn(t, pushContext(), oidc, secretSpec("other", "DEPLOY_TOKEN"))
	got := sb.claimJobs(t, 2)
	c := got["oidc"]

	status, out := sb.fetch(t, c)
	require.Equal(t, http.StatusOK, status, "%v", out)
	rt, _ := out["id_token_request_token"].(string)
	require.NotEmpty(t, rt, "%v", out)
	require.Empty(t, out["secrets"])

	idToken := func(c *claimed, token, query string) (int, map[string]any) {
		t.Helper()
		return sb.call(t, http.MethodGet, jobPath(c, "id-token")+query, token, nil)
	}
	status, out = idToken(c.claimed, rt, "?api-version=1&audience="+url.QueryEscape("sts.amazonaws.com"))
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, float64(1), out["count"])
	claims, err := sb.issuer.Verifier("sts.amazonaws.com").Verify(t.Context(), out["value"].(string))
	require.NoError(t, err)
	require.Equal(t, []string{"sts.amazonaws.com"}, claims.Audience)
	require.Equal(t, runID, claims.RunID)
	require.Equal(t, "oidc", claims.JobID)
	require.Equal(t, "1", claims.RunAttempt)
	require.Equal(t, "repo:acme/api:environment:prod", claims.Subject)

	for _, tc := range []struct {
		name, token, query string
		status             int
	}{
		{"no audience", rt, "", http.StatusBadRequest},
		{"an empty audience", rt, "?audience=", http.StatusBadRequest},
		{"the platform's audience", rt, "?audience=" + url.QueryEscape(secretsAudience), http.StatusForbidden},
		{"an oversized audience", rt, "?audience=" + strings.Repeat("a", cikit.MaxAudienceBytes+1), http.StatusBadRequest},
		{"a control character", rt, "?audience=" + url.QueryEscape("sts\namazonaws.com"), http.StatusBadRequest},
		{"the job token", c.Token, "?audience=sts.amazonaws.com", http.StatusUnauthorized},
		{"the secrets token", c.SecretsToken, "?audience=sts.amazonaws.com", http.StatusUnauthorized},
		{"no token", "", "?audience=sts.amazonaws.com", http.StatusUnauthorized},
		{"a garbled token", rt + "x", "?audience=sts.amazonaws.com", http.StatusUnauthorized},
	} {
		status, out := idToken(c.claimed, tc.token, tc.query)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		require.NotEmpty(t, out["error"], tc.name)
		require.NotContains(t, out, "value", tc.name)
	}
	status, out = idToken(got["other"].claimed, rt, "?audience=sts.amazonaws.com")
	require.Equal(t, http.StatusForbidden, status, "another job's path: %v", out)

	// A job without the permission gets no request token.
	status, out = sb.fetch(t, got["other"])
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.NotContains(t, out, "id_token_request_token")

	sb.complete(t, c.claimed)
	status, out = idToken(c.claimed, rt, "?audience=sts.amazonaws.com")
	require.Equal(t, http.StatusConflict, status, "after the attempt ended: %v", out)
	require.Equal(t, true, out["stale"])
}

// TestSecretsWithoutConfig: a server without secrets fails at the claim,
// as a configuration failure (not retried), a job that names secrets or
// asks for ID tokens, and answers the secrets calls 404.
func TestSecretsWithoutConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	named := secretSpec("named", "DEPLOY_TOKEN", "ORG_TOKEN")
	named.Retry = &cikit.Retry{Max: 2}
	ids := spec("ids")
	ids.Retry, ids.IDTokens = &cikit.Retry{Max: 2}, []cikit.IDToken{{Name: "AWS_TOKEN", Audience: []string{"sts.amazonaws.com"}}}
	runID := b.newRunIn(t, pushContext(), named, ids, spec("plain"))

	c := b.claim(t, runner, "5")
	require.NotNil(t, c)
	require.Equal(t, "plain", c.JobID, "the others were refused")
	require.Nil(t, b.claim(t, runner, "1"), "the others were refused") // whichever the first claim did not come to
	for id, reason := range map[string]string{
		"named": "the job asks for the secrets DEPLOY_TOKEN, ORG_TOKEN, and this platform has no secrets configured",
		"ids":   "the job asks for ID tokens, and this platform has no secrets configured",
	} {
		j, err := b.jobs.JobGet(context.Background(), runID, id)
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, j.State, id)
		require.Equal(t, 1, j.Attempt, "%s: a configuration failure is not retried", id)
		require.Equal(t, reason, j.Reason, id)
	}

	status, out := b.call(t, http.MethodPost, jobPath(c, "secrets"), c.Token, map[string]any{"id_token": "x"})
	require.Equal(t, http.StatusNotFound, status, "%v", out)
	require.Equal(t, "secrets are not configured on this server", out["error"])
	status, out = b.call(t, http.MethodGet, jobPath(c, "id-token")+"?audience=x", c.Token, nil)
	require.Equal(t, http.StatusUnauthorized, status, "a job token is no request token: %v", out)
}

// TestSecretsDynamicLeases: the leases of a job's dynamic secrets are
// renewed by its heartbeats and revoked when it ends: completed,
// returned, or ended by the reaper (EndSecrets).
func TestSecretsDynamicLeases(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	sb.newRunIn(t, pushContext(), secretSpec("done", "DEPLOY_TOKEN", "DB_PASSWORD"), secretSpec("back", "DB_PASSWORD"), secretSpec("reaped", "DB_PASSWORD"),
		spec("plain"))
	got := sb.claimJobs(t, 4)

	// A job without secrets holds no lease: its heartbeats and its end
	// leave the lease store alone.
	plain := got["plain"].claimed
	status, out := sb.call(t, http.MethodPost, jobPath(plain, "heartbeat"), plain.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	sb.complete(t, plain)
	require.Zero(t, sb.leases.owned.Load(), "the lease store was read for a job without secrets")

	leaseOf := map[string]string{}
	for _, id := range []string{"done", "back", "reaped"} {
		status, out := sb.fetch(t, got[id])
		require.Equal(t, http.StatusOK, status, "%s: %v", id, out)
		pw, _ := out["secrets"].(map[string]any)["DB_PASSWORD"].(string)
		require.True(t, strings.HasPrefix(pw, "password-of-db-lease-"), "%s: %v", id, out)
		leaseOf[id] = strings.TrimPrefix(pw, "password-of-")
	}

	// Heartbeats renew the leases that are due (they last two minutes,
	// less than the keeper's RenewBefore).
	for _, id := range []string{"done", "back", "reaped"} {
		status, out := sb.call(t, http.MethodPost, jobPath(got[id].claimed, "heartbeat"), got[id].Token, nil)
		require.Equal(t, http.StatusOK, status, "%s: %v", id, out)
	}
	granted, renews, revokes := sb.dyn.calls()
	require.ElementsMatch(t, []string{leaseOf["done"], leaseOf["back"], leaseOf["reaped"]}, granted)
	require.Equal(t, map[string]int{leaseOf["done"]: 1, leaseOf["back"]: 1, leaseOf["reaped"]: 1}, renews)
	require.Empty(t, revokes, "nothing ended yet")

	sb.complete(t, got["done"].claimed)
	_, _, revokes = sb.dyn.calls()
	require.Equal(t, map[string]int{leaseOf["done"]: 1}, revokes, "completed: its lease is revoked")

	status, out = sb.call(t, http.MethodPost, jobPath(got["back"].claimed, "return"), got["back"].Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	_, _, revokes = sb.dyn.calls()
	require.Equal(t, map[string]int{leaseOf["done"]: 1, leaseOf["back"]: 1}, revokes, "returned: its lease is revoked")

	r := got["reaped"]
	sb.server.EndSecrets(t.Context(), r.RunID, r.JobID, r.Attempt)
	_, renews, revokes = sb.dyn.calls()
	require.Equal(t, map[string]int{leaseOf["done"]: 1, leaseOf["back"]: 1, leaseOf["reaped"]: 1}, revokes, "ended by the reaper: its lease is revoked")
	status, out = sb.call(t, http.MethodPost, jobPath(r.claimed, "heartbeat"), r.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	_, again, _ := sb.dyn.calls()
	require.Equal(t, renews, again, "a revoked lease is renewed no more")
}

// TestIDTokenCapped: a job whose pipeline asks for id-token: write, and
// whose Admission caps its token to reading contents (a fork's job), gets
// no secrets token at its claim and no ID token request token; the same
// job uncapped gets both.
func TestIDTokenCapped(t *testing.T) {
	t.Parallel()
	sb := setupSecrets(t)
	capped := spec("capped")
	capped.Format, capped.Permissions = "github", map[string]string{"id-token": "write", "contents": "write"}
	capped.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, TokenPermissions: map[string]string{"contents": "read", "metadata": "read"}}
	capped.Secrets = []string{"DEPLOY_TOKEN"}
	capped.Admission.SecretsScopes = []string{"repo:acme/api"}
	free := spec("free")
	free.Format, free.Permissions = "github", map[string]string{"id-token": "write"}
	sb.newRunIn(t, pushContext(), capped, free)
	got := sb.claimJobs(t, 2)

	status, out := sb.fetch(t, got["capped"])
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.NotContains(t, out, "id_token_request_token", "the cap leaves the job no id-token: write")
	require.Equal(t, map[string]any{"DEPLOY_TOKEN": "deploy-token-of-api"}, out["secrets"], "its secrets still come")

	status, out = sb.fetch(t, got["free"])
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.NotEmpty(t, out["id_token_request_token"])

	onlyToken := spec("only")
	onlyToken.Format, onlyToken.Permissions = "github", map[string]string{"id-token": "write"}
	onlyToken.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, TokenPermissions: map[string]string{"contents": "read"}}
	sb.newRunIn(t, pushContext(), onlyToken)
	c := sb.claimOne(t)
	require.Equal(t, "only", c.JobID)
	require.False(t, c.HasToken, "a job that, capped, asks for nothing gets no secrets token")
}
