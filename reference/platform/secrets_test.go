package platform_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cikit/cikit/internal/kafkatest"
)

// secretsPipeline is a deploy job of environment prod that reads
// DEPLOY_TOKEN (its repository's) and PROD_KEY (its environment's) and
// prints them every way a leak could take: as they are, in base64 and in
// hex, in two writes with nothing between them, after 64 KiB less three
// bytes of output so that one straddles a log chunk, and a line of each
// secret in the middle of other output.
const secretsPipeline = `on:
  push:
  manual:
jobs:
  deploy:
    environment: prod
    secrets: [DEPLOY_TOKEN, PROD_KEY]
    steps:
      - echo "plain $DEPLOY_TOKEN and $PROD_KEY"
      - printf %s "$DEPLOY_TOKEN" | base64
      - printf %s "$PROD_KEY" | xxd -p
      - printf '%s' "$(printf '%s' "$DEPLOY_TOKEN" | cut -c1-5)"; printf '%s\n' "$(printf '%s' "$DEPLOY_TOKEN" | cut -c6-)"
      - head -c 65533 /dev/zero | tr '\0' x; printf '%s\n' "$PROD_KEY"
      - printf %s "$DEPLOY_TOKEN$PROD_KEY" | sha256sum
`

// The secrets' values.
const (
	deployToken = "dt-9f2c7e1a4b8d6f03"
	prodKey     = "pk-prod-5e7a91c3d2b4"
)

