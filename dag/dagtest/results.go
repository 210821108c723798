package dagtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// exerciseResults covers the run's context and the results jobs report
// with their completions, the image a job ran on among them.
func exerciseResults(t *testing.T, factory Factory) {
	t.Run("RunContext", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := factory(t, (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).now)
		want := &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "pull_request",
			Ref: "refs/pull/7/merge", RefName: "7/merge", SHA: "0123456789abcdef0123456789abcdef01234567",
			BaseRef: "main", HeadRef: "feature", PRNumber: 7, DefaultBranch: "main", Actor: "octocat",
			Inputs: map[string]string{"level": "debug"}, Payload: json.RawMessage(`{"action":"opened","number":7}`)}
		run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), Context: want})
		require.NoError(t, err)
		require.Nil(t, run.Context, "only RunGet reads the context")
		got, err := s.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(want, got.Context))
		got.Context.Inputs["level"] = "changed"
		again, err := s.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, "debug", again.Context.Inputs["level"], "RunGet answers a copy")
		list, err := s.RunList(ctx, &dag.RunListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Nil(t, list[0].Context, "RunList leaves the context out")

		plain, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline()})
		require.NoError(t, err)
		got, err = s.RunGet(ctx, plain.ID)
		require.NoError(t, err)
		require.Nil(t, got.Context, "a run created without a context has none")

		// A payload is kept as sent, escapes PostgreSQL's jsonb refuses
		// included.
		odd := json.RawMessage(`{"z":1,"a":"\u0000","dup":1,"dup":2}`)
		oddRun, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), Context: &cikit.RunContext{Payload: odd}})
		require.NoError(t, err)
		got, err = s.RunGet(ctx, oddRun.ID)
		require.NoError(t, err)
		require.Equal(t, string(odd), string(got.Context.Payload), "byte for byte")

		_, err = s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(),
			Context: &cikit.RunContext{Payload: json.RawMessage(`{"not json`)}})
		require.ErrorIs(t, err, dag.ErrInvalidParams, "a payload that is not JSON")
	})

	t.Run("JobResults", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		result := func(commit string) *dag.JobResult {
			return &dag.JobResult{Outputs: map[string]string{"version": "1.2." + commit[:1], "multi": "a\nb"},
				Annotations:      []cikit.Annotation{{Level: "error", Message: "boom", File: "main.go", Line: 3, Step: "test"}},
				Commit:           commit + "000000000000000000000000000000000000000"[:40-len(commit)],
				CheckoutDuration: 1500 * time.Millisecond, EnvNames: []string{"CI", "GITHUB_SHA"},
				ImageRef: "registry.example:5000/acme/build:" + commit, ImageDigest: "sha256:" + strings.Repeat(commit, 64)}
		}
		complete := func(job string, attempt int, outcome cikit.JobState, class cikit.FailureClass, r *dag.JobResult) *dag.TransitionResult {
			t.Helper()
			p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: attempt}
			_, err := b.store.JobQueue(ctx, p)
			require.NoError(t, err)
			_, err = b.store.JobStart(ctx, p)
			require.NoError(t, err)
			res, err := b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: attempt,
				Outcome: outcome, FailureClass: class, Result: r})
			require.NoError(t, err)
			return res
		}
		get := func(job string) *dag.Job {
			t.Helper()
			j, err := b.store.JobGet(ctx, b.run.ID, job)
			require.NoError(t, err)
			return j
		}

		// A completion that readies the jobs needing it (PostgreSQL's
		// fast path).
		build := result("a")
		res := complete("build", 1, cikit.JobSucceeded, "", build)
		require.Empty(t, cmp.Diff(build, res.Changed[0].Result), "the transition's job")
		require.Empty(t, cmp.Diff(build, get("build").Result), "JobGet")
		many, err := b.store.JobGetMany(ctx, []dag.JobKey{{RunID: b.run.ID, JobID: "unit"}, {RunID: b.run.ID, JobID: "build"}})
		require.NoError(t, err)
		require.Nil(t, many[0].Result, "a job that has not ended has no result")
		require.Empty(t, cmp.Diff(build, many[1].Result), "JobGetMany")
		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Empty(t, cmp.Diff(build, attempts[0].Result), "JobAttempts")

		// A redelivered completion changes nothing, its result included.
		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1,
			Outcome: cikit.JobSucceeded, Result: result("f")})
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(build, get("build").Result), "the first completion's result stays")

		// Results are copies.
		got := get("build")
		got.Result.Outputs["version"], got.Result.EnvNames[0] = "changed", "changed"
		require.Empty(t, cmp.Diff(build, get("build").Result))

		// A failure that skips what needs it (the locked path), then
		// the completion that ends the run.
		lint := result("b")
		complete("lint", 1, cikit.JobFailed, cikit.FailureScript, lint)
		require.Empty(t, cmp.Diff(lint, get("lint").Result))
		unit := &dag.JobResult{Outputs: map[string]string{"only": "outputs"}}
		complete("unit", 1, cikit.JobSucceeded, "", unit)
		integration := result("c")
		res = complete("integration", 1, cikit.JobSucceeded, "", integration)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
		require.Empty(t, cmp.Diff(integration, res.Changed[0].Result))
		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		for i, want := range []*dag.JobResult{build, unit, lint, integration} {
			require.Empty(t, cmp.Diff(want, jobs[i].Result), "JobList %s", jobs[i].ID())
		}

	})

	t.Run("JobResultOfRetriedAttempt", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{{ID: "flaky", Steps: step}, {ID: "after", Needs: []string{"flaky"}, Steps: step}})
		r := &dag.JobResult{Commit: "0123456789abcdef0123456789abcdef01234567", EnvNames: []string{"CI"},
			ImageRef: "alpine:3.19", ImageDigest: "sha256:" + strings.Repeat("0a", 32)}
		res, err := b.store.JobApply(ctx, []*dag.JobEvent{
			{Kind: dag.EventQueue, RunID: b.run.ID, JobID: "flaky", Attempt: 1},
			{Kind: dag.EventStart, RunID: b.run.ID, JobID: "flaky", Attempt: 1},
			{Kind: dag.EventComplete, RunID: b.run.ID, JobID: "flaky", Attempt: 1, Outcome: cikit.JobFailed,
				FailureClass: cikit.FailureInfrastructure, Reason: "runner lost", Result: r},
		})
		require.NoError(t, err)
		for _, e := range res {
			require.NoError(t, e.Err)
		}
		j, err := b.store.JobGet(ctx, b.run.ID, "flaky")
		require.NoError(t, err)
		require.Equal(t, 2, j.Attempt, "an infrastructure failure is retried")
		require.Nil(t, j.Result, "the new attempt starts without the old one's result")
		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "flaky")
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Empty(t, cmp.Diff(r, attempts[0].Result), "the ended attempt records it")

		// A failure not retried, then the run's failed jobs retried.
		res, err = b.store.JobApply(ctx, []*dag.JobEvent{
			{Kind: dag.EventQueue, RunID: b.run.ID, JobID: "flaky", Attempt: 2},
			{Kind: dag.EventStart, RunID: b.run.ID, JobID: "flaky", Attempt: 2},
			{Kind: dag.EventComplete, RunID: b.run.ID, JobID: "flaky", Attempt: 2, Outcome: cikit.JobFailed,
				FailureClass: cikit.FailureScript, Reason: "exit 1", Result: r},
		})
		require.NoError(t, err)
		for _, e := range res {
			require.NoError(t, e.Err)
		}
		j, err = b.store.JobGet(ctx, b.run.ID, "flaky")
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, j.State)
		require.Empty(t, cmp.Diff(r, j.Result))
		_, err = b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		j, err = b.store.JobGet(ctx, b.run.ID, "flaky")
		require.NoError(t, err)
		require.Equal(t, 3, j.Attempt)
		require.Nil(t, j.Result, "a retried job's new attempt has no result yet")
		attempts, err = b.store.JobAttempts(ctx, b.run.ID, "flaky")
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Empty(t, cmp.Diff(r, attempts[1].Result), "the ended attempt keeps it")
	})
}
