package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
)

// TestServeCommand: cikit serve with no services runs the embedded
// platform, prints where it serves, the webhook secret and how to trigger
// a run, answers /healthz and stops cleanly on its context's end.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "-listen", "127.0.0.1:0", "-data-dir", dir, "-runners.local", "0"}, w, io.Discard)
		w.Close()
	}()
	var banner strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		banner.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "trigger:") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	text := banner.String()
	url := regexp.MustCompile(`serving at (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(text)
	require.NotNil(t, url, text)
	require.Regexp(t, `webhooks:\s+\S+/webhooks/github \(secret \w{20,}\)`, text)
	require.Contains(t, text, filepath.Join(dir, "repos"))
	require.Contains(t, text, "curl -X POST")

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url[1] + "/healthz")
		if err == nil {
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			break
		}
		require.True(t, time.Now().Before(deadline), "no answer at %s: %v", url[1], err)
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code)
	case <-time.After(30 * time.Second):
		t.Fatal("cikit serve did not stop")
	}
}

// TestServeCommandBadConfig: configuration errors exit 2 and say what is
// wrong.
func TestServeCommandBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cikit.yml")
	require.NoError(t, os.WriteFile(file, []byte("listen: 127.0.0.1:0\npostgress: {url: x}\n"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-config", file}, "line 2"},
		{[]string{"serve", "-no-such-flag"}, "no-such-flag"},
		{[]string{"serve", "-vcs.provider", "svn"}, "vcs.provider"},
		{[]string{"migrate"}, "postgres.url is required"},
	} {
		var stderr strings.Builder
		code := Main(t.Context(), tc.args, io.Discard, &stderr)
		require.Equal(t, ExitInvalid, code, "%v: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, tc.args)
	}
}

// TestMigrateCommand: cikit migrate applies every store's schema, and
// again without error.
func TestMigrateCommand(t *testing.T) {
	db := pgtest.New(t)
	for range 2 {
		var stdout, stderr strings.Builder
		code := Main(t.Context(), []string{"migrate", "-postgres.url", db.URL}, &stdout, &stderr)
		require.Equal(t, ExitOK, code, stderr.String())
		require.Contains(t, stdout.String(), "up to date")
	}
	pool, err := pgxpool.New(t.Context(), db.URL)
	require.NoError(t, err)
	defer pool.Close()
	for _, table := range []string{"pipeline_runs", "jobs", "outbox", "webhook_deliveries", "job_leases", "log_segments"} {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_name = $1 AND table_schema = current_schema()`, table).Scan(&n))
		require.Equal(t, 1, n, "table %s", table)
	}
}
