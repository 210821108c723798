package dagtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// runSet is a store with a clock, for tests that create several runs.
type runSet struct {
	t     *testing.T
	store dag.Store
}

func newRunSet(t *testing.T, factory Factory) *runSet {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &runSet{t: t, store: factory(t, c.now)}
}

// create creates a run of specs with the given parameters.
func (rs *runSet) create(p dag.RunCreateParams, specs []*cikit.JobSpec) *bundle {
	rs.t.Helper()
	p.Jobs = specs
	run, err := rs.store.RunCreate(context.Background(), &p)
	require.NoError(rs.t, err)
	return &bundle{store: rs.store, run: run}
}

// jobs returns the run's jobs by ID.
func (b *bundle) jobs(t *testing.T) map[string]*dag.Job {
	t.Helper()
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	m := make(map[string]*dag.Job, len(jobs))
	for _, j := range jobs {
		m[j.ID()] = j
	}
	return m
}

// runState returns the run's current state.
func (b *bundle) runState(t *testing.T) cikit.RunState {
	t.Helper()
	run, err := b.store.RunGet(context.Background(), b.run.ID)
	require.NoError(t, err)
	return run.State
}

// untouched asserts that the run's jobs are in the states of a new run
// of pipeline().
func (b *bundle) untouched(t *testing.T, msg string) {
	t.Helper()
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobPending, cikit.JobPending, cikit.JobPending}, states(jobs), msg)
}

func (b *bundle) tp(job string) *dag.JobTransitionParams {
	return &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: 1}
}

func (b *bundle) queueOne(t *testing.T, job string) *dag.TransitionResult {
	t.Helper()
	res, err := b.store.JobQueue(context.Background(), b.tp(job))
	require.NoError(t, err)
	return res
}

func (b *bundle) startOne(t *testing.T, job string) {
	t.Helper()
	_, err := b.store.JobStart(context.Background(), b.tp(job))
	require.NoError(t, err)
}

func (b *bundle) completeOne(t *testing.T, job string, outcome cikit.JobState) *dag.TransitionResult {
	t.Helper()
	res, err := b.store.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: 1, Outcome: outcome})
	require.NoError(t, err)
	return res
}

// busy asserts that queueing job is refused because of holder, and
// returns the refusal.
func (b *bundle) busy(t *testing.T, job string, holder *bundle, holderJob string, holderState cikit.JobState) *dag.GroupBusyError {
	t.Helper()
	_, err := b.store.JobQueue(context.Background(), b.tp(job))
	require.ErrorIs(t, err, dag.ErrGroupBusy)
	require.ErrorIs(t, err, cikit.ErrConflict)
	var busy *dag.GroupBusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, b.run.ID, busy.RunID)
	require.Equal(t, job, busy.JobID)
	require.Equal(t, []string{holder.run.ID, holderJob, string(holderState)},
		[]string{busy.HolderRunID, busy.HolderJobID, string(busy.HolderState)}, "the job in the way")
	require.ErrorContains(t, err, holder.run.ID)
	require.Equal(t, cikit.JobReady, b.jobs(t)[job].State, "a refused job stays READY")
	return busy
}

// grouped is one job in concurrency group "prod".
func grouped(id string, cancelInProgress bool) *cikit.JobSpec {
	return &cikit.JobSpec{ID: id, Steps: []cikit.Step{{Run: "true"}},
		Concurrency: &cikit.Concurrency{Group: "prod", CancelInProgress: cancelInProgress}}
}

// deploy is a pipeline of one job, deploy, in group "prod".
func deploy(cancelInProgress bool) []*cikit.JobSpec {
	return []*cikit.JobSpec{grouped("deploy", cancelInProgress)}
}

// mainBranch is the parameters of a run on main, a branch superseding
// leaves alone, so that runs of one pipeline stay to share groups.
var mainBranch = dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", DefaultBranch: true}

var prod = dag.GroupKey{Group: "prod", Branch: "main"}

// next asserts whose turn it is in a group; want nil for nobody's.
func next(t *testing.T, s dag.Store, key dag.GroupKey, want *bundle, job string) {
	t.Helper()
	got, err := s.GroupNext(context.Background(), key)
	require.NoError(t, err)
	if want == nil {
		require.Nil(t, got, "nobody's turn")
		return
	}
	require.NotNil(t, got, "the turn of %s", job)
	require.Equal(t, []string{want.run.ID, job}, []string{got.RunID, got.ID()})
	require.Equal(t, cikit.JobReady, got.State)
}

