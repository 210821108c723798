package lease

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/groupcommit"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations: numbered SQL files
// (001_name.sql …) to apply in order. PostgresStore.Migrate applies them.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresStore is a Store in the table job_leases of PostgreSQL. It must
// live in the PostgreSQL server (cluster) of the dag.PostgresStore it
// leases jobs of, usually in the same database. Given the job store's
// pool, a Manager writes the leases of claims and completions in the job
// store's transactions (see Config.Store). Otherwise inserts and deletes
// of leases commit without waiting for the write-ahead log to reach the
// disk: an inserted lease is made durable by the job's start, which
// commits after it in the same log and waits; a lost delete leaves a stale
// lease the Reaper removes.
type PostgresStore struct {
	pool *pgxpool.Pool
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store over pool, whose connections' search
// path holds job_leases. Call Migrate once before use.
func NewPostgresStore(pool *pgxpool.Pool) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("lease: NewPostgresStore needs a pool")
	}
	return &PostgresStore{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet. It is
// safe to run from several processes at once.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "lease", Migrations())
}

func (s *PostgresStore) LeaseInsert(ctx context.Context, l *Lease) error {
	if err := l.Attempt.validate(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, sqlInsert, l.RunID, l.JobID, l.Attempt.Attempt, l.Token, l.Runner, l.Expires)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("lease: %s: the job has a lease of this attempt or a later one: %w", l.Attempt, ErrNotClaimed)
	}
	return nil
}

func (s *PostgresStore) LeaseRenew(ctx context.Context, a Attempt, token string, expires time.Time) error {
	tag, err := s.pool.Exec(ctx, sqlRenew, a.RunID, a.JobID, a.Attempt, token, expires)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return &FencedError{Attempt: a, Reason: "the store holds no lease of this attempt and token"}
	}
	return nil
}

func (s *PostgresStore) LeaseGet(ctx context.Context, runID, jobID string) (*Lease, error) {
	l := &Lease{Attempt: Attempt{RunID: runID, JobID: jobID}}
	err := s.pool.QueryRow(ctx, sqlGet, runID, jobID).Scan(&l.Attempt.Attempt, &l.Token, &l.Runner, &l.Expires)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("lease: job %q of run %q has no lease: %w", jobID, runID, cikit.ErrNotFound)
		}
		return nil, interpretError(err)
	}
	l.Expires = l.Expires.UTC()
	return l, nil
}

func (s *PostgresStore) LeaseDelete(ctx context.Context, a Attempt, token string) error {
	_, err := s.pool.Exec(ctx, sqlDelete, a.RunID, a.JobID, a.Attempt, token)
	return interpretError(err)
}

