package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Config says which scenarios Run measures, how long, and on which
// services. The zero Config runs every scenario in full on the embedded
// platform.
type Config struct {
	// Short runs every scenario with a small N, so that all of them
	// finish in well under a minute on two CPUs.
	Short bool
	// PostgresURL moves the stores of runs, jobs, leases and log
	// segments to PostgreSQL. Each scenario gets a schema of its own
	// (named bench_…), dropped when the scenario ends. Empty: memory
	// stores.
	PostgresURL string
	// RedisURL moves the derived state (dependency counters, leases) to
	// Redis, under a key prefix of its own per scenario (cikit-bench:…),
	// whose keys are deleted when the scenario ends. Empty: an
	// in-process Redis (miniredis).
	RedisURL string
	// Tag, when set, starts the names of the scenarios' schemas and key
	// prefixes (bench_<tag>_…, cikit-bench:<tag>_…), so that runs sharing
	// a PostgreSQL or Redis can each find what is theirs. It must be
	// letters, digits and underscores. Default: none.
	Tag string
	// Scenarios names the scenarios to run, in the order of Scenarios().
	// Empty: all.
	Scenarios []string
	// Logger receives the platforms' logs. Default: none.
	Logger *slog.Logger
	// Progress, when set, gets a line as each scenario starts and ends.
	Progress io.Writer
}

