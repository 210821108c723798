package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/reference/bench"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestBenchShort runs every scenario in short mode on the embedded
// platform and checks the table has each of them, with sane numbers.
func TestBenchShort(t *testing.T) {
	needGit(t)
	results := runShort(t, bench.Config{Short: true})
	requireSane(t, results)
}

// TestBenchShortServices is TestBenchShort on PostgreSQL and Redis: each
// scenario's schema and keys are gone afterwards.
func TestBenchShortServices(t *testing.T) {
	needGit(t)
	db := pgtest.New(t)
	ns := redistest.New(t)
	opts := ns.Client.Options()
	redisURL := "redis://" + opts.Addr + "/" + strconv.Itoa(opts.DB)
	// Other test runs may share the servers: this one finds its own
	// schemas and keys by its tag.
	tag := "t" + strconv.FormatInt(time.Now().UnixNano(), 36)
	results := runShort(t, bench.Config{Short: true, PostgresURL: db.URL, RedisURL: redisURL, Tag: tag})
	requireSane(t, results)

	var schemas int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'bench\_' || $1 || '\_%'`, tag).Scan(&schemas))
	require.Zero(t, schemas, "the scenarios' schemas were not dropped")
	keys, err := ns.Client.Keys(t.Context(), "cikit-bench:"+tag+"_*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "the scenarios' Redis keys were not deleted")
}

func runShort(t *testing.T, cfg bench.Config) []bench.Result {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg.Progress = &progress
	results, err := bench.Run(ctx, cfg)
	var table bytes.Buffer
	require.NoError(t, bench.WriteTable(&table, results))
	t.Logf("%s\n%s", bench.Services(cfg), table.String())
	require.NoError(t, err, "progress:\n%s", progress.String())
	for _, s := range bench.Scenarios() {
		require.Contains(t, table.String(), s.Name)
	}
	return results
}

// requireSane checks every scenario ran, in order, passed and measured
// something with ordered percentiles.
func requireSane(t *testing.T, results []bench.Result) {
	t.Helper()
	var names []string
	for _, s := range bench.Scenarios() {
		names = append(names, s.Name)
	}
	var got []string
	for _, r := range results {
		got = append(got, r.Scenario)
		require.Empty(t, r.Failed, r.Scenario)
		require.Positive(t, r.N, r.Scenario)
		require.Positive(t, r.Throughput, r.Scenario)
		require.NotEmpty(t, r.Unit, r.Scenario)
		require.NotEmpty(t, r.Note, r.Scenario)
		require.LessOrEqual(t, r.P50, r.P95, r.Scenario)
		require.LessOrEqual(t, r.P95, r.P99, r.Scenario)
	}
	require.Equal(t, names, got)
}

// TestUnknownScenario: a name Run does not know is an error, before
// anything runs.
func TestUnknownScenario(t *testing.T) {
	results, err := bench.Run(t.Context(), bench.Config{Short: true, Scenarios: []string{"webhook-to-run", "nope"}})
	require.ErrorContains(t, err, `unknown scenario "nope"`)
	require.Empty(t, results)
}

// TestWriteTable: a row per result, milliseconds with one decimal, and a
// failure in place of the note.
func TestWriteTable(t *testing.T) {
	results := []bench.Result{
		{Scenario: "webhook-to-run", N: 100, Throughput: 812.4, Unit: "runs/s", P50: 4200 * time.Microsecond, P95: 9 * time.Millisecond, P99: 12500 * time.Microsecond, Note: "a note"},
		{Scenario: "duplicate-storm", N: 150, Throughput: 2.345, Unit: "deliveries/s", Failed: "duplicates created runs"},
	}
	var b bytes.Buffer
	require.NoError(t, bench.WriteTable(&b, results))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^\s*scenario\s+N\s+throughput\s+p50 ms\s+p95 ms\s+p99 ms\s+note$`, strings.TrimRight(lines[0], " "))
	require.Regexp(t, `webhook-to-run\s+100\s+812\s+runs/s\s+4\.2\s+9\.0\s+12\.5\s+a note`, lines[1])
	require.Regexp(t, `duplicate-storm\s+150\s+2\.35\s+deliveries/s\s+0\.0\s+0\.0\s+0\.0\s+FAILED: duplicates created runs`, lines[2])

	b.Reset()
	require.NoError(t, bench.WriteJSON(&b, results[:1]))
	var back []bench.Result
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	require.Equal(t, results[:1], back)
}

func needGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
}

// TestBenchTagChecked: a tag that could not name a schema is refused
// before anything starts.
func TestBenchTagChecked(t *testing.T) {
	_, err := bench.Run(t.Context(), bench.Config{Short: true, Tag: "a-b; DROP"})
	require.ErrorContains(t, err, "may hold only letters, digits and underscores")
}
