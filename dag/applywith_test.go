package dag_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// TestJobApplyWith: the caller's statements commit with the events a
// transaction applies, and only with them, on the fast path (starts and a
// completion some job needs), the locked path (the completion that ends
// the run) and a concurrency group's queue; a statement that fails rolls
// the events back.
func TestJobApplyWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgresStore(t, nil, nil)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE applied (run_id text, job_id text, kind int, attempt int)`)
	require.NoError(t, err)
	var calls [][]string
	record := func(b *pgx.Batch, applied []*dag.JobEvent) {
		var ids []string
		for _, e := range applied {
			ids = append(ids, e.JobID)
			b.Queue(`INSERT INTO applied VALUES ($1, $2, $3, $4)`, e.RunID, e.JobID, int(e.Kind), e.Attempt)
		}
		calls = append(calls, ids)
	}
	rows := func() []string {
		r, err := s.Pool().Query(ctx, `SELECT job_id || ':' || kind FROM applied ORDER BY job_id, kind`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(r, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	step := []cikit.Step{{Run: "true"}}
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "a", Steps: step}, {ID: "b", Steps: step}, {ID: "c", Needs: []string{"a"}, Steps: step},
		{ID: "g", Needs: []string{"c"}, Steps: step, Concurrency: &cikit.Concurrency{Group: "deploy"}},
	}})
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := s.JobQueue(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: id, Attempt: 1})
		require.NoError(t, err)
	}

	// Fast path: two starts apply; the start of a job still PENDING is
	// refused and left out.
	res, err := s.JobApplyWith(ctx, []*dag.JobEvent{
		{Kind: dag.EventStart, RunID: run.ID, JobID: "b", Attempt: 1, Runner: "r"},
		{Kind: dag.EventStart, RunID: run.ID, JobID: "c", Attempt: 1, Runner: "r"},
		{Kind: dag.EventStart, RunID: run.ID, JobID: "a", Attempt: 1, Runner: "r"},
	}, record)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, cikit.ErrInvalidTransition)
	require.NoError(t, res[2].Err)
	require.Equal(t, [][]string{{"b", "a"}}, calls, "with gets the applied events in the batch's order, in one call")
	require.Equal(t, []string{"a:2", "b:2"}, rows())

	// A statement that fails fails the transaction: the completion is
	// not applied either.
	failing := func(b *pgx.Batch, applied []*dag.JobEvent) { b.Queue(`INSERT INTO no_such_table VALUES (1)`) }
	_, err = s.JobApplyWith(ctx, []*dag.JobEvent{{Kind: dag.EventComplete, RunID: run.ID, JobID: "a", Attempt: 1, Outcome: cikit.JobSucceeded}}, failing)
	require.ErrorContains(t, err, "no_such_table")
	j, err := s.JobGet(ctx, run.ID, "a")
	require.NoError(t, err)
	require.Equal(t, cikit.JobRunning, j.State, "rolled back with the failed statement")

	// Fast completion of a job c needs; then c through the group's queue.
	calls = nil
	res, err = s.JobApplyWith(ctx, []*dag.JobEvent{{Kind: dag.EventComplete, RunID: run.ID, JobID: "a", Attempt: 1, Outcome: cikit.JobSucceeded}}, record)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	for _, e := range []*dag.JobEvent{
		{Kind: dag.EventQueue, RunID: run.ID, JobID: "c", Attempt: 1},
		{Kind: dag.EventStart, RunID: run.ID, JobID: "c", Attempt: 1, Runner: "r"},
		{Kind: dag.EventComplete, RunID: run.ID, JobID: "c", Attempt: 1, Outcome: cikit.JobSucceeded},
		{Kind: dag.EventQueue, RunID: run.ID, JobID: "g", Attempt: 1},
		{Kind: dag.EventStart, RunID: run.ID, JobID: "g", Attempt: 1, Runner: "r"},
		{Kind: dag.EventComplete, RunID: run.ID, JobID: "g", Attempt: 1, Outcome: cikit.JobSucceeded},
		// b's completion ends the run: the locked path's.
		{Kind: dag.EventComplete, RunID: run.ID, JobID: "b", Attempt: 1, Outcome: cikit.JobSucceeded},
	} {
		res, err := s.JobApplyWith(ctx, []*dag.JobEvent{e}, record)
		require.NoError(t, err)
		require.NoError(t, res[0].Err, "%s of %s", e.Kind, e.JobID)
	}
	require.Equal(t, [][]string{{"a"}, {"c"}, {"c"}, {"c"}, {"g"}, {"g"}, {"g"}, {"b"}}, calls)
	require.Equal(t, []string{"a:2", "a:3", "b:2", "b:3", "c:1", "c:2", "c:3", "g:1", "g:2", "g:3"}, rows())
	r, err := s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunSucceeded, r.State)
}
