package dag

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

// TestRefusedAloneAgreesWithTheRules checks refusedAlone against newWrite
// and apply on a whole run, for every event, state, attempt and outcome:
// whenever refusedAlone refuses, the rules refuse with the same error, and
// whenever the rules refuse an event of the fast path's kinds for a reason
// of the job's own, so does refusedAlone. The waiting states (MANUAL,
// DELAYED) and the events that end them (play, release, reject) are in the lists:
// a queue, start or completion of a job waiting for a person is refused by
// its row alone, like any other.
func TestRefusedAloneAgreesWithTheRules(t *testing.T) {
	t.Parallel()
	specs := []*cikit.JobSpec{{ID: "a"}, {ID: "b", Needs: []string{"a"}}}
	g, err := FromSpecs(specs)
	require.NoError(t, err)
	states := []cikit.JobState{cikit.JobPending, cikit.JobReady, cikit.JobQueued, cikit.JobManual, cikit.JobDelayed,
		cikit.JobRunning, cikit.JobCancelRequested, cikit.JobSucceeded, cikit.JobFailed, cikit.JobSkipped, cikit.JobCancelled}
	outcomes := []cikit.JobState{cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled, cikit.JobRunning}
	for _, st := range states {
		for _, kind := range []EventKind{EventQueue, EventStart, EventComplete, EventPlay, EventRelease, EventReject} {
			for _, outcome := range outcomes {
				for _, attempt := range []int{1, 2} {
					name := fmt.Sprintf("%s/%v/%s/attempt=%d", st, kind, outcome, attempt)
					jobs := []*Job{{RunID: "r", Spec: specs[0], State: cikit.JobSucceeded, Attempt: 1},
						{RunID: "r", Spec: specs[1], State: st, Attempt: 2}}
					je := &JobEvent{Kind: kind, RunID: "r", JobID: "b", Attempt: attempt, Outcome: outcome, FailureClass: cikit.FailureScript}
					alone := refusedAlone(jobs[1], je)
					var rules error
					w, err := newWrite(g, jobs, "r", je, Event{})
					if err != nil {
						rules = err
					} else {
						_, rules = w.apply(g, jobs, time.Unix(0, 0))
					}
					if alone != nil {
						require.Equal(t, rules, alone, name)
						continue
					}
					if kind == EventPlay || kind == EventRelease || kind == EventReject {
						// Never fast: the locked path answers them.
						continue
					}
					// The only refusals left to the whole run are those
					// of a completion whose outcome is not one.
					if rules != nil {
						require.Equal(t, EventComplete, kind, "%s: the rules refuse with %v", name, rules)
						require.Equal(t, cikit.JobRunning, outcome, "%s: the rules refuse with %v", name, rules)
					}
				}
			}
		}
	}
}