// exerciseGroups is the part of the suite about superseded runs and
// concurrency groups.
func exerciseGroups(t *testing.T, factory Factory) {
	feature := dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "feature/login"}

	t.Run("SupersedeOnFeatureBranch", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rs := newRunSet(t, factory)
		finished := rs.create(feature, pipeline())
		finished.advance(t, "build", cikit.JobFailed)
		older := rs.create(feature, pipeline())
		require.Equal(t, []string{"acme/api:.cikit.yml", "feature/login"}, []string{older.run.Pipeline, older.run.Branch})
		older.queueOne(t, "build")
		older.startOne(t, "build")

		newer := rs.create(feature, pipeline())
		newer.untouched(t, "the new run is not touched")
		require.Equal(t, cikit.RunFailed, finished.runState(t), "a finished run stays as it ended")
		reason := "superseded by run " + newer.run.ID
		jobs := older.jobs(t)
		require.Equal(t, cikit.JobCancelRequested, jobs["build"].State, "a running job is told to stop")
		for _, id := range []string{"build", "unit", "lint", "integration"} {
			require.Equal(t, reason, jobs[id].Reason, id)
		}
		require.Equal(t, cikit.JobCancelled, jobs["unit"].State)
		require.Equal(t, cikit.RunRunning, older.runState(t), "until its executor reports")

		evs, err := rs.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		var got []string
		for _, e := range evs {
			if e.RunID == older.run.ID && e.JobID == "build" && e.Type == dag.EventJobCancelRequest {
				got = append(got, e.Reason)
			}
		}
		require.Equal(t, []string{reason}, got, "its event is recorded with the reason")

		stored, err := rs.store.RunGet(ctx, newer.run.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"acme/api:.cikit.yml", "feature/login"}, []string{stored.Pipeline, stored.Branch})

		// A third run supersedes the second; the first, still being
		// cancelled, keeps its reason.
		third := rs.create(feature, pipeline())
		require.Equal(t, cikit.RunCancelled, newer.runState(t))
		require.Equal(t, "superseded by run "+third.run.ID, newer.jobs(t)["build"].Reason)
		require.Equal(t, reason, older.jobs(t)["build"].Reason)

		res := older.completeOne(t, "build", cikit.JobCancelled)
		require.Equal(t, cikit.RunCancelled, res.Run.State)
		third.untouched(t, "the newest run runs")
	})

	t.Run("SupersedeDefaultBranch", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		onMain := dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", DefaultBranch: true}
		first := rs.create(onMain, pipeline())
		rs.create(onMain, pipeline())
		first.untouched(t, "runs of the default branch are not superseded by default")

		onMain.Supersede = dag.SupersedeAlways
		third := rs.create(onMain, pipeline())
		require.Equal(t, cikit.RunCancelled, first.runState(t), "unless the policy opts in")
		third.untouched(t, "the newest run runs")
	})

	t.Run("SupersedeNever", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		never := feature
		never.Supersede = dag.SupersedeNever
		first := rs.create(feature, pipeline())
		second := rs.create(never, pipeline())
		first.untouched(t, "a run that opts out supersedes nothing")
		rs.create(feature, pipeline())
		require.Equal(t, cikit.RunCancelled, first.runState(t))
		require.Equal(t, cikit.RunCancelled, second.runState(t), "the policy is the new run's")
	})

	t.Run("SupersedeIdempotent", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		withKey := func(key string) dag.RunCreateParams { p := feature; p.IdempotencyKey = key; return p }
		first := rs.create(withKey("delivery-1"), pipeline())
		again := rs.create(withKey("delivery-1"), pipeline())
		require.Equal(t, first.run.ID, again.run.ID)
		first.untouched(t, "a run does not supersede itself when its creation is repeated")

		second := rs.create(withKey("delivery-2"), pipeline())
		require.Equal(t, cikit.RunCancelled, first.runState(t))
		again = rs.create(withKey("delivery-1"), pipeline())
		require.Equal(t, first.run.ID, again.run.ID)
		second.untouched(t, "repeating an older creation cancels nothing")
		require.Equal(t, cikit.RunPending, second.runState(t))
	})

	t.Run("SupersedeIndependentLines", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rs := newRunSet(t, factory)
		first := rs.create(feature, pipeline())
		otherPipeline := feature
		otherPipeline.Pipeline = "acme/api:.github/workflows/release.yml"
		otherBranch := feature
		otherBranch.Branch = "feature/logout"
		for _, p := range []dag.RunCreateParams{otherPipeline, otherBranch, {Pipeline: feature.Pipeline}, {Branch: feature.Branch}, {}} {
			rs.create(p, pipeline())
		}
		first.untouched(t, "other pipelines and branches, and runs without both, supersede nothing")
		bare := rs.create(dag.RunCreateParams{}, pipeline())
		rs.create(dag.RunCreateParams{}, pipeline())
		bare.untouched(t, "runs without a pipeline and branch are never superseded")

		_, err := rs.store.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), Pipeline: "p", Branch: "b", Supersede: dag.SupersedePolicy(42)})
		require.ErrorContains(t, err, "unknown supersede policy")
		first.untouched(t, "a refused creation supersedes nothing")
	})

	t.Run("GroupWaits", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rs := newRunSet(t, factory)
		first := rs.create(mainBranch, deploy(false))
		second := rs.create(mainBranch, deploy(false))
		next(t, rs.store, prod, first, "deploy")
		first.queueOne(t, "deploy")
		next(t, rs.store, prod, nil, "")
		second.busy(t, "deploy", first, "deploy", cikit.JobQueued)
		first.startOne(t, "deploy")
		second.busy(t, "deploy", first, "deploy", cikit.JobRunning)

		_, err := rs.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: second.run.ID, JobID: "deploy", Attempt: 2})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a stale attempt is refused as ever")
		_, err = rs.store.JobQueue(ctx, first.tp("deploy"))
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a running job cannot be queued")
		require.NotErrorIs(t, err, dag.ErrGroupBusy)

		res := first.completeOne(t, "deploy", cikit.JobSucceeded)
		require.Equal(t, []dag.GroupKey{prod}, res.Freed())
		next(t, rs.store, prod, second, "deploy")
		res = second.queueOne(t, "deploy")
		require.Equal(t, cikit.JobQueued, res.Changed[0].State)
		require.Len(t, res.Changed, 1)
		require.Empty(t, res.Freed())
	})

	t.Run("GroupFIFO", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		holder := rs.create(mainBranch, deploy(false))
		holder.queueOne(t, "deploy")
		// Within a run too: two jobs of one group wait their turns in
		// plan order.
		waiters := []*bundle{
			rs.create(mainBranch, deploy(false)),
			rs.create(mainBranch, []*cikit.JobSpec{grouped("deploy-eu", false), grouped("deploy-us", false)}),
		}
		turns := []struct {
			b   *bundle
			job string
		}{{holder, "deploy"}, {waiters[0], "deploy"}, {waiters[1], "deploy-eu"}, {waiters[1], "deploy-us"}}
		for i := 1; i < len(turns); i++ {
			prev := turns[i-1]
			for _, later := range turns[i+1:] {
				later.b.busy(t, later.job, prev.b, prev.job, cikit.JobQueued)
			}
			prev.b.startOne(t, prev.job)
			res := prev.b.completeOne(t, prev.job, cikit.JobSucceeded)
			require.Equal(t, []dag.GroupKey{prod}, res.Freed())
			next(t, rs.store, prod, turns[i].b, turns[i].job)
			for _, later := range turns[i+1:] {
				later.b.busy(t, later.job, turns[i].b, turns[i].job, cikit.JobReady)
			}
			turns[i].b.queueOne(t, turns[i].job)
		}
	})

	t.Run("GroupCancelInProgress", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		holder := rs.create(mainBranch, deploy(false))
		holder.queueOne(t, "deploy")
		holder.startOne(t, "deploy")
		waiter := rs.create(mainBranch, deploy(false))
		newest := rs.create(mainBranch, deploy(true))

		busy := newest.busy(t, "deploy", holder, "deploy", cikit.JobCancelRequested)
		reason := fmt.Sprintf("cancelled by %s/deploy in concurrency group prod", newest.run.ID)
		cancelled := map[string]cikit.JobState{}
		for _, j := range busy.Cancelled {
			cancelled[j.RunID] = j.State
			require.Equal(t, reason, j.Reason)
		}
		require.Equal(t, map[string]cikit.JobState{holder.run.ID: cikit.JobCancelRequested, waiter.run.ID: cikit.JobCancelled}, cancelled,
			"the running holder is told to stop, the older waiter cancelled")
		require.Equal(t, cikit.JobCancelRequested, holder.jobs(t)["deploy"].State)
		require.Equal(t, reason, holder.jobs(t)["deploy"].Reason)
		require.Equal(t, cikit.RunCancelled, waiter.runState(t), "the waiter's run is cancelled with it")

		busy = newest.busy(t, "deploy", holder, "deploy", cikit.JobCancelRequested)
		require.Empty(t, busy.Cancelled, "a job being cancelled is not cancelled again")
		next(t, rs.store, prod, nil, "")

		res := holder.completeOne(t, "deploy", cikit.JobCancelled)
		require.Equal(t, cikit.RunCancelled, res.Run.State)
		require.Equal(t, []dag.GroupKey{prod}, res.Freed())
		next(t, rs.store, prod, newest, "deploy")
		newest.queueOne(t, "deploy")
	})

	t.Run("GroupCancelInProgressQueued", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		step := []cikit.Step{{Run: "true"}}
		holder := rs.create(mainBranch, []*cikit.JobSpec{grouped("deploy", false), {ID: "smoke", Needs: []string{"deploy"}, Steps: step}})
		holder.queueOne(t, "deploy")
		newest := rs.create(mainBranch, deploy(true))

		res := newest.queueOne(t, "deploy")
		var got []string
		for _, j := range res.Changed {
			got = append(got, fmt.Sprintf("%s/%s %s", j.RunID, j.ID(), j.State))
		}
		require.Equal(t, []string{newest.run.ID + "/deploy queued", holder.run.ID + "/deploy cancelled", holder.run.ID + "/smoke cancelled"}, got,
			"a holder that had not started ends at once and the newer job takes its place; the result lists the job first, then the jobs it cancelled and their consequences")
		require.Equal(t, newest.run.ID, res.Run.ID)
		jobs := holder.jobs(t)
		require.Equal(t, cikit.JobCancelled, jobs["deploy"].State)
		require.Equal(t, cikit.JobCancelled, jobs["smoke"].State)
		require.Equal(t, "needs deploy, which was cancelled", jobs["smoke"].Reason)
		require.Equal(t, cikit.RunCancelled, holder.runState(t))
	})

	t.Run("GroupBranches", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		onMain := rs.create(mainBranch, deploy(false))
		release := mainBranch
		release.Branch, release.DefaultBranch = "release/1.x", false
		onRelease := rs.create(release, deploy(true))
		onMain.queueOne(t, "deploy")
		onRelease.queueOne(t, "deploy")
		require.Equal(t, cikit.JobQueued, onMain.jobs(t)["deploy"].State, "a group on another branch is another group")
		next(t, rs.store, prod, nil, "")
		next(t, rs.store, dag.GroupKey{Group: "prod", Branch: "release/1.x"}, nil, "")
	})

	t.Run("GroupRace", func(t *testing.T) {
		t.Parallel()
		// The first failure, or a minute, stops every goroutine: one that
		// fails holding the group would keep the others waiting.
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, errors.New("the group's jobs did not all run within a minute"))
		defer cancel()
		ctx, fail := context.WithCancelCause(ctx)
		defer fail(nil)
		s := factory(t, time.Now)
		const n = 12
		runs := make([]*dag.Run, n)
		for i := range runs {
			run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: deploy(false), Branch: "main"})
			require.NoError(t, err)
			runs[i] = run
		}
		active := func() (int, error) {
			count := 0
			for _, r := range runs {
				jobs, err := s.JobList(ctx, r.ID)
				if err != nil {
					return 0, err
				}
				if jobs[0].State.Active() {
					count++
				}
			}
			return count, nil
		}
		var holders atomic.Int32
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() {
				err := func() error {
					p := &dag.JobTransitionParams{RunID: r.ID, JobID: "deploy", Attempt: 1}
					for {
						_, err := s.JobQueue(ctx, p)
						if !errors.Is(err, dag.ErrGroupBusy) {
							if err != nil {
								return err
							}
							break
						}
						if ctx.Err() != nil {
							return context.Cause(ctx)
						}
						time.Sleep(time.Millisecond)
					}
					if h := holders.Add(1); h != 1 {
						return fmt.Errorf("%d jobs of the group queued at once", h)
					}
					if c, err := active(); err != nil || c != 1 {
						return fmt.Errorf("%d jobs of the group active while run %s holds it (%v)", c, r.ID, err)
					}
					if _, err := s.JobStart(ctx, p); err != nil {
						return err
					}
					holders.Add(-1) // before the job ends and frees the group
					_, err := s.JobComplete(ctx, &dag.JobCompleteParams{RunID: r.ID, JobID: "deploy", Attempt: 1, Outcome: cikit.JobSucceeded})
					return err
				}()
				if err != nil {
					fail(err)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for _, r := range runs {
			run, err := s.RunGet(ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, cikit.RunSucceeded, run.State)
		}
	})
}
