package dag_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func nodes(pairs ...any) []dag.Node {
	// pairs: id, []string needs, id, needs ...
	var ns []dag.Node
	for i := 0; i < len(pairs); i += 2 {
		n := dag.Node{ID: pairs[i].(string)}
		if pairs[i+1] != nil {
			n.Needs = pairs[i+1].([]string)
		}
		ns = append(ns, n)
	}
	return ns
}

func ids(g *dag.Graph, idx []int) []string {
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = g.Node(n).ID
	}
	return out
}

func TestNewGraphRejects(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		nodes []dag.Node
		cycle []string
	}{
		"empty id":     {nodes: nodes("", nil)},
		"duplicate id": {nodes: nodes("a", nil, "a", nil)},
		"unknown need": {nodes: nodes("a", []string{"b"})},
		"self":         {nodes: nodes("a", []string{"a"}), cycle: []string{"a", "a"}},
		"three":        {nodes: nodes("a", []string{"c"}, "b", []string{"a"}, "c", []string{"b"}), cycle: []string{"a", "c", "b", "a"}},
		"behind a root": {nodes: nodes("r", nil, "x", []string{"r", "y"}, "y", []string{"x"}),
			cycle: []string{"x", "y", "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := dag.NewGraph(tc.nodes)
			require.ErrorIs(t, err, dag.ErrInvalidGraph)
			var ce *dag.CycleError
			if tc.cycle == nil {
				require.False(t, errors.As(err, &ce), "unexpected cycle error %v", err)
				return
			}
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.cycle, ce.Cycle)
			// The cycle must be a real one: each member needs the next.
			for i := 0; i+1 < len(ce.Cycle); i++ {
				require.Contains(t, needsOf(tc.nodes, ce.Cycle[i]), ce.Cycle[i+1])
			}
		})
	}
}

func needsOf(ns []dag.Node, id string) []string {
	for _, n := range ns {
		if n.ID == id {
			return n.Needs
		}
	}
	return nil
}

func TestGraphOrderAndCriticalPath(t *testing.T) {
	t.Parallel()
	// integration needs unit and lint, which need build; docs is alone.
	g, err := dag.NewGraph(nodes(
		"integration", []string{"unit", "lint", "unit"},
		"docs", nil,
		"lint", []string{"build"},
		"unit", []string{"build"},
		"build", nil,
	))
	require.NoError(t, err)
	require.Equal(t, []string{"docs", "build", "lint", "unit", "integration"}, ids(g, g.Order()))
	require.Len(t, g.Parents(0), 2, "duplicate needs collapse")

	dur := map[string]time.Duration{"build": 3, "unit": 5, "lint": 2, "integration": 1, "docs": 8}
	path, total := g.CriticalPath(func(i int) time.Duration { return dur[g.Node(i).ID] })
	require.Equal(t, []string{"build", "unit", "integration"}, ids(g, path))
	require.Equal(t, time.Duration(9), total)

	dur["docs"] = 10
	path, total = g.CriticalPath(func(i int) time.Duration { return dur[g.Node(i).ID] })
	require.Equal(t, []string{"docs"}, ids(g, path))
	require.Equal(t, time.Duration(10), total)
}

func TestFromSpecs(t *testing.T) {
	t.Parallel()
	g, err := dag.FromSpecs([]*cikit.JobSpec{
		{ID: "a"}, {ID: "b", Needs: []string{"a"}, AllowFailure: true},
	})
	require.NoError(t, err)
	require.True(t, g.Node(1).AllowFailure)
	require.Equal(t, []int{1}, g.Children(0))
	_, err = dag.FromSpecs([]*cikit.JobSpec{{ID: "a", Needs: []string{"zz"}}})
	require.ErrorIs(t, err, dag.ErrInvalidGraph)
}

func TestGraphWidthAndLevels(t *testing.T) {
	t.Parallel()
	g, err := dag.NewGraph(nodes(
		"build", nil,
		"unit", []string{"build"},
		"lint", []string{"build"},
		"docs", nil,
		"integration", []string{"unit", "lint"},
	))
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 1, 0, 2}, g.Levels())
	w, set := g.Width()
	require.Equal(t, 3, w, "unit, lint and docs can run together")
	require.Equal(t, []string{"unit", "lint", "docs"}, ids(g, set))

	// A chain has width 1; an empty graph 0.
	chain, err := dag.NewGraph(nodes("a", nil, "b", []string{"a"}, "c", []string{"b"}))
	require.NoError(t, err)
	w, set = chain.Width()
	require.Equal(t, 1, w)
	require.Len(t, set, 1)
	empty, err := dag.NewGraph(nil)
	require.NoError(t, err)
	w, _ = empty.Width()
	require.Equal(t, 0, w)
}
