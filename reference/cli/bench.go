package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/cikit/cikit/reference/bench"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var list strings.Builder
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&list, "  %s\n      %s\n", s.Name, s.Measures)
	}
	fs := newFlags("bench", "bench [flags]\n\nRuns scenario benchmarks, each against a platform of its own, and prints one\ntable: scenario, N, throughput, p50, p95 and p99 latency in milliseconds, and\na note saying what was measured. By default the platforms are embedded\n(memory stores, in-process Redis and Kafka); -postgres and -redis move the\nstores to PostgreSQL (a schema per scenario, dropped afterwards) and Redis\n(a key prefix per scenario, deleted afterwards); Kafka stays in process.\nIt exits 1 when a scenario fails, such as a duplicate delivery creating a\nrun.\n\nScenarios:\n"+list.String(), stderr)
	short := fs.Bool("short", false, "small N: every scenario, well under a minute in all")
	pg := fs.String("postgres", "", "a PostgreSQL URL to keep the stores in (empty: memory stores)")
	redisURL := fs.String("redis", "", "a Redis URL, redis://host:port/db (empty: an in-process Redis)")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios to run (empty: all)")
	asJSON := fs.Bool("json", false, "print the results as JSON instead of a table")
	verbose := fs.Bool("v", false, "print the platforms' warnings and each scenario's progress on stderr")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg := bench.Config{Short: *short, PostgresURL: *pg, RedisURL: *redisURL}
	if *scenarios != "" {
		cfg.Scenarios = strings.Split(*scenarios, ",")
		for _, name := range cfg.Scenarios {
			if !slices.ContainsFunc(bench.Scenarios(), func(s bench.Scenario) bool { return s.Name == name }) {
				fmt.Fprintf(stderr, "cikit bench: unknown scenario %q (cikit bench -h lists them)\n", name)
				return ExitInvalid
			}
		}
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := bench.Run(ctx, cfg)
	if results == nil && err != nil {
		fmt.Fprintf(stderr, "cikit bench: %v\n", err)
		return ExitFailed
	}
	if *asJSON {
		if werr := bench.WriteJSON(stdout, results); werr != nil {
			fmt.Fprintf(stderr, "cikit bench: %v\n", werr)
			return ExitFailed
		}
	} else {
		fmt.Fprintln(stdout, bench.Services(cfg))
		if werr := bench.WriteTable(stdout, results); werr != nil {
			fmt.Fprintf(stderr, "cikit bench: %v\n", werr)
			return ExitFailed
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cikit bench: %v\n", err)
		if ctx.Err() != nil {
			return ExitInterrupted
		}
		return ExitFailed
	}
	return ExitOK
}