// TestSecretsEndToEnd: on PostgreSQL, a job names DEPLOY_TOKEN, set in
// its repository's scope, and PROD_KEY, set in its environment prod's,
// through the secrets API; both reach its steps (their digest says so),
// and every way the steps print them comes out masked in the live log,
// the stored log and the job's API. No row of any table (runs, jobs,
// specs, events, outbox, leases; the store keeps them sealed), no record
// of any Kafka topic and no file of the platform's directories holds
// them. The same job in another
// repository of the organisation gets neither and fails before its first
// step, naming them and the scopes it looked in.
func TestSecretsEndToEnd(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": secretsPipeline})
	w.onPostgres(t)
	kafka := kafkatest.New(t)
	w.cfg.Kafka.Brokers = kafka.Addrs()
	w.cfg.Secrets.Keys = []string{"e2e:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))}
	other := filepath.Join(w.root, "repos", "acme", "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, ".cikit.yml"), []byte(secretsPipeline), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "the pipeline"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = other
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, w.github.CreateRepo("acme/other", "main"))
	s := serve(t, w.cfg)
	base := s.p.URL()

	setSecret(t, base, "repo:acme/app", "DEPLOY_TOKEN", deployToken)
	setSecret(t, base, "env:acme/app:prod", "PROD_KEY", prodKey)

	code, body := deliver(t, base, "delivery-secrets", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	run := waitRun(t, base, "acme/app")
	live := followLog(t, base, run, "deploy")

	w.waitStatuses(t, 120*time.Second, "deploy")
	v, stored := jobWorldJob(t, base, run, "deploy")
	require.Equal(t, "succeeded", v.State, stored)
	digest := sha256.Sum256([]byte(deployToken + prodKey))
	require.Contains(t, stored, hex.EncodeToString(digest[:]), "the steps got both secrets")
	followed := <-live
	require.Contains(t, followed, hex.EncodeToString(digest[:]))
	api, err := json.Marshal(v)
	require.NoError(t, err)
	for where, text := range map[string]string{"the stored log": stored, "the live log": followed, "the job's API": string(api)} {
		for i, leak := range leaks(deployToken, prodKey) {
			if j := strings.Index(text, leak); j >= 0 {
				t.Fatalf("%s shows form %d of a secret: …%s…", where, i, text[max(0, j-80):min(len(text), j+len(leak)+20)])
			}
		}
	}
	require.Contains(t, stored, "plain *** and ***")
	require.GreaterOrEqual(t, strings.Count(stored, "***"), 6, "each print is masked, not dropped")
	noSecretAtRest(t, w, leaks(deployToken, prodKey))
	noSecretInKafka(t, kafka, leaks(deployToken, prodKey))

	// Another repository of the organisation: no such secrets in its
	// scopes.
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/repos/acme/other/pipelines", strings.NewReader(`{"ref":"main"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "other-1")
	resp, err := doAsAdmin(req)
	require.NoError(t, err)
	var trig struct {
		RunIDs []string `json:"run_ids"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&trig))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, trig.RunIDs, 1)
	var st apiRun
	waitFor(t, 60*time.Second, "the other repository's run to end", func() bool {
		return getJSON(t, base+"/api/v1/runs/"+trig.RunIDs[0], &st) == 200 && (st.State == "failed" || st.State == "succeeded")
	})
	require.Equal(t, "failed", st.State)
	ov, olog := jobWorldJob(t, base, trig.RunIDs[0], "deploy")
	require.Equal(t, "failed", ov.State)
	require.Contains(t, olog, "secrets DEPLOY_TOKEN, PROD_KEY not found in the scopes the job may read (env:acme/other:prod, repo:acme/other, org:acme)")
	require.NotContains(t, olog, "plain ", "no step ran")
}

// noSecretAtRest checks that no row of the platform's database and no
// file under the world's directories holds any of leaks.
func noSecretAtRest(t *testing.T, w *world, leaks []string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, w.cfg.Postgres.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "secrets_values", "the store is the database's")
	require.Contains(t, tables, "jobs")
	for _, table := range tables {
		for _, leak := range leaks {
			var n int
			q := `SELECT count(*) FROM ` + pgx.Identifier{table}.Sanitize() + ` t WHERE strpos(t::text, $1) > 0 OR strpos(encode(convert_to(t::text, 'UTF8'), 'escape'), $1) > 0`
			require.NoError(t, conn.QueryRow(ctx, q, leak).Scan(&n), table)
			require.Zero(t, n, "table %s holds a secret", table)
		}
	}
	require.NoError(t, filepath.WalkDir(w.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, leak := range leaks {
			require.False(t, bytes.Contains(b, []byte(leak)), "file %s holds a secret", path)
		}
		return nil
	}))
}

// noSecretInKafka checks that no record of any topic (key, value or
// header) holds any of leaks.
func noSecretInKafka(t *testing.T, kafka *kafkatest.Cluster, leaks []string) {
	t.Helper()
	cl := kafka.Client(t)
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, topics.Names())
	records := 0
	for _, topic := range topics.Names() {
		n := 0
		for _, end := range kafka.EndOffsets(t, topic) {
			n += int(end)
		}
		if n == 0 {
			continue
		}
		for _, r := range kafka.Consume(t, topic, n) {
			records++
			parts := [][]byte{r.Key, r.Value}
			for _, h := range r.Headers {
				parts = append(parts, []byte(h.Key), h.Value)
			}
			for _, p := range parts {
				for _, leak := range leaks {
					require.False(t, bytes.Contains(p, []byte(leak)), "a record of %s holds a secret", topic)
				}
			}
		}
	}
	require.NotZero(t, records, "the run's events went through Kafka")
}

// leaks are the forms of the values a log must not show.
func leaks(values ...string) []string {
	var out []string
	for _, v := range values {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)))
	}
	return out
}

// setSecret sets a secret through the API.
func setSecret(t *testing.T, base, scope, name, value string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"value": value})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, base+"/api/v1/secrets/"+name+"?scope="+scope, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := doAsAdmin(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "PUT secret %s of %s", name, scope)
}

// waitRun returns the ID of the first run of repository repo the API
// lists.
func waitRun(t *testing.T, base, repo string) string {
	t.Helper()
	var id string
	waitFor(t, 30*time.Second, "a run of "+repo, func() bool {
		var list struct {
			Runs []struct {
				ID       string `json:"id"`
				Pipeline string `json:"pipeline"`
			} `json:"runs"`
		}
		if getJSON(t, base+"/api/v1/runs", &list) != 200 {
			return false
		}
		for _, r := range list.Runs {
			if strings.HasPrefix(r.Pipeline, repo+":") {
				id = r.ID
				return true
			}
		}
		return false
	})
	return id
}

// followLog follows a job's log live from its start and sends its text
// (the data lines of the stream) once the stream ends.
func followLog(t *testing.T, base, run, job string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	url := fmt.Sprintf("%s/api/v1/runs/%s/jobs/%s/log/follow", base, run, job)
	go func() {
		var b strings.Builder
		defer func() { out <- b.String() }()
		// Until the job has a log to follow.
		var resp *http.Response
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			if resp, err = doAsAdmin(req); err != nil {
				return
			}
			if resp.StatusCode == http.StatusOK {
				break
			}
			resp.Body.Close()
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "event: end") {
				return
			}
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Data []byte `json:"data"`
			}
			if json.Unmarshal([]byte(d), &ev) == nil {
				b.Write(ev.Data)
			}
		}
	}()
	return out
}
