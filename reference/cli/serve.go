package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "serve [flags]\n\nRuns the cikit platform: webhooks, scheduler, runner API, web UI and metrics.\nWith no flags it runs embedded: memory stores, in-process Kafka and Redis,\nlogs and local git repositories under -data-dir, and local sandboxed runners.\nSet postgres.url, kafka.brokers, redis.url and s3.bucket (flags, CIKIT_*\nvariables or a -config file) to run on real services. SIGINT or SIGTERM\nshuts it down gracefully.", stderr)
	loader := config.NewLoader(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, warnings, err := loader.Load(os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "cikit serve: %v\n", err)
		return ExitInvalid
	}
	log := platform.NewLogger(stderr, cfg.Log)
	for _, w := range warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := platform.New(ctx, cfg, platform.Options{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "cikit serve: %v\n", err)
		return ExitFailed
	}
	fmt.Fprint(stdout, p.Banner())
	// SIGHUP reloads the policy file; a broken one is logged with its
	// error positions and the policy in force stays.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = p.ReloadPolicy()
			}
		}
	}()
	if err := p.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "cikit serve: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("migrate", "migrate [flags]\n\nApplies the schema migrations of every store to the PostgreSQL database of\npostgres.url (a flag, $CIKIT_POSTGRES_URL or the -config file). It is\nidempotent and safe to run while servers run.", stderr)
	loader := config.NewLoader(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, _, err := loader.LoadChecked(os.Environ(), func(c *config.Config) error {
		if c.Postgres.URL == "" {
			return errors.New("postgres.url is required")
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "cikit migrate: %v\n", err)
		return ExitInvalid
	}
	pool, err := pgxpool.New(ctx, cfg.Postgres.URL)
	if err == nil {
		defer pool.Close()
		err = platform.Migrate(ctx, pool)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cikit migrate: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintln(stdout, "cikit migrate: the schema is up to date")
	return ExitOK
}
