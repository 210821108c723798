package dag_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// TestPostgresExpandAcrossStores expands a placeholder through one store
// while another, on the same database, holds the run's graph from before
// the expansion: the second finds the variants (its cached graph lacks
// them) on every read and write, the locked path's included, and the run
// ends the same.
func TestPostgresExpandAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.New(t)
	ns := redistest.New(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func() *dag.PostgresStore {
		s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Redis: ns.Client, KeyPrefix: ns.Prefix, Now: clock,
			Expander: dagtest.ListExpander})
		require.NoError(t, err)
		return s
	}
	s1, s2 := open(), open()
	require.NoError(t, s1.Migrate(ctx))
	ph := dagtest.Placeholder("m", dagtest.ListExpand{List: []string{"a", "b"}}, "setup")
	ph.Timeout = time.Minute
	run, err := s1.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "setup"}, ph, {ID: "after", Needs: []string{"m"}}}})
	require.NoError(t, err)
	s4 := open()
	for _, s := range []*dag.PostgresStore{s2, s4} {
		jobs, err := s.JobList(ctx, run.ID) // each caches the graph of 3 jobs
		require.NoError(t, err)
		require.Len(t, jobs, 3)
	}

	p := &dag.JobTransitionParams{RunID: run.ID, JobID: "setup", Attempt: 1}
	_, err = s1.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = s1.JobStart(ctx, p)
	require.NoError(t, err)
	_, err = s1.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "setup", Attempt: 1, Outcome: cikit.JobSucceeded})
	require.NoError(t, err)

	jobs, err := s2.JobList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, jobs, 5, "JobList reads the grown graph")
	v, err := s2.JobGet(ctx, run.ID, "m (a)")
	require.NoError(t, err)
	require.Equal(t, cikit.JobReady, v.State)
	many, err := s2.JobGetMany(ctx, []dag.JobKey{{RunID: run.ID, JobID: "m (b)"}})
	require.NoError(t, err)
	require.NotNil(t, many[0])

	s3 := open()
	_, err = s3.JobList(ctx, run.ID) // s3 caches the grown graph; s2 keeps it too
	require.NoError(t, err)
	for _, id := range []string{"m (a)", "m (b)"} {
		p := &dag.JobTransitionParams{RunID: run.ID, JobID: id, Attempt: 1}
		_, err = s2.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = s2.JobStart(ctx, p)
		require.NoError(t, err)
	}
	res, err := s2.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "m (a)", Attempt: 1, Outcome: cikit.JobSucceeded})
	require.NoError(t, err)
	require.Len(t, res.Changed, 1)

	// A store whose graph predates the expansion expires a variant on
	// the locked path: under the run's lock it finds the run grown.
	now = now.Add(time.Hour)
	expired, err := s4.JobsExpire(ctx, &dag.ExpireParams{Now: now})
	require.NoError(t, err)
	require.Len(t, expired, 1)
	require.Equal(t, "m (b)", expired[0].Changed[0].ID())
	got := map[string]cikit.JobState{}
	for _, j := range expired[0].Changed {
		got[j.ID()] = j.State
	}
	require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobFailed, "m": cikit.JobFailed, "after": cikit.JobSkipped}, got)
	require.Equal(t, cikit.RunFailed, expired[0].Run.State)

	_, err = s1.Repair(ctx, run.ID)
	require.NoError(t, err)
	counters, err := s1.DependencyCounters(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"m": 1, "m (a)": 0, "m (b)": 0, "after": 1}, counters,
		"m waits for no need but its failed variant, after for m")
}
