package dag

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/cikit/cikit"
)

// genScopeSpecs draws a random acyclic pipeline of up to 12 jobs, with
// every kind of When, allowed failures (some only with exit code 1),
// retries (some only on exit code 2), gates and jobs the policy denied.
func genScopeSpecs(t *rapid.T) []*cikit.JobSpec {
	n := rapid.IntRange(1, 12).Draw(t, "jobs")
	whens := []cikit.When{"", "", "", "", cikit.WhenAlways, cikit.WhenOnFailure, cikit.WhenManual, cikit.WhenDelayed}
	specs := make([]*cikit.JobSpec, n)
	for i := range n {
		var needs []string
		if i > 0 {
			for _, p := range rapid.SliceOfNDistinct(rapid.IntRange(0, i-1), 0, 3, rapid.ID[int]).Draw(t, fmt.Sprintf("needs%d", i)) {
				needs = append(needs, fmt.Sprintf("j%d", p))
			}
		}
		specs[i] = &cikit.JobSpec{
			ID:           fmt.Sprintf("j%d", i),
			Needs:        needs,
			AllowFailure: rapid.Float64Range(0, 1).Draw(t, fmt.Sprintf("allow%d", i)) < 0.25,
			When:         rapid.SampledFrom(whens).Draw(t, fmt.Sprintf("when%d", i)),
			StartIn:      time.Hour,
			Steps:        []cikit.Step{{Run: "true"}},
		}
		if specs[i].AllowFailure && rapid.Bool().Draw(t, fmt.Sprintf("exitcodes%d", i)) {
			specs[i].AllowFailureExitCodes = []int{1}
		}
		switch rapid.IntRange(0, 9).Draw(t, fmt.Sprintf("trust%d", i)) {
		case 0, 1:
			specs[i].Gate = &cikit.Gate{Reasons: []string{"deployment to production"},
				WaitTimer: rapid.SampledFrom([]time.Duration{0, time.Minute}).Draw(t, fmt.Sprintf("wait%d", i))}
		case 2:
			specs[i].Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "no"}
		}
		if rapid.Bool().Draw(t, fmt.Sprintf("retry%d", i)) {
			specs[i].Retry = &cikit.Retry{Max: 1}
			if rapid.Bool().Draw(t, fmt.Sprintf("retrycodes%d", i)) {
				specs[i].Retry.ExitCodes = []int{2}
			}
		}
	}
	return specs
}

func cloneJobs(jobs []*Job) []*Job {
	out := make([]*Job, len(jobs))
	for i, j := range jobs {
		out[i] = j.clone()
	}
	return out
}

// only keeps the jobs of scope, as a store that read only those holds them.
func only(jobs []*Job, scope []int) []*Job {
	out := make([]*Job, len(jobs))
	for _, i := range scope {
		out[i] = jobs[i].clone()
	}
	return out
}

// applyOn works out the write of je on jobs and records it there.
func applyOn(g *Graph, jobs []*Job, je *JobEvent) (*applied, error) {
	w, err := newWrite(g, jobs, "r", je, Event{})
	if err != nil {
		return nil, err
	}
	return w.apply(g, jobs, time.Unix(0, 0))
}

// probed is what PostgresStore.lockedStatus learns from runProbe about a
// run of jobs, turned into its state: the allow_failure column holds
// each job's FailureAllowed.
func probed(rg *runGraph, jobs []*Job) cikit.RunState {
	var sum runSummary
	pending := false
	for _, j := range jobs {
		sum.add(j.State, j.FailureAllowed)
		pending = pending || j.State == cikit.JobPending
	}
	sum.open = sum.open || pending && !rg.manual
	return sum.state()
}

