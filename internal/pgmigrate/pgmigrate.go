// Package pgmigrate applies a component's embedded SQL migrations to
// PostgreSQL: numbered files (001_name.sql, 002_…) applied in order, each
// once, recorded per component in the table cikit_migrations.
//
// Several processes may migrate at once: a transaction-scoped advisory
// lock serialises them, and all of one call's files apply in one
// transaction, so a failure leaves the database as it was.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package pgmigrate

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Apply applies the migrations of fsys (its *.sql files) that component
// has not applied yet.
func Apply(ctx context.Context, pool *pgxpool.Pool, component string, fsys fs.FS) error {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return err
	}
	type migration struct {
		version int
		file    string
	}
	var todo []migration
	for _, f := range files {
		version, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
		if err != nil || version <= 0 {
			return fmt.Errorf("%s: migration %s is not numbered like 001_name.sql", component, f)
		}
		todo = append(todo, migration{version, f})
	}
	slices.SortFunc(todo, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(todo); i++ {
		if todo[i].version == todo[i-1].version {
			return fmt.Errorf("%s: migrations %s and %s have one number", component, todo[i-1].file, todo[i].file)
		}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cikit_migrations'))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS cikit_migrations (
			component text NOT NULL, version int NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (component, version))`); err != nil {
			return err
		}
		for _, m := range todo {
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cikit_migrations WHERE component = $1 AND version = $2)`,
				component, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			sql, err := fs.ReadFile(fsys, m.file)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("%s: migration %s: %w", component, m.file, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO cikit_migrations (component, version) VALUES ($1, $2)`, component, m.version); err != nil {
				return err
			}
		}
		return nil
	})
}
