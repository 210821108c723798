// Package approvalstest is the conformance suite of approvals.Store.
// Every implementation, the memory one included, runs it, so that a
// decision is kept the same in a test, the embedded platform and
// production.
//
//	func TestMyStore(t *testing.T) {
//		approvalstest.Exercise(t, func(t *testing.T) approvals.Store {
//			return newMyStore(t)
//		})
//	}
package approvalstest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/approvals"
)

// Factory returns a new, empty store that shares nothing with the
// others.
type Factory func(t *testing.T) approvals.Store

// at is a time with nanoseconds, which stores keep to the microsecond.
var at = time.Date(2026, 3, 2, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))

func approval(job string, attempt int, d approvals.Decision, minute int) approvals.Approval {
	return approvals.Approval{RunID: "run-1", JobID: job, Attempt: attempt, Login: "alice", Decision: d,
		Comment: "looks good", Time: at.Add(time.Duration(minute) * time.Minute)}
}

// Exercise runs the conformance suite.
func Exercise(t *testing.T, factory Factory) {
	t.Run("RecordList", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := t.Context()
		got, err := s.List(ctx, "run-1")
		require.NoError(t, err)
		require.NotNil(t, got, "an empty list, not nil")
		require.Empty(t, got)

		later := approval("deploy", 1, approvals.Reject, 2)
		later.Login, later.Comment = "bob", "not on a Friday"
		earlier := approval("staging", 1, approvals.Approve, 1)
		earlier.Comment = ""
		other := approval("deploy", 1, approvals.Approve, 0)
		other.RunID = "run-2"
		for _, a := range []approvals.Approval{later, earlier, other} {
			require.NoError(t, s.Record(ctx, a))
		}
		got, err = s.List(ctx, "run-1")
		require.NoError(t, err)
		want := []approvals.Approval{earlier, later}
		for i := range want {
			want[i].Time = want[i].Time.UTC().Truncate(time.Microsecond)
		}
		require.Equal(t, want, got, "oldest first, in UTC to the microsecond, of the run only")
		got, err = s.List(ctx, "nope")
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("OneDecisionPerAttempt", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := t.Context()
		require.NoError(t, s.Record(ctx, approval("deploy", 1, approvals.Approve, 0)))
		second := approval("deploy", 1, approvals.Reject, 1)
		second.Login = "bob"
		err := s.Record(ctx, second)
		require.ErrorIs(t, err, cikit.ErrConflict)
		require.Contains(t, err.Error(), `attempt 1 of job "deploy" of run "run-1" is decided already`)
		require.NoError(t, s.Record(ctx, approval("deploy", 2, approvals.Reject, 2)), "a retried job's attempt is decided anew")
		got, err := s.List(ctx, "run-1")
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, "alice", got[0].Login, "the first decision stays")
		require.Equal(t, approvals.Approve, got[0].Decision)
		require.Equal(t, 2, got[1].Attempt)
	})
	t.Run("ConcurrentDecisions", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := t.Context()
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = s.Record(ctx, approval("deploy", 1, approvals.Approve, i)) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, cikit.ErrConflict)
		}
		require.Equal(t, 1, won, "exactly one of the racing decisions is kept")
		got, err := s.List(ctx, "run-1")
		require.NoError(t, err)
		require.Len(t, got, 1)
	})
	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := t.Context()
		for name, edit := range map[string]func(a *approvals.Approval){
			"no run":         func(a *approvals.Approval) { a.RunID = "" },
			"no job":         func(a *approvals.Approval) { a.JobID = "" },
			"no login":       func(a *approvals.Approval) { a.Login = "" },
			"attempt 0":      func(a *approvals.Approval) { a.Attempt = 0 },
			"decision":       func(a *approvals.Approval) { a.Decision = "maybe" },
			"long comment":   func(a *approvals.Approval) { a.Comment = strings.Repeat("x", approvals.MaxCommentBytes+1) },
			"NUL comment":    func(a *approvals.Approval) { a.Comment = "a\x00b" },
			"invalid UTF-8":  func(a *approvals.Approval) { a.Login = "\xff" },
			"long job":       func(a *approvals.Approval) { a.JobID = strings.Repeat("j", 300) },
			"no time":        func(a *approvals.Approval) { a.Time = time.Time{} },
			"NUL in the run": func(a *approvals.Approval) { a.RunID = "run\x00" },
		} {
			a := approval("deploy", 1, approvals.Approve, 0)
			edit(&a)
			err := s.Record(ctx, a)
			require.True(t, errors.Is(err, approvals.ErrInvalid), "%s: %v", name, err)
		}
		a := approval("deploy", 1, approvals.Approve, 0)
		a.Comment = strings.Repeat("é", approvals.MaxCommentBytes/2)
		require.NoError(t, s.Record(ctx, a), "a comment of MaxCommentBytes is kept")
		got, err := s.List(ctx, "run-1")
		require.NoError(t, err)
		require.Len(t, got, 1, "nothing invalid was stored")
		require.Equal(t, a.Comment, got[0].Comment)
	})
}
