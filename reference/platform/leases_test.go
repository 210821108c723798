package platform_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// leasesPipeline's jobs each read the dynamic secret DB_URL: one
// succeeds, one fails, one runs until its run is cancelled, and one runs
// on a runner of the label "doomed", which the test plays and stops
// answering for, as a runner killed with SIGKILL would.
const leasesPipeline = `on: [push]
jobs:
  ok:
    secrets: [DB_URL]
    steps: ["true"]
  fails:
    secrets: [DB_URL]
    steps: ["exit 3"]
  cancelled:
    needs: [ok, fails]
    if: always()
    secrets: [DB_URL]
    steps: ["sleep 600"]
  lost:
    runs_on: [doomed]
    secrets: [DB_URL]
    steps: ["true"]
`

// TestDynamicSecretsRevokedWhenJobsEnd: with dynamic PostgreSQL
// credentials configured, each job naming DB_URL gets a login role of its
// own, which is dropped when the job ends, however it ends: success,
// failure, its run cancelled, or its runner lost (it stops heartbeating,
// as a runner SIGKILLed does) and its attempt reaped. The lost runner's
// credential connects while its job is live and no longer once it is
// reaped.
func TestDynamicSecretsRevokedWhenJobsEnd(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": leasesPipeline})
	w.onPostgres(t)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, w.cfg.Postgres.URL)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	var b [6]byte
	rand.Read(b[:])
	reader := "cikit_e2e_reader_" + hex.EncodeToString(b[:])
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{reader}.Sanitize()+" NOLOGIN")
	require.NoError(t, err)
	t.Cleanup(func() { dropRoleAndMembers(t, w.cfg.Postgres.URL, reader) })
	w.cfg.Secrets.Keys = []string{"e2e:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))}
	w.cfg.Secrets.PostgresRoles.AdminURL = w.cfg.Postgres.URL
	w.cfg.Secrets.PostgresRoles.URL = w.cfg.Postgres.URL
	w.cfg.Secrets.PostgresRoles.Roles = []string{"DB_URL=" + reader + "@repo:" + repoName}
	s := serve(t, w.cfg)
	base := s.p.URL()

	// credentials counts the login roles granted reader: the live
	// dynamic credentials.
	credentials := func() int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE g.rolname = $1`, reader).Scan(&n))
		return n
	}

	code, body := deliver(t, base, "delivery-leases", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	run := waitRun(t, base, repoName)

	// The doomed runner takes lost, fetches its secrets, and is gone.
	dbURL := playLostRunner(t, base)
	cred, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err, "the dynamic credential connects while its job is live")
	require.NoError(t, cred.Ping(ctx))
	cred.Close(ctx)

	var st apiRun
	waitFor(t, 60*time.Second, "cancelled to run", func() bool {
		return getJSON(t, base+"/api/v1/runs/"+run, &st) == 200 && st.states()["cancelled"] == "running"
	})
	require.Equal(t, "succeeded", st.states()["ok"])
	require.Equal(t, "failed", st.states()["fails"])
	// lost's runner is gone: its lease expires, the reaper fails the
	// attempt, and its credential goes with those of ok and fails; only
	// cancelled's is left.
	// (A lost runner's job is tried again: it waits for another doomed
	// runner.)
	waitFor(t, 60*time.Second, "lost to be reaped", func() bool {
		return getJSON(t, base+"/api/v1/runs/"+run, &st) == 200 && st.states()["lost"] != "running"
	})
	t.Logf("states after the reaper: %v", st.states())
	waitFor(t, 30*time.Second, "the credentials of ok, fails and lost to be dropped", func() bool { return credentials() == 1 })
	_, err = pgx.Connect(ctx, dbURL)
	require.Error(t, err, "the lost runner's credential no longer connects")

	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/runs/"+run+"/cancel", nil)
	require.NoError(t, err)
	resp, err := doAsAdmin(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	waitFor(t, 60*time.Second, "the run to end", func() bool {
		return getJSON(t, base+"/api/v1/runs/"+run, &st) == 200 && st.states()["cancelled"] == "cancelled"
	})
	waitFor(t, 30*time.Second, "cancelled's credential to be dropped", func() bool { return credentials() == 0 })
}

// playLostRunner registers a runner of the label doomed, claims its job,
// presents the job's ID token for its secrets and returns DB_URL; then it
// sends nothing more.
func playLostRunner(t *testing.T, base string) string {
	t.Helper()
	call := func(method, path, token string, in, out any, want int) {
		t.Helper()
		var body bytes.Buffer
		if in != nil {
			require.NoError(t, json.NewEncoder(&body).Encode(in))
		}
		req, err := http.NewRequest(method, base+path, &body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "%s %s", method, path)
		if out != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
	}
	var reg struct {
		RunnerToken string `json:"runner_token"`
	}
	call(http.MethodPost, "/v1/runners", "e2e-registration-token", map[string]any{"name": "doomed", "labels": []string{"doomed"}}, &reg, http.StatusCreated)
	var job struct {
		RunID        string `json:"run_id"`
		JobID        string `json:"job_id"`
		JobToken     string `json:"job_token"`
		SecretsToken string `json:"secrets_token"`
	}
	call(http.MethodGet, "/v1/jobs/claim?wait=30", reg.RunnerToken, nil, &job, http.StatusOK)
	require.Equal(t, "lost", job.JobID)
	require.NotEmpty(t, job.SecretsToken)
	var sec struct {
		Secrets map[string]string `json:"secrets"`
	}
	call(http.MethodPost, "/v1/jobs/"+url.PathEscape(job.RunID)+"/"+url.PathEscape(job.JobID)+"/secrets", job.JobToken, map[string]string{"id_token": job.SecretsToken}, &sec, http.StatusOK)
	require.True(t, strings.HasPrefix(sec.Secrets["DB_URL"], "postgres"), "DB_URL is a connection URL")
	return sec.Secrets["DB_URL"]
}

// dropRoleAndMembers drops the roles granted role, then role.
func dropRoleAndMembers(t *testing.T, connURL, role string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT u.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member WHERE g.rolname = $1`, role)
	require.NoError(t, err)
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, m := range append(members, role) {
		id := pgx.Identifier{m}.Sanitize()
		_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, m)
		_, err := conn.Exec(ctx, "DROP OWNED BY "+id+"; DROP ROLE IF EXISTS "+id)
		require.NoError(t, err)
	}
}
