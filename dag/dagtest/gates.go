package dagtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// gatedPipeline is build -> deploy (gated: alice or bob approve a
// deployment to production) -> smoke. The deploy blocks the run unless
// allowFailure.
func gatedPipeline(allowFailure bool) []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Name: "build", Steps: step},
		{ID: "deploy", Name: "deploy", Needs: []string{"build"}, AllowFailure: allowFailure, Steps: step,
			Gate: &cikit.Gate{Reasons: []string{"deployment to production"}, Reviewers: []string{"alice", "bob"}}},
		{ID: "smoke", Name: "smoke", Needs: []string{"deploy"}, Steps: step},
	}
}

// reject applies EventReject to attempt of a job, with reason.
func (b *bundle) reject(t *testing.T, job string, attempt int, reason string) (*dag.TransitionResult, error) {
	t.Helper()
	res, err := b.store.JobApply(context.Background(), []*dag.JobEvent{{Kind: dag.EventReject, RunID: b.run.ID, JobID: job, Attempt: attempt, Reason: reason}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0].TransitionResult, res[0].Err
}

// lastEvent returns the newest outbox event of the run's job (the run's
// own for job ""), nil when there is none.
func (b *bundle) lastEvent(t *testing.T, job string) *dag.OutboxEvent {
	t.Helper()
	evs, err := b.store.OutboxPending(context.Background(), 10000)
	require.NoError(t, err)
	var last *dag.OutboxEvent
	for _, e := range evs {
		if e.RunID == b.run.ID && e.JobID == job {
			last = e
		}
	}
	return last
}

// exerciseGates is the part of Exercise about approval gates
// (cikit.JobSpec.Gate) and jobs the policy denied (cikit.Admission).
func exerciseGates(t *testing.T, factory Factory) {
	t.Run("GatedJobWaitsForApproval", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, gatedPipeline(false))
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "deploy": cikit.JobManual}, changed(res),
			"a gated job whose needs are satisfied waits MANUAL; what needs it stays PENDING")
		require.Equal(t, cikit.RunBlocked, res.Run.State, "a gate that does not allow failure holds the run")
		require.True(t, res.Run.FinishedAt.IsZero())
		deploy := b.job(t, "deploy")
		require.Equal(t, "waiting for approval by alice, bob: deployment to production", deploy.Reason)
		require.Equal(t, res.Changed[0].FinishedAt, deploy.ReadyAt, "the time it began to wait is recorded")

		ev := b.lastEvent(t, "deploy")
		require.Equal(t, dag.EventJobManual, ev.Type)
		require.Equal(t, "waiting for approval by alice, bob: deployment to production", ev.Reason, "commit statuses show what it waits for")

		_, err := b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "deploy", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "nothing queues a gated job before its approval")
		_, err = b.play(t, "deploy", 2)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a stale attempt")
	})

	t.Run("GateThatAllowsFailureDoesNotHoldTheRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, gatedPipeline(true))
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
		require.Equal(t, cikit.JobManual, b.job(t, "deploy").State)
	})

	t.Run("GatedJobsOfEveryWhenWaitMANUAL", func(t *testing.T) {
		t.Parallel()
		specs := gatedPipeline(false)
		specs[1].Needs, specs[1].When, specs[1].StartIn = nil, cikit.WhenDelayed, time.Hour
		specs[1].Gate.Reviewers = nil
		specs[1].Gate.Reasons = append(specs[1].Gate.Reasons, "first-time contributor's pull request")
		always := &cikit.JobSpec{ID: "report", Name: "report", Needs: []string{"build"}, When: cikit.WhenAlways,
			Gate: &cikit.Gate{Reasons: []string{"publishing"}}, Steps: []cikit.Step{{Run: "true"}}}
		b := setup(t, factory, append(specs, always))
		deploy := b.job(t, "deploy")
		require.Equal(t, cikit.JobManual, deploy.State, "a gated delayed job waits for its approval first")
		require.Equal(t, b.run.CreatedAt, deploy.ReadyAt)
		require.Equal(t, "waiting for approval by a person with the approve role: deployment to production; first-time contributor's pull request", deploy.Reason)
		res := b.advance(t, "build", cikit.JobFailed)
		require.Equal(t, cikit.JobManual, changed(res)["report"], "an always job that is gated waits for its approval too")
	})

	t.Run("ApprovalMakesItReady", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, gatedPipeline(false))
		b.advance(t, "build", cikit.JobSucceeded)
		_, err := b.play(t, "build", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "only a MANUAL job can be approved")
		res, err := b.play(t, "deploy", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobReady}, changed(res))
		require.Empty(t, res.Changed[0].Reason, "approved, it waits for nothing but a runner")
		require.Equal(t, cikit.RunRunning, res.Run.State)
		require.Equal(t, dag.EventJobReady, b.lastEvent(t, "deploy").Type)
		_, err = b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "approved once")

		res = b.advance(t, "deploy", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobSucceeded, "smoke": cikit.JobReady}, changed(res))
		res = b.advance(t, "smoke", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("ApprovalWaitsTheWaitTimerAndTheStartIn", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := gatedPipeline(false)
		specs[1].Gate.WaitTimer = 5 * time.Minute
		specs[1].When, specs[1].StartIn = cikit.WhenDelayed, 10*time.Minute
		b := setup(t, factory, specs)
		b.advance(t, "build", cikit.JobSucceeded)
		res, err := b.play(t, "deploy", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobDelayed}, changed(res))
		require.Equal(t, cikit.RunRunning, res.Run.State, "an approved job runs on its own: the run is not blocked")
		ev := b.lastEvent(t, "deploy")
		require.Equal(t, dag.EventJobDelayed, ev.Type)
		at := ev.CreatedAt.Add(15 * time.Minute)
		require.Equal(t, at, b.job(t, "deploy").ReadyAt, "the wait timer, then the start_in, from the approval on the store's clock")

		got, err := b.store.JobsRelease(ctx, at.Add(-time.Second))
		require.NoError(t, err)
		require.Empty(t, got, "not before its time")
		got, err = b.store.JobsRelease(ctx, at)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobReady}, changed(got[0]))
	})

	t.Run("RejectFailsTheJob", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := gatedPipeline(false)
		specs[1].Retry = &cikit.Retry{Max: 2}
		cleanup := &cikit.JobSpec{ID: "cleanup", Name: "cleanup", Needs: []string{"deploy"}, When: cikit.WhenAlways, Steps: []cikit.Step{{Run: "true"}}}
		b := setup(t, factory, append(specs, cleanup))
		_, err := b.reject(t, "deploy", 1, "rejected by alice: not today")
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a PENDING job waits for nobody's decision")
		var te *cikit.TransitionError
		require.ErrorAs(t, err, &te)
		_, err = b.reject(t, "build", 1, "rejected by alice: not today")
		require.ErrorAs(t, err, &te, "a READY job is no reviewer's to reject")
		b.advance(t, "build", cikit.JobSucceeded)

		res, err := b.reject(t, "deploy", 1, "rejected by alice: not today")
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobFailed, "smoke": cikit.JobSkipped, "cleanup": cikit.JobReady}, changed(res),
			"a rejection is a failure: what needs it is skipped, unless it runs always")
		require.Equal(t, cikit.JobFailed, res.Changed[0].State, "the event's own change comes first")
		require.Equal(t, cikit.RunRunning, res.Run.State)
		deploy := b.job(t, "deploy")
		require.Equal(t, "rejected by alice: not today", deploy.Reason)
		require.Equal(t, -1, deploy.ExitCode, "no step ran")
		require.Equal(t, 1, deploy.Attempt, "never retried, whatever its retry policy")
		require.False(t, deploy.FailureAllowed)
		require.False(t, deploy.FinishedAt.IsZero())
		ev := b.lastEvent(t, "deploy")
		require.Equal(t, dag.EventJobCompleted, ev.Type)
		require.Equal(t, string(cikit.JobFailed), ev.State)
		require.Equal(t, "rejected by alice: not today", ev.Reason)
		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "deploy")
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Equal(t, cikit.JobFailed, attempts[0].State)

		_, err = b.reject(t, "deploy", 1, "rejected by bob: no")
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "rejected once")
		_, err = b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a rejected job cannot be approved")

		res = b.advance(t, "cleanup", cikit.JobSucceeded)
		require.Equal(t, cikit.RunFailed, res.Run.State)
		res, err = b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobManual, changed(res)["deploy"], "retrying the run asks for an approval again")
		require.Equal(t, 2, b.job(t, "deploy").Attempt)
	})

	t.Run("RejectOfAJobThatMayFail", func(t *testing.T) {
		t.Parallel()
		specs := gatedPipeline(true)
		specs[1].AllowFailureExitCodes = []int{3}
		b := setup(t, factory, specs)
		b.advance(t, "build", cikit.JobSucceeded)
		res, err := b.reject(t, "deploy", 1, "rejected by bob: later")
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobFailed, "smoke": cikit.JobReady}, changed(res),
			"a rejected job that may fail lets what needs it run, as the spec says")
		require.True(t, res.Changed[0].FailureAllowed)
	})

	t.Run("RejectAManualJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, deployPipeline(true))
		b.advance(t, "build", cikit.JobSucceeded)
		res, err := b.reject(t, "deploy", 1, "rejected by carol: not this one")
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobFailed, "smoke": cikit.JobSkipped}, changed(res))
		require.Equal(t, cikit.RunFailed, res.Run.State)
		require.False(t, res.Run.FinishedAt.IsZero())
		require.Equal(t, dag.EventPipelineCompleted, b.lastEvent(t, "").Type)
	})

	t.Run("GateExpires", func(t *testing.T) {
		t.Parallel()
		specs := gatedPipeline(false)
		specs[1].Retry = &cikit.Retry{Max: 2}
		manual := &cikit.JobSpec{ID: "manual", Name: "manual", When: cikit.WhenManual, AllowFailure: true, Steps: []cikit.Step{{Run: "true"}}}
		b := setup(t, factory, append(specs, manual))
		b.advance(t, "build", cikit.JobSucceeded)
		since := b.job(t, "deploy").ReadyAt
		p := dag.ExpireParams{Now: since.Add(72 * time.Hour), GateTimeout: 72 * time.Hour}
		require.Empty(t, b.expire(t, p), "not past its time")
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: since.Add(1000 * time.Hour)}), "without GateTimeout a gate without Expires waits")

		p.Now = p.Now.Add(time.Second)
		got := b.expire(t, p)
		require.Len(t, got, 1, "a When manual job is no gate: it never expires")
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobFailed, "smoke": cikit.JobSkipped}, changed(got[0]))
		require.Equal(t, cikit.RunFailed, got[0].Run.State)
		deploy := b.job(t, "deploy")
		require.Equal(t, "approval expired: nobody approved within 72h0m0s", deploy.Reason)
		require.True(t, strings.HasPrefix(deploy.Reason, dag.ReasonApprovalExpired))
		require.Equal(t, 1, deploy.Attempt, "never retried, whatever its retry policy")
		require.Equal(t, -1, deploy.ExitCode)
		require.Empty(t, b.expire(t, p), "expired once")
		_, err := b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "too late to approve")
	})

	t.Run("GateExpiresOnItsOwnTime", func(t *testing.T) {
		t.Parallel()
		specs := gatedPipeline(false)
		specs[1].Needs, specs[1].Gate.Expires = nil, time.Hour
		b := setup(t, factory, specs)
		since := b.job(t, "deploy").ReadyAt
		require.Equal(t, b.run.CreatedAt, since)
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: since.Add(time.Hour), GateTimeout: time.Minute}), "the gate's own Expires wins")
		got := b.expire(t, dag.ExpireParams{Now: since.Add(time.Hour + time.Second)})
		require.Len(t, got, 1)
		require.Equal(t, "approval expired: nobody approved within 1h0m0s", got[0].Changed[0].Reason)
		require.Equal(t, cikit.JobFailed, got[0].Changed[0].State)
	})

	t.Run("DeniedJobsFailAtCreation", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := pipeline()
		specs[1].Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "fork pull request by a first-time contributor"}
		specs[2].Admission = &cikit.Admission{Decision: cikit.DecisionAllow}
		b := setup(t, factory, specs)
		require.Equal(t, cikit.RunRunning, b.run.State, "build still runs; the denied job ended")
		unit := b.job(t, "unit")
		require.Equal(t, cikit.JobFailed, unit.State, "denied before its needs ended: it will never run")
		require.Equal(t, "denied by policy: fork pull request by a first-time contributor", unit.Reason)
		require.Equal(t, b.run.CreatedAt, unit.FinishedAt)
		require.Equal(t, -1, unit.ExitCode)
		require.Equal(t, cikit.JobSkipped, b.job(t, "integration").State)
		require.Equal(t, "needs unit, which failed", b.job(t, "integration").Reason)
		ev := b.lastEvent(t, "unit")
		require.Equal(t, dag.EventJobCompleted, ev.Type)
		require.Equal(t, unit.Reason, ev.Reason)
		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "unit")
		require.NoError(t, err)
		require.Len(t, attempts, 1)

		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "lint": cikit.JobReady}, changed(res))
		res = b.advance(t, "lint", cikit.JobSucceeded)
		require.Equal(t, cikit.RunFailed, res.Run.State)
		res, err = b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, b.job(t, "unit").State, "a denied job is never retried")
		require.Equal(t, 1, b.job(t, "unit").Attempt)
		require.Equal(t, cikit.RunFailed, res.Run.State)
	})

	t.Run("RunOfDeniedJobsFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		specs := pipeline()
		specs[0].Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "no"}
		specs[2].AllowFailure = false
		b := setup(t, factory, specs)
		require.Equal(t, cikit.RunFailed, b.run.State, "nothing else runs")
		require.Equal(t, b.run.CreatedAt, b.run.FinishedAt)
		require.Equal(t, []cikit.JobState{cikit.JobFailed, cikit.JobSkipped, cikit.JobSkipped, cikit.JobSkipped}, states(b.jobs1(t)))
		require.Equal(t, dag.EventPipelineCompleted, b.lastEvent(t, "").Type)
	})

	t.Run("DeniedJobThatMayFail", func(t *testing.T) {
		t.Parallel()
		specs := pipeline()
		specs[2].Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "no"}
		specs[2].Needs = nil
		b := setup(t, factory, specs)
		require.Equal(t, cikit.JobFailed, b.job(t, "lint").State)
		b.advance(t, "build", cikit.JobSucceeded)
		res := b.advance(t, "unit", cikit.JobSucceeded)
		require.Equal(t, cikit.JobReady, changed(res)["integration"], "a denied job that may fail holds nothing back")
	})

	t.Run("NewerRunCancelsOlderGates", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		line := dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", DefaultBranch: true}
		manual := &cikit.JobSpec{ID: "manual", Name: "manual", Needs: []string{"build"}, When: cikit.WhenManual, Steps: []cikit.Step{{Run: "true"}}}
		older := rs.create(line, append(gatedPipeline(false), manual))
		older.advance(t, "build", cikit.JobSucceeded)
		other := rs.create(dag.RunCreateParams{Pipeline: line.Pipeline, Branch: "release"}, gatedPipeline(false))
		other.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, cikit.RunBlocked, older.runState(t))

		newer := rs.create(line, gatedPipeline(false))
		jobs := older.jobs(t)
		require.Equal(t, cikit.JobCancelled, jobs["deploy"].State, "approving it would deploy an older commit than the newer run's")
		require.Equal(t, "superseded by run "+newer.run.ID, jobs["deploy"].Reason)
		require.Equal(t, cikit.JobCancelled, jobs["smoke"].State, "what needs it is cancelled with it")
		require.Equal(t, cikit.JobManual, jobs["manual"].State, "a When manual job is no gate: the default branch keeps it")
		require.Equal(t, cikit.RunCancelled, older.runState(t))
		require.Equal(t, dag.EventJobCompleted, older.lastEvent(t, "deploy").Type)
		require.Equal(t, cikit.JobManual, other.jobs(t)["deploy"].State, "another branch's gates are left alone")

		newest := rs.create(line, gatedPipeline(false))
		require.Equal(t, cikit.JobReady, newer.jobs(t)["build"].State, "a run whose gate does not wait yet goes on")
		require.Equal(t, cikit.JobPending, newer.jobs(t)["deploy"].State)
		require.Equal(t, cikit.JobReady, newest.jobs(t)["build"].State)

		// Never superseding on a feature branch changes nothing for gates.
		feature := dag.RunCreateParams{Pipeline: line.Pipeline, Branch: "feature", Supersede: dag.SupersedeNever}
		first := rs.create(feature, gatedPipeline(false))
		first.advance(t, "build", cikit.JobSucceeded)
		second := rs.create(feature, gatedPipeline(false))
		require.Equal(t, cikit.JobCancelled, first.jobs(t)["deploy"].State)
		require.Equal(t, "superseded by run "+second.run.ID, first.jobs(t)["deploy"].Reason)
		require.Equal(t, cikit.JobReady, second.jobs(t)["build"].State)
	})

	t.Run("SupersededRunIsCancelledWhole", func(t *testing.T) {
		t.Parallel()
		rs := newRunSet(t, factory)
		line := dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "feature"}
		older := rs.create(line, gatedPipeline(false))
		older.advance(t, "build", cikit.JobSucceeded)
		newer := rs.create(line, gatedPipeline(false))
		for id, j := range older.jobs(t) {
			if id != "build" {
				require.Equal(t, cikit.JobCancelled, j.State, id)
				require.Equal(t, "superseded by run "+newer.run.ID, j.Reason, id)
			}
		}
		require.Equal(t, cikit.RunCancelled, older.runState(t))
	})

	t.Run("HostileGates", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := factory(t, (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).now)
		long := strings.Repeat("x", cikit.MaxGateTextBytes+1)
		for name, mutate := range map[string]func(*cikit.JobSpec){
			"too many reasons":    func(j *cikit.JobSpec) { j.Gate.Reasons = make([]string, cikit.MaxGateReasons+1) },
			"too many reviewers":  func(j *cikit.JobSpec) { j.Gate.Reviewers = make([]string, cikit.MaxGateReviewers+1) },
			"a reason too long":   func(j *cikit.JobSpec) { j.Gate.Reasons = []string{long} },
			"a reviewer too long": func(j *cikit.JobSpec) { j.Gate.Reviewers = []string{long} },
			"a negative timer":    func(j *cikit.JobSpec) { j.Gate.WaitTimer = -time.Second },
			"a negative expiry":   func(j *cikit.JobSpec) { j.Gate.Expires = -time.Second },
			"an admission too long": func(j *cikit.JobSpec) {
				j.Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: long}
			},
		} {
			specs := gatedPipeline(false)
			mutate(specs[1])
			_, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
			require.ErrorIs(t, err, dag.ErrInvalidParams, name)
			require.ErrorContains(t, err, `job "deploy"`, name)
		}
		runs, err := s.RunList(ctx, &dag.RunListParams{})
		require.NoError(t, err)
		require.Empty(t, runs, "nothing was written")
		specs := gatedPipeline(false)
		specs[1].Gate.Reasons = []string{strings.Repeat("x", cikit.MaxGateTextBytes)}
		_, err = s.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		require.NoError(t, err, "at the bound")
	})
}

// jobs1 returns the run's jobs in plan order.
func (b *bundle) jobs1(t *testing.T) []*dag.Job {
	t.Helper()
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	return jobs
}
