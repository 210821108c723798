package vcstest

import (
	"cmp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

// exerciseStatuses covers SetStatus.
func exerciseStatuses(t *testing.T, cfg Config) {
	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		sha := b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		other := b.fix.Commit(t, repo, "main", map[string]string{"a": "2"})
		statuses := func(sha string) []vcs.Status {
			t.Helper()
			out := b.fix.Statuses(t, repo, sha)
			slices.SortFunc(out, func(a, b vcs.Status) int { return cmp.Compare(a.Context, b.Context) })
			return out
		}
		set := func(sha string, st vcs.Status) {
			t.Helper()
			require.NoError(t, b.p.SetStatus(b.ctx, repo, sha, &st), "%+v", st)
		}

		set(sha, vcs.Status{Context: "cikit", State: vcs.StatePending, Description: "queued"})
		set(sha, vcs.Status{Context: "cikit/build", State: vcs.StateSuccess, Description: "built in 3s",
			TargetURL: "https://ci.example.com/runs/1/jobs/build"})
		set(sha, vcs.Status{Context: "cikit", State: vcs.StateFailure, Description: "test failed",
			TargetURL: "https://ci.example.com/runs/1"})
		set(other, vcs.Status{Context: "cikit", State: vcs.StateSuccess})

		want := []vcs.Status{
			{Context: "cikit", State: vcs.StateFailure, Description: "test failed", TargetURL: "https://ci.example.com/runs/1"},
			{Context: "cikit/build", State: vcs.StateSuccess, Description: "built in 3s", TargetURL: "https://ci.example.com/runs/1/jobs/build"},
		}
		require.Equal(t, want, statuses(sha), "the latest per context, description and target URL kept")
		require.Equal(t, []vcs.Status{{Context: "cikit", State: vcs.StateSuccess}}, statuses(other), "per commit")

		for _, bad := range []vcs.Status{
			{State: vcs.StateSuccess},
			{Context: "cikit", State: "bogus"},
			{Context: "cikit"},
		} {
			require.Error(t, b.p.SetStatus(b.ctx, repo, sha, &bad), "%+v", bad)
		}
		require.Equal(t, want, statuses(sha), "invalid statuses are not posted")
	})

	t.Run("SetStatusStates", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		sha := b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		// Every state is accepted; forges that know fewer map them.
		for _, st := range []vcs.State{vcs.StatePending, vcs.StateRunning, vcs.StateSuccess, vcs.StateFailure,
			vcs.StateCancelled, vcs.StateSkipped} {
			require.NoError(t, b.p.SetStatus(b.ctx, repo, sha, &vcs.Status{Context: "cikit/" + string(st), State: st}), st)
		}
		got := b.fix.Statuses(t, repo, sha)
		require.Len(t, got, 6)
		for _, st := range got {
			switch st.Context {
			case "cikit/success", "cikit/failure":
				require.Equal(t, vcs.State(st.Context[len("cikit/"):]), st.State, st.Context)
			}
		}
	})
}