// TestPropertyScopedWritesAgreeWithWholeRuns checks the PostgreSQL
// store's partial reads against the rules on whole runs, on random
// pipelines driven by random job events from their initial states:
//
//   - a write on the jobs scopeOf names either needs more (an
//     *unreadError) or is the write on the whole run: same error, same
//     changes, same ended attempts;
//   - on the jobs belowScope names, it never needs more;
//   - the run's state from the kinds of states its jobs are in (what
//     runProbe asks PostgreSQL) is RunStatus's, in every state reached.
func TestPropertyScopedWritesAgreeWithWholeRuns(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		specs := genScopeSpecs(t)
		g, err := FromSpecs(specs)
		if err != nil {
			t.Fatal(err)
		}
		rg := newRunGraph(g, specs, "", "", "")
		jobs := make([]*Job, g.Len())
		for i, s := range Initial(g) {
			jobs[i] = &Job{RunID: "r", Spec: specs[i], State: s, Attempt: 1, FailureAllowed: specs[i].AllowFailure}
		}
		kinds := []EventKind{EventQueue, EventStart, EventComplete, EventComplete, EventExpire, EventCancelJob, EventPlay, EventRelease, EventReject}
		outcomes := []cikit.JobState{cikit.JobSucceeded, cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled}
		for step := range 40 {
			if got, want := probed(rg, jobs), RunStatus(g.withJobs(jobs), statesOf(jobs)); got != want {
				t.Fatalf("step %d: the run's state from the kinds of its jobs' states is %s, RunStatus says %s (states %v)", step, got, want, statesOf(jobs))
			}
			if RunStatus(g.withJobs(jobs), statesOf(jobs)).Terminal() && rapid.Bool().Draw(t, fmt.Sprintf("retry-failed%d", step)) {
				w := &write{ev: Event{Kind: EventRetryFailed}}
				if _, err := w.apply(g, jobs, time.Unix(0, 0)); err != nil {
					t.Fatalf("step %d: retry of the failed jobs: %v", step, err)
				}
				continue
			}
			i := rapid.IntRange(0, g.Len()-1).Draw(t, fmt.Sprintf("job%d", step))
			je := &JobEvent{
				Kind:         rapid.SampledFrom(kinds).Draw(t, fmt.Sprintf("kind%d", step)),
				RunID:        "r",
				JobID:        specs[i].ID,
				Attempt:      jobs[i].Attempt,
				Runner:       "x",
				Outcome:      rapid.SampledFrom(outcomes).Draw(t, fmt.Sprintf("outcome%d", step)),
				FailureClass: rapid.SampledFrom([]cikit.FailureClass{cikit.FailureScript, cikit.FailureInfrastructure, cikit.FailureTimeout}).Draw(t, fmt.Sprintf("class%d", step)),
				ExitCode:     rapid.IntRange(1, 2).Draw(t, fmt.Sprintf("exit%d", step)),
			}
			if je.Kind == EventExpire {
				je.Outcome = cikit.JobFailed
				if jobs[i].State == cikit.JobManual {
					je.FailureClass, je.seen = cikit.FailurePolicy, cikit.JobManual // an expired gate
				}
			}
			if je.Kind == EventComplete && rapid.Float64Range(0, 1).Draw(t, fmt.Sprintf("redeliver%d", step)) < 0.1 {
				je.Outcome = jobs[i].State // a redelivered completion
			}
			want, wantErr := applyOn(g, cloneJobs(jobs), je)
			got, gotErr := applyOn(g, only(jobs, scopeOf(rg, je)), je)
			var ue *unreadError
			if errors.As(gotErr, &ue) {
				got, gotErr = applyOn(g, only(jobs, belowScope(g, i)), je)
				if errors.As(gotErr, &ue) {
					t.Fatalf("step %d: %v of %s in %s needs jobs %v below it", step, je.Kind, je.JobID, jobs[i].State, ue.jobs)
				}
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("step %d: %v of %s: partial read answers %v, the whole run %v", step, je.Kind, je.JobID, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if fmt.Sprint(describe(got.changed)) != fmt.Sprint(describe(want.changed)) || fmt.Sprint(describe(got.ended)) != fmt.Sprint(describe(want.ended)) {
				t.Fatalf("step %d: %v of %s: partial read changes %v ending %v, the whole run %v ending %v", step, je.Kind, je.JobID,
					describe(got.changed), describe(got.ended), describe(want.changed), describe(want.ended))
			}
			if _, err := applyOn(g, jobs, je); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// describe is what a write records of jobs, as text to compare.
func describe(jobs []*Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = fmt.Sprintf("%s:%s@%d exit=%d allowed=%t reason=%q runner=%q", j.ID(), j.State, j.Attempt, j.ExitCode, j.FailureAllowed, j.Reason, j.Runner)
	}
	return out
}

// TestScopedWriteReadsWhatReasonsNeed: a failure that is allowed skips an
// on_failure job below it, and so the job below that, whose reason reads
// a job it needs (other) that the rules did not: the write on the jobs
// scopeOf names asks for them, and is then the write on the whole run.
func TestScopedWriteReadsWhatReasonsNeed(t *testing.T) {
	t.Parallel()
	specs := []*cikit.JobSpec{
		{ID: "other"},
		{ID: "lint", AllowFailure: true},
		{ID: "notify", Needs: []string{"lint"}, When: cikit.WhenOnFailure},
		{ID: "below", Needs: []string{"other", "notify"}},
		{ID: "last", Needs: []string{"below", "lint"}},
	}
	g, err := FromSpecs(specs)
	require.NoError(t, err)
	rg := newRunGraph(g, specs, "", "", "")
	jobs := []*Job{
		{RunID: "r", Spec: specs[0], State: cikit.JobRunning, Attempt: 1},
		{RunID: "r", Spec: specs[1], State: cikit.JobRunning, Attempt: 1, FailureAllowed: true},
		{RunID: "r", Spec: specs[2], State: cikit.JobPending, Attempt: 1},
		{RunID: "r", Spec: specs[3], State: cikit.JobPending, Attempt: 1},
		{RunID: "r", Spec: specs[4], State: cikit.JobPending, Attempt: 1},
	}
	je := &JobEvent{Kind: EventComplete, RunID: "r", JobID: "lint", Attempt: 1, Outcome: cikit.JobFailed, FailureClass: cikit.FailureScript, ExitCode: 1}
	want, err := applyOn(g, cloneJobs(jobs), je)
	require.NoError(t, err)
	_, err = applyOn(g, only(jobs, scopeOf(rg, je)), je)
	var ue *unreadError
	require.ErrorAs(t, err, &ue, "the reasons need a job the scope lacks")
	got, err := applyOn(g, only(jobs, belowScope(g, 1)), je)
	require.NoError(t, err)
	require.Equal(t, describe(want.changed), describe(got.changed))
	require.Equal(t, `below:skipped@1 exit=0 allowed=false reason="needs notify, which was skipped" runner=""`, describe(got.changed)[2])
}