func (s *PostgresStore) LeaseInsertMany(ctx context.Context, ls []*Lease) ([]error, error) {
	out := make([]error, len(ls))
	todo := make([]int, 0, len(ls))
	for i, l := range ls {
		if err := l.Attempt.validate(); err != nil {
			out[i] = err
			continue
		}
		todo = append(todo, i)
	}
	// One statement cannot write a row twice: rounds of at most one lease
	// per job, in order, decide each after the ones before it.
	for _, round := range groupcommit.Rounds(todo, func(i int) [2]string { return [2]string{ls[i].RunID, ls[i].JobID} }) {
		if err := s.insertRound(ctx, ls, round, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// insertRound inserts the leases of round, of distinct jobs, in one
// statement.
func (s *PostgresStore) insertRound(ctx context.Context, ls []*Lease, round []int, out []error) error {
	slices.SortFunc(round, func(a, b int) int {
		return cmp.Or(strings.Compare(ls[a].RunID, ls[b].RunID), strings.Compare(ls[a].JobID, ls[b].JobID))
	})
	runs, jobs, attempts := make([]string, len(round)), make([]string, len(round)), make([]int32, len(round))
	tokens, runners, expires := make([]string, len(round)), make([]string, len(round)), make([]time.Time, len(round))
	for n, i := range round {
		l := ls[i]
		runs[n], jobs[n], attempts[n], tokens[n], runners[n], expires[n] = l.RunID, l.JobID, int32(l.Attempt.Attempt), l.Token, l.Runner, l.Expires
	}
	b := &pgx.Batch{}
	b.Queue(sqlAsyncCommit)
	inserted := make(map[[2]string]bool, len(round))
	b.Queue(sqlInsertMany, runs, jobs, attempts, tokens, runners, expires).Query(func(rows pgx.Rows) error {
		var k [2]string
		_, err := pgx.ForEachRow(rows, []any{&k[0], &k[1]}, func() error {
			inserted[k] = true
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return interpretError(err)
	}
	for _, i := range round {
		if !inserted[[2]string{ls[i].RunID, ls[i].JobID}] {
			out[i] = fmt.Errorf("lease: %s: the job has a lease of this attempt or a later one: %w", ls[i].Attempt, ErrNotClaimed)
		}
	}
	return nil
}

func (s *PostgresStore) LeaseGetMany(ctx context.Context, keys []dag.JobKey) ([]*Lease, error) {
	out := make([]*Lease, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	runs, jobs := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		runs[i], jobs[i] = k.RunID, k.JobID
	}
	rows, err := s.pool.Query(ctx, sqlGetMany, runs, jobs)
	if err != nil {
		return nil, interpretError(err)
	}
	var i int
	var l Lease
	_, err = pgx.ForEachRow(rows, []any{&i, &l.Attempt.Attempt, &l.Token, &l.Runner, &l.Expires}, func() error {
		c := l
		c.RunID, c.JobID, c.Expires = keys[i-1].RunID, keys[i-1].JobID, l.Expires.UTC()
		out[i-1] = &c
		return nil
	})
	if err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

func (s *PostgresStore) LeaseDeleteMany(ctx context.Context, ls []*Lease) error {
	if len(ls) == 0 {
		return nil
	}
	runs, jobs, attempts, tokens := make([]string, len(ls)), make([]string, len(ls)), make([]int32, len(ls)), make([]string, len(ls))
	for i, l := range ls {
		runs[i], jobs[i], attempts[i], tokens[i] = l.RunID, l.JobID, int32(l.Attempt.Attempt), l.Token
	}
	b := &pgx.Batch{}
	b.Queue(sqlAsyncCommit)
	b.Queue(sqlDeleteMany, runs, jobs, attempts, tokens)
	return interpretError(s.pool.SendBatch(ctx, b).Close())
}

// queueStarts queues in b the leases of claims the job store accepts in
// b's transaction (see joint). Each replaces whatever lease its job has:
// the job starting at the lease's attempt is what decides.
func (s *PostgresStore) queueStarts(b *pgx.Batch, ls []*Lease) {
	runs, jobs, attempts := make([]string, len(ls)), make([]string, len(ls)), make([]int32, len(ls))
	tokens, runners, expires := make([]string, len(ls)), make([]string, len(ls)), make([]time.Time, len(ls))
	for i, l := range ls {
		runs[i], jobs[i], attempts[i], tokens[i], runners[i], expires[i] = l.RunID, l.JobID, int32(l.Attempt.Attempt), l.Token, l.Runner, l.Expires
	}
	b.Queue(sqlStartMany, runs, jobs, attempts, tokens, runners, expires)
}

// queueEnds queues in b the deletion of the leases of attempts the job
// store completes in b's transaction (see joint). With verify, the
// transaction fails with SQLSTATE errNotHeld unless each lease was there
// to delete: the completions were made before their leases were read.
func (s *PostgresStore) queueEnds(b *pgx.Batch, ls []*Lease, verify bool) {
	runs, jobs, attempts, tokens := make([]string, len(ls)), make([]string, len(ls)), make([]int32, len(ls)), make([]string, len(ls))
	for i, l := range ls {
		runs[i], jobs[i], attempts[i], tokens[i] = l.RunID, l.JobID, int32(l.Attempt.Attempt), l.Token
	}
	if verify {
		b.Queue(sqlEndHeld, runs, jobs, attempts, tokens, len(ls))
		return
	}
	b.Queue(sqlDeleteMany, runs, jobs, attempts, tokens)
}

func (s *PostgresStore) LeaseExpired(ctx context.Context, now time.Time, limit int) ([]*Lease, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("lease: LeaseExpired needs a positive limit, got %d", limit)
	}
	rows, err := s.pool.Query(ctx, sqlExpired, now, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Lease, error) {
		l := &Lease{}
		err := row.Scan(&l.RunID, &l.JobID, &l.Attempt.Attempt, &l.Token, &l.Runner, &l.Expires)
		l.Expires = l.Expires.UTC()
		return l, err
	})
	return out, interpretError(err)
}

// interpretError wraps PostgreSQL's errors with the package's name; the
// conditions callers branch on are decided by the queries themselves.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lease: postgres: %w", err)
}
