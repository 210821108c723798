package dagtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// waitingKeys lists jobs as "run/job:state".
func waitingKeys(jobs []*dag.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.RunID + "/" + j.ID() + ":" + string(j.State)
	}
	return out
}

func exerciseWaiting(t *testing.T, factory Factory) {
	t.Run("ListWaiting", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		l := newListed(t, factory)
		// Three runs, a second apart. In the first, build succeeded,
		// which made unit and lint ready, and lint is queued; in the
		// second build is ready; the third is cancelled and has nothing
		// waiting.
		first := &bundle{store: l.store, run: l.create(t, 1, "", "")}
		second := l.create(t, 2, "", "")
		third := l.create(t, 3, "", "")
		first.advance(t, "build", cikit.JobSucceeded)
		first.queue(t, "lint", 1)
		_, err := l.store.RunCancel(ctx, third.ID)
		require.NoError(t, err)

		want := map[string][]string{
			first.run.ID: {first.run.ID + "/unit:ready", first.run.ID + "/lint:queued"},
			second.ID:    {second.ID + "/build:ready"},
		}
		order := []string{first.run.ID, second.ID}
		slices.SortFunc(order, strings.Compare)
		var all []string
		for _, id := range order {
			all = append(all, want[id]...)
		}
		jobs, err := l.store.JobListWaiting(ctx, &dag.WaitingListParams{})
		require.NoError(t, err)
		require.Equal(t, all, waitingKeys(jobs), "runs by ID, jobs in plan order")
		require.Equal(t, "true", jobs[0].Spec.Steps[0].Run, "the spec is whole")

		// Pages of one, each after the last job of the one before.
		var paged []string
		p := &dag.WaitingListParams{Limit: 1}
		for range 10 {
			page, err := l.store.JobListWaiting(ctx, p)
			require.NoError(t, err)
			paged = append(paged, waitingKeys(page)...)
			if len(page) < p.Limit {
				break
			}
			k := page[0].Key()
			p.After = &k
		}
		require.Equal(t, all, paged)

		jobs, err = l.store.JobListWaiting(ctx, &dag.WaitingListParams{CreatedSince: second.CreatedAt})
		require.NoError(t, err)
		require.Equal(t, want[second.ID], waitingKeys(jobs), "only the runs created since")

		jobs, err = l.store.JobListWaiting(ctx, &dag.WaitingListParams{After: &dag.JobKey{RunID: first.run.ID, JobID: "no-such-job"}})
		require.NoError(t, err)
		require.Equal(t, all[slices.Index(all, want[first.run.ID][0]):], waitingKeys(jobs), "an unknown job comes before its run's jobs")

		for _, bad := range []*dag.WaitingListParams{{Limit: -1}, {Limit: dag.MaxWaitingListLimit + 1}, {After: &dag.JobKey{RunID: "a\x00"}}} {
			_, err := l.store.JobListWaiting(ctx, bad)
			require.ErrorIs(t, err, dag.ErrInvalidParams, "%+v", bad)
		}
	})
}
