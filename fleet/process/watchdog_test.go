package process_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/proctest"
)

// TestRunLeasedRenewals: a job that outlives its first lease deadline
// runs to its end while the deadline is renewed.
func TestRunLeasedRenewals(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		const lease = 1500 * time.Millisecond
		first := time.Now().Add(lease)
		dl := process.NewLeaseDeadline(first)
		done := make(chan process.Result)
		go func() {
			// Twice the first deadline.
			done <- b.exec.RunLeased(context.Background(), &cikit.JobSpec{ID: "renewed", Steps: steps("sleep 3; echo outlived")}, b.out, nil, dl)
		}()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case res := <-done:
				require.Equal(t, cikit.JobSucceeded, res.State, "%s: %s", res.Reason, b.out.String())
				require.Contains(t, printed(b.out.String()), "outlived\n")
				require.True(t, dl.Until().After(first.Add(lease)), "renewed well past the first deadline")
				return
			case <-tick.C:
				dl.Renew(time.Now().Add(lease))
			}
		}
	})
}

// TestRunLeasedExpiry: a job whose lease is not renewed is killed by its
// supervisor, background processes and those that left their session
// included, and fails as an infrastructure failure saying why; no later
// step runs, not even after a step that may fail.
func TestRunLeasedExpiry(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		bg, escaped := marker(), marker()
		dl := process.NewLeaseDeadline(time.Now().Add(time.Hour))
		done := make(chan process.Result)
		go func() {
			done <- b.exec.RunLeased(context.Background(), &cikit.JobSpec{ID: "expired", Env: map[string]string{"BG": bg, "ESCAPED": escaped},
				Steps: []cikit.Step{{Run: `sleep "$BG" & setsid sleep "$ESCAPED" & echo started; wait`, ContinueOnError: true}, {Run: "echo never"}}}, b.out, nil, dl)
		}()
		require.Eventually(t, func() bool {
			return len(proctest.Running("sleep", bg)) == 1 && len(proctest.Running("sleep", escaped)) == 1
		}, 20*time.Second, 5*time.Millisecond, "the job's processes start")
		dl.Renew(time.Now().Add(-time.Second)) // the lease has run out
		res := <-done
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
		require.Contains(t, res.Reason, "the job's lease was not renewed in time: its supervisor killed every process of the job", res.Reason)
		require.NotContains(t, printed(b.out.String()), "never")
		require.Empty(t, proctest.Running("sleep", bg))
		require.Empty(t, proctest.Running("sleep", escaped))
	})
}

// TestRunLeasedFirstDeadline: the supervisor has the first deadline before
// the first step starts: a lease that has run out by then runs no step.
func TestRunLeasedFirstDeadline(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.RunLeased(context.Background(), &cikit.JobSpec{ID: "late", Steps: steps("echo ran")}, b.out, nil,
			process.NewLeaseDeadline(time.Now().Add(-time.Second)))
		require.Equal(t, cikit.JobFailed, res.State, fmt.Sprint(res))
		require.NotContains(t, printed(b.out.String()), "ran")
	})
}
