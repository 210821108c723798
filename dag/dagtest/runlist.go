package dagtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// setClock is a clock that stands still until set, so that runs can be
// created at the same instant.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *setClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// listed is a store whose runs are created at chosen instants, for
// RunList.
type listed struct {
	store dag.Store
	clock *setClock
	base  time.Time
}

func newListed(t *testing.T, factory Factory) *listed {
	c := &setClock{}
	return &listed{store: factory(t, c.now), clock: c, base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// create creates a run of pl and branch at base+sec.
func (l *listed) create(t *testing.T, sec int, pl, branch string) *dag.Run {
	t.Helper()
	l.clock.set(l.base.Add(time.Duration(sec) * time.Second))
	run, err := l.store.RunCreate(context.Background(), &dag.RunCreateParams{
		Jobs: pipeline(), Pipeline: pl, Branch: branch, SHA: "sha-" + branch, Supersede: dag.SupersedeNever,
	})
	require.NoError(t, err)
	return run
}

// list calls RunList.
func (l *listed) list(t *testing.T, p dag.RunListParams) []*dag.Run {
	t.Helper()
	runs, err := l.store.RunList(context.Background(), &p)
	require.NoError(t, err)
	return runs
}

// all pages through RunList with p, following each page's last cursor,
// and returns the IDs in order and the size of each page.
func (l *listed) all(t *testing.T, p dag.RunListParams) (ids []string, pages []int) {
	t.Helper()
	for range 100 {
		runs := l.list(t, p)
		pages = append(pages, len(runs))
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if len(runs) < p.Limit || len(runs) == 0 {
			return ids, pages
		}
		p.Before = runs[len(runs)-1].Cursor()
	}
	t.Fatal("RunList pages without end")
	return nil, nil
}

func ids(runs []*dag.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// newestFirst returns the IDs of runs in the list's order: creation time
// descending, then ID descending.
func newestFirst(runs ...*dag.Run) []string {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b *dag.Run) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return ids(sorted)
}

func exerciseRunList(t *testing.T, factory Factory) {
	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		l := newListed(t, factory)
		// Three runs at the same instant: their IDs decide.
		runs := []*dag.Run{
			l.create(t, 1, "acme/api:.cikit.yml", "main"),
			l.create(t, 2, "acme/api:.cikit.yml", "main"),
			l.create(t, 2, "acme/api:.cikit.yml", "main"),
			l.create(t, 2, "acme/api:.cikit.yml", "main"),
			l.create(t, 3, "acme/api:.cikit.yml", "main"),
		}
		got := l.list(t, dag.RunListParams{})
		require.Equal(t, newestFirst(runs...), ids(got), "creation time descending, then ID descending")
		require.Equal(t, runs[4].ID, got[0].ID)
		require.Equal(t, runs[0].ID, got[4].ID)
		for _, r := range got {
			want, err := l.store.RunGet(context.Background(), r.ID)
			require.NoError(t, err)
			require.Equal(t, want, r, "a listed run is the run RunGet returns")
		}
		require.Equal(t, "sha-main", got[0].SHA)

		got = l.list(t, dag.RunListParams{Limit: 2})
		require.Equal(t, newestFirst(runs...)[:2], ids(got), "at most Limit runs, the newest")

		empty := newListed(t, factory)
		require.Empty(t, empty.list(t, dag.RunListParams{}), "no runs, an empty list")
	})

	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		l := newListed(t, factory)
		var runs []*dag.Run
		for _, sec := range []int{1, 2, 2, 2, 2, 3, 4} {
			runs = append(runs, l.create(t, sec, "", ""))
		}
		want := newestFirst(runs...)
		for limit := 1; limit <= 8; limit++ {
			got, pages := l.all(t, dag.RunListParams{Limit: limit})
			require.Equal(t, want, got, "limit %d: the pages hold every run once, in order, across runs created at one instant", limit)
			for _, n := range pages[:len(pages)-1] {
				require.Equal(t, limit, n, "limit %d: every page but the last is full", limit)
			}
		}

		// A cursor is a position, whether or not a run is there.
		at2 := l.base.Add(2 * time.Second)
		got := l.list(t, dag.RunListParams{Before: &dag.RunCursor{CreatedAt: at2}})
		require.Equal(t, []string{runs[0].ID}, ids(got), "before the smallest ID of an instant: only earlier runs")
		got = l.list(t, dag.RunListParams{Before: &dag.RunCursor{CreatedAt: at2, ID: "\U0010FFFF"}})
		require.Equal(t, want[2:], ids(got), "before the largest ID of an instant: that instant's runs and earlier ones")
		got = l.list(t, dag.RunListParams{Before: &dag.RunCursor{CreatedAt: l.base.Add(time.Hour), ID: "x"}})
		require.Equal(t, want, ids(got))
		got = l.list(t, dag.RunListParams{Before: runs[0].Cursor()})
		require.Empty(t, got, "nothing after the oldest run")
	})

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		l := newListed(t, factory)
		api, web := "acme/api:.cikit.yml", "acme/web:.cikit.yml"
		a1 := l.create(t, 1, api, "main")
		a2 := l.create(t, 2, api, "feature")
		w1 := l.create(t, 3, web, "main")
		a3 := l.create(t, 4, api, "main")
		w2 := l.create(t, 4, web, "feature")
		n1 := l.create(t, 5, "", "")

		require.Equal(t, newestFirst(a1, a2, a3), ids(l.list(t, dag.RunListParams{Pipeline: api})))
		require.Equal(t, newestFirst(a1, w1, a3), ids(l.list(t, dag.RunListParams{Branch: "main"})))
		require.Equal(t, newestFirst(a1, a3), ids(l.list(t, dag.RunListParams{Pipeline: api, Branch: "main"})))
		require.Equal(t, newestFirst(a1, a2, w1, a3, w2, n1), ids(l.list(t, dag.RunListParams{})))
		require.Empty(t, l.list(t, dag.RunListParams{Pipeline: "acme/api"}), "the pipeline is compared exactly")
		require.Empty(t, l.list(t, dag.RunListParams{Branch: "mai"}), "the branch is compared exactly")

		got, pages := l.all(t, dag.RunListParams{Limit: 1, Pipeline: api})
		require.Equal(t, newestFirst(a1, a2, a3), got, "paging within a filter")
		require.Equal(t, []int{1, 1, 1, 0}, pages)
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		l := newListed(t, factory)
		l.create(t, 1, "", "")
		for _, p := range []dag.RunListParams{
			{Limit: -1},
			{Limit: dag.MaxRunListLimit + 1},
			{Before: &dag.RunCursor{ID: "x"}},
			{Before: &dag.RunCursor{CreatedAt: l.base, ID: "\xff"}},
			{Pipeline: "a\x00b"},
			{Branch: "\xfe"},
		} {
			_, err := l.store.RunList(context.Background(), &p)
			require.ErrorIs(t, err, dag.ErrInvalidParams, "%+v", p)
			require.NotErrorIs(t, err, cikit.ErrNotFound)
		}
		require.Len(t, l.list(t, dag.RunListParams{Limit: dag.MaxRunListLimit}), 1, "the largest limit is valid")
	})
}