// Result is what one scenario measured.
type Result struct {
	// Scenario is the scenario's name.
	Scenario string `json:"scenario"`
	// N is how many operations were measured: runs, requests, cycles,
	// chunks, as Unit says.
	N int `json:"n"`
	// Throughput is operations per second, in Unit.
	Throughput float64 `json:"throughput"`
	// Unit is what Throughput counts, such as "runs/s" or "MB/s".
	Unit string `json:"unit"`
	// P50, P95 and P99 are percentiles of the scenario's latency; Note
	// says which latency.
	P50 time.Duration `json:"p50_ns"`
	P95 time.Duration `json:"p95_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Note says what was measured and anything the numbers need to be
	// read with.
	Note string `json:"note"`
	// Failed is why the scenario failed; empty when it passed.
	Failed string `json:"failed,omitempty"`
}

// Scenario describes one of the benchmarks Run knows.
type Scenario struct {
	// Name is what -scenarios takes.
	Name string
	// Measures says what the scenario measures and which code paths it
	// exercises.
	Measures string

	run func(ctx context.Context, b *bencher) (*Result, error)
}

// Scenarios returns the scenarios in the order Run runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "webhook-to-run", Measures: "signed GitHub push webhooks over HTTP, concurrently, until each delivery's run is visible in the run store: " +
			"HTTP, signature check, Kafka publish, ingest consumer, pipeline read from git, compile, CreateRuns", run: webhookToRun},
		{Name: "duplicate-storm", Measures: "one delivery sent many times at once and distinct deliveries each sent several times, shuffled: " +
			"the receiver's and the run store's deduplication; fails when a duplicate creates a run", run: duplicateStorm},
		{Name: "claim-complete", Measures: "runner protocol claim + complete cycles over HTTP with concurrent runners against the platform's fleet server: " +
			"token checks, dispatcher queue, leases, dag transitions", run: claimComplete},
		{Name: "webhook-to-first-step", Measures: "a signed push of a new commit until the first step of its job starts on a warm local runner, " +
			"read from the step's own `date +%s%N` in the job's log: the whole path from webhook to a process in the sandbox, " +
			"the checkout of the pushed commit included; interleaved pushes of the job with `checkout: false` are the baseline", run: webhookToFirstStep},
		{Name: "dag-critical-path", Measures: "a run of a fan-out/chain/fan-in DAG of `sleep 0.2` jobs on enough local runners: " +
			"the run's wall clock against its critical path (dag.Report), i.e. the scheduling overhead along the path", run: dagCriticalPath},
		{Name: "cache-hit", Measures: "pairs of runs of a job whose install step runs only when its cache misses: the first of a pair misses, " +
			"installs and saves the cache, the second restores it (an exact hit) and skips the install: cache key rendering, lookup, " +
			"presigned download and extraction, pack and upload; the time saved per job", run: cacheHit},
		{Name: "log-ingest", Measures: "runners PATCH 64 KiB log chunks through the runner log API while SSE followers tail the logs: " +
			"job-token and lease checks, the logs hub, the follow stream, finish into the file sink and the segment store", run: logIngest},
		{Name: "log-ingest-masked", Measures: "log-ingest with each runner masking its output with 100 secrets and their encodings before a chunk leaves it " +
			"(mask.Writer): what masking costs log ingest, against log-ingest's row of the same run", run: logIngestMasking},
	}
}

// Run runs the scenarios cfg selects, each on a platform of its own, one
// after the other. A scenario that fails (a duplicate created a run, a
// request was refused) is reported in its Result and the others still
// run; Run's error then says which failed. Run returns no results when
// it cannot start (an unknown scenario, git missing).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	all := Scenarios()
	selected := all
	if len(cfg.Scenarios) > 0 {
		selected = nil
		for _, s := range all {
			if slices.Contains(cfg.Scenarios, s.Name) {
				selected = append(selected, s)
			}
		}
		for _, name := range cfg.Scenarios {
			if !slices.ContainsFunc(all, func(s Scenario) bool { return s.Name == name }) {
				return nil, fmt.Errorf("bench: unknown scenario %q", name)
			}
		}
	}
	if strings.ContainsFunc(cfg.Tag, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) {
		return nil, fmt.Errorf("bench: Config.Tag %q may hold only letters, digits and underscores", cfg.Tag)
	}
	if err := checkGit(); err != nil {
		return nil, err
	}
	b := &bencher{cfg: cfg, log: cfg.Logger, sizes: fullSizes}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Short {
		b.sizes = shortSizes
	}
	var (
		results []Result
		failed  []error
	)
	for _, s := range selected {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		b.progress("%s: running\n", s.Name)
		start := time.Now()
		r, err := s.run(ctx, b)
		if r == nil {
			r = &Result{}
		}
		r.Scenario = s.Name
		if err != nil {
			r.Failed = err.Error()
			failed = append(failed, fmt.Errorf("%s: %w", s.Name, err))
		}
		b.progress("%s: done in %s\n", s.Name, time.Since(start).Round(time.Millisecond))
		results = append(results, *r)
	}
	if len(failed) > 0 {
		return results, fmt.Errorf("bench: %w", errors.Join(failed...))
	}
	return results, nil
}

// Services describes where cfg's scenarios keep their state, for the
// heading of a table.
func Services(cfg Config) string {
	var parts []string
	if cfg.PostgresURL != "" {
		parts = append(parts, "PostgreSQL (a schema per scenario)")
	} else {
		parts = append(parts, "memory stores")
	}
	if cfg.RedisURL != "" {
		parts = append(parts, "Redis (a key prefix per scenario)")
	} else {
		parts = append(parts, "in-process Redis (miniredis)")
	}
	parts = append(parts, "in-process Kafka (kfake)")
	mode := "embedded"
	if cfg.PostgresURL != "" || cfg.RedisURL != "" {
		mode = "services"
	}
	return mode + ": " + strings.Join(parts, ", ")
}

// WriteTable writes results as a table: scenario, N, throughput, p50,
// p95, p99 in milliseconds and the note, and a line for each failure.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tN\tthroughput\t\tp50 ms\tp95 ms\tp99 ms\tnote")
	for _, r := range results {
		status := r.Note
		if r.Failed != "" {
			status = "FAILED: " + r.Failed
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.N, formatRate(r.Throughput), r.Unit,
			ms(r.P50), ms(r.P95), ms(r.P99), status)
	}
	return tw.Flush()
}

// WriteJSON writes results as a JSON array, latencies in nanoseconds.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

func formatRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}

// percentiles returns the p50, p95 and p99 of samples (nearest rank),
// sorting them.
func percentiles(samples []time.Duration) (p50, p95, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(samples)))) - 1
		return samples[max(0, min(i, len(samples)-1))]
	}
	return at(0.50), at(0.95), at(0.99)
}

// result fills in a Result from n operations in elapsed and the latency
// samples.
func result(n int, elapsed time.Duration, unit string, samples []time.Duration, note string) *Result {
	r := &Result{N: n, Unit: unit, Note: note}
	if elapsed > 0 {
		r.Throughput = float64(n) / elapsed.Seconds()
	}
	r.P50, r.P95, r.P99 = percentiles(samples)
	return r
}

// bencher is one call of Run.
type bencher struct {
	cfg   Config
	log   *slog.Logger
	sizes sizes
}

func (b *bencher) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, format, args...)
	}
}

// sizes are the scenarios' N.
type sizes struct {
	webhookRuns, webhookConcurrency    int
	stormCopies, stormDistinct, stormK int
	cycles, runners                    int
	firstSteps                         int
	dagRuns                            int
	cacheRounds                        int
	logStreams, logChunks, logFollows  int
}

var (
	shortSizes = sizes{
		webhookRuns: 100, webhookConcurrency: 4,
		stormCopies: 50, stormDistinct: 20, stormK: 5,
		cycles: 300, runners: 8,
		firstSteps:  10,
		dagRuns:     2,
		cacheRounds: 2,
		logStreams:  4, logChunks: 16, logFollows: 4,
	}
	fullSizes = sizes{
		webhookRuns: 2000, webhookConcurrency: 8,
		stormCopies: 500, stormDistinct: 200, stormK: 10,
		cycles: 5000, runners: 32,
		firstSteps:  200,
		dagRuns:     20,
		cacheRounds: 10,
		logStreams:  16, logChunks: 128, logFollows: 8,
	}
)
