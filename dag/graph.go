package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// Node is one job as the graph sees it: an identity, the jobs it needs and
// whether its failure blocks the jobs that need it.
type Node struct {
	ID           string
	Needs        []string
	AllowFailure bool
	// Never marks a job that must not run: its condition was decided
	// false when the pipeline was compiled (JobSpec.When "never"). It
	// starts SKIPPED, and so do the jobs that need it.
	Never bool
	// When is WhenAlways for a job that runs once its needs end whatever
	// their outcome, WhenOnFailure for one that runs only if one of them
	// did not succeed; WhenManual for one that, its needs satisfied,
	// waits MANUAL for a person to start it, WhenDelayed for one that
	// waits DELAYED for its StartIn (see Arrival); anything else means on
	// success.
	When cikit.When
	// Expand marks the placeholder of a run-time matrix
	// (cikit.JobSpec.Expand): a job never dispatched, which a store
	// expands into its variants once its needs are satisfied and which
	// ends as they all have (see Expanded).
	Expand bool
	// Gated marks a job held by an approval gate (cikit.JobSpec.Gate):
	// whatever its When, its needs satisfied, it waits MANUAL for a
	// person to approve it (EventPlay) or reject it (EventReject).
	Gated bool
	// DelayedAfterApproval marks a gated job that waits DELAYED once
	// approved, for its gate's WaitTimer and, of When delayed, its
	// StartIn, instead of becoming READY at once.
	DelayedAfterApproval bool
	// Denied marks a job the platform's policy denied
	// (cikit.DecisionDeny): it starts FAILED, with the consequences of a
	// failure, and is never retried.
	Denied bool
	// VariantOf, for a variant a store added to its run by expanding a
	// placeholder, names that placeholder. The graph makes the
	// placeholder need each of its variants: it ends once they have.
	VariantOf string
}

// Graph is an immutable, validated job graph: IDs are unique, every need
// names a node, and there is no cycle. Nodes are addressed by their index,
// which is their position in the slice given to NewGraph.
type Graph struct {
	nodes    []Node
	index    map[string]int
	parents  [][]int
	children [][]int
	order    []int   // a topological order, stable with respect to node order
	rank     []int   // rank[i] is node i's position in order
	variants [][]int // variants[i] are placeholder i's variants, in node order
	// allowed, when set, overrides the nodes' AllowFailure with what a
	// run recorded of its jobs' failures (see withJobs).
	allowed func(i int) bool
}

// allowsFailure reports whether job i, FAILED, lets the jobs that need it
// run and stays out of the run's status: as the run recorded it when g
// was made by withJobs, else as its node says.
func (g *Graph) allowsFailure(i int) bool {
	if g.allowed != nil {
		return g.allowed(i)
	}
	return g.nodes[i].AllowFailure
}

// withAllowed returns a copy of g whose allowsFailure answers with
// allowed; g is unchanged, and the copy shares its immutable parts.
func (g *Graph) withAllowed(allowed func(i int) bool) *Graph {
	c := *g
	c.allowed = allowed
	return &c
}

// withJobs is g deciding failures as jobs (a run's, indexed like g's
// nodes) record them (Job.FailureAllowed): a failure limited to exit
// codes may be allowed in one attempt and not in another. A job not read
// (nil) answers by its node.
func (g *Graph) withJobs(jobs []*Job) *Graph {
	return g.withAllowed(func(i int) bool {
		if j := jobs[i]; j != nil {
			return j.FailureAllowed
		}
		return g.nodes[i].AllowFailure
	})
}

// CycleError reports a dependency cycle. Cycle lists the members in need
// order and repeats the first at the end: a needs b needs c needs a is
// [a b c a].
type CycleError struct{ Cycle []string }

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Cycle, " -> ")
}

// ErrInvalidGraph is matched by every error NewGraph returns.
var ErrInvalidGraph = errors.New("invalid job graph")

// Is makes errors.Is(err, ErrInvalidGraph) true for a cycle.
func (e *CycleError) Is(target error) bool { return target == ErrInvalidGraph }

// NewGraph validates nodes and builds their graph. Duplicate needs are
// collapsed. Errors match ErrInvalidGraph; a cycle is a *CycleError.
func NewGraph(nodes []Node) (*Graph, error) {
	g := &Graph{
		nodes:    slices.Clone(nodes),
		index:    make(map[string]int, len(nodes)),
		parents:  make([][]int, len(nodes)),
		children: make([][]int, len(nodes)),
		variants: make([][]int, len(nodes)),
	}
	for i, n := range nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("%w: node %d has an empty ID", ErrInvalidGraph, i)
		}
		if _, dup := g.index[n.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate job ID %q", ErrInvalidGraph, n.ID)
		}
		g.index[n.ID] = i
	}
	for i, n := range nodes {
		for _, need := range n.Needs {
			p, ok := g.index[need]
			if !ok {
				return nil, fmt.Errorf("%w: job %q needs unknown job %q", ErrInvalidGraph, n.ID, need)
			}
			if slices.Contains(g.parents[i], p) {
				continue
			}
			g.parents[i] = append(g.parents[i], p)
			g.children[p] = append(g.children[p], i)
		}
	}
	for i, n := range nodes {
		if n.VariantOf == "" {
			continue
		}
		p, ok := g.index[n.VariantOf]
		if !ok || !nodes[p].Expand {
			return nil, fmt.Errorf("%w: job %q is a variant of %q, which is not a job to expand", ErrInvalidGraph, n.ID, n.VariantOf)
		}
		if n.Expand {
			return nil, fmt.Errorf("%w: job %q is a variant of %q and has a matrix to expand itself", ErrInvalidGraph, n.ID, n.VariantOf)
		}
		if !slices.Contains(g.parents[p], i) {
			g.parents[p] = append(g.parents[p], i)
			g.children[i] = append(g.children[i], p)
		}
		g.variants[p] = append(g.variants[p], i)
	}
	if cyc := g.findCycle(); cyc != nil {
		return nil, &CycleError{Cycle: cyc}
	}
	g.order = g.topoOrder()
	g.rank = make([]int, len(g.order))
	for r, i := range g.order {
		g.rank[i] = r
	}
	return g, nil
}

// descendants returns the nodes that need node i, directly or through
// others, in topological order: what i's end may change.
func (g *Graph) descendants(i int) []int {
	seen := map[int]bool{i: true}
	var out []int
	queue := []int{i}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, c := range g.children[n] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b int) int { return g.rank[a] - g.rank[b] })
	return out
}

// findCycle returns the first cycle found by a depth-first search in node
// order, as IDs with the first repeated at the end, or nil.
func (g *Graph) findCycle() []string {
	const (
		unvisited = iota
		onStack
		done
	)
	mark := make([]int, len(g.nodes))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		mark[i] = onStack
		stack = append(stack, i)
		for _, p := range g.parents[i] {
			switch mark[p] {
			case onStack:
				// The stack from p to i is a chain of "needs"; p needs
				// nothing on it yet, i needs p: the cycle in need order
				// starts at p's position.
				start := slices.Index(stack, p)
				for _, n := range stack[start:] {
					cycle = append(cycle, g.nodes[n].ID)
				}
				cycle = append(cycle, g.nodes[p].ID)
				return true
			case unvisited:
				if visit(p) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		return false
	}
	for i := range g.nodes {
		if mark[i] == unvisited && visit(i) {
			return cycle
		}
	}
	return nil
}

// topoOrder is Kahn's algorithm, taking ready nodes in index order so the
// result is deterministic and close to file order.
func (g *Graph) topoOrder() []int {
	indeg := make([]int, len(g.nodes))
	for i := range g.nodes {
		indeg[i] = len(g.parents[i])
	}
	order := make([]int, 0, len(g.nodes))
	var ready []int
	for i, d := range indeg {
		if d == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, c := range g.children[n] {
			indeg[c]--
			if indeg[c] == 0 {
				// Keep ready sorted by index.
				pos, _ := slices.BinarySearch(ready, c)
				ready = slices.Insert(ready, pos, c)
			}
		}
	}
	return order
}

// Len returns the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Node returns node i.
func (g *Graph) Node(i int) Node { return g.nodes[i] }

// Index returns the index of the node with the given ID.
func (g *Graph) Index(id string) (int, bool) {
	i, ok := g.index[id]
	return i, ok
}

// Variants returns the indexes of the variants of placeholder i, which
// its store added to the run: none before it was expanded. The slice
// must not be modified.
func (g *Graph) Variants(i int) []int { return g.variants[i] }

// Expanded reports whether node i is a placeholder that was expanded:
// it waits for its variants, which it needs, and ends as they have (see
// Next).
func (g *Graph) Expanded(i int) bool { return len(g.variants[i]) > 0 }

// Parents returns the indexes of the nodes that node i needs. The slice
// must not be modified.
func (g *Graph) Parents(i int) []int { return g.parents[i] }

// Children returns the indexes of the nodes that need node i. The slice
// must not be modified.
func (g *Graph) Children(i int) []int { return g.children[i] }

// Order returns the nodes in a topological order: every node after all the
// nodes it needs, ties broken by index. The slice must not be modified.
func (g *Graph) Order() []int { return g.order }

// CriticalPath returns the longest chain of needs through the graph when
// node i takes weight(i), and that chain's total weight. It is the least
// wall-clock time the run can take with unlimited executors. Ties go to
// the chain found first in topological order.
func (g *Graph) CriticalPath(weight func(i int) time.Duration) ([]int, time.Duration) {
	if len(g.nodes) == 0 {
		return nil, 0
	}
	finish := make([]time.Duration, len(g.nodes))
	via := make([]int, len(g.nodes))
	end := -1
	for _, n := range g.order {
		via[n] = -1
		var start time.Duration
		for _, p := range g.parents[n] {
			if finish[p] > start || via[n] == -1 && finish[p] == start {
				start, via[n] = finish[p], p
			}
		}
		finish[n] = start + weight(n)
		if end == -1 || finish[n] > finish[end] {
			end = n
		}
	}
	var path []int
	for n := end; n != -1; n = via[n] {
		path = append(path, n)
	}
	slices.Reverse(path)
	return path, finish[end]
}

// FromSpecs builds the graph of compiled jobs, in their order. A job
// whose MatrixOf names a job to expand (JobSpec.Expand) in specs is a
// variant of that placeholder (Node.VariantOf); a static matrix's
// variants name a job as written that is not one of specs, and a
// placeholder, which names itself (as the compiler writes it), is no
// variant.
func FromSpecs(specs []*cikit.JobSpec) (*Graph, error) {
	nodes := make([]Node, len(specs))
	expand := make(map[string]bool)
	for _, s := range specs {
		if s.Expand != nil {
			expand[s.ID] = true
		}
	}
	for i, s := range specs {
		nodes[i] = Node{ID: s.ID, Needs: s.Needs, AllowFailure: s.AllowFailure, Never: s.When == cikit.WhenNever, When: s.When,
			Expand: s.Expand != nil, Gated: s.Gate != nil, DelayedAfterApproval: s.Gate != nil && approvalDelay(s) > 0, Denied: denied(s)}
		if s.Expand == nil && s.MatrixOf != "" && expand[s.MatrixOf] {
			nodes[i].VariantOf = s.MatrixOf
		}
	}
	return NewGraph(nodes)
}

// Levels assigns every node its depth: 0 for a node that needs nothing,
// else one more than the deepest node it needs. Nodes of one level never
// need each other.
func (g *Graph) Levels() []int {
	level := make([]int, len(g.nodes))
	for _, n := range g.order {
		for _, p := range g.parents[n] {
			level[n] = max(level[n], level[p]+1)
		}
	}
	return level
}

// Width returns the most jobs of the graph that can run at the same time
// (the largest set of nodes none of which needs another, directly or
// transitively), and one such set. With unlimited executors a run reaches
// it at some moment only if durations line up, but no run can exceed it.
//
// By Dilworth's theorem the width equals the least number of chains that
// cover the graph: n minus a maximum matching in the bipartite graph of
// the transitive closure. It costs O(n³/64) for the closure and
// O(n·edges) for the matching, fine for pipelines of a few thousand jobs.
func (g *Graph) Width() (int, []int) {
	n := len(g.nodes)
	if n == 0 {
		return 0, nil
	}
	// reach[i] has bit j set when j needs i, directly or transitively.
	words := (n + 63) / 64
	reach := make([][]uint64, n)
	for k := len(g.order) - 1; k >= 0; k-- {
		i := g.order[k]
		reach[i] = make([]uint64, words)
		for _, c := range g.children[i] {
			reach[i][c/64] |= 1 << (c % 64)
			for w := range words {
				reach[i][w] |= reach[c][w]
			}
		}
	}
	has := func(i, j int) bool { return reach[i][j/64]&(1<<(j%64)) != 0 }

	// Maximum bipartite matching (left i -> right j when i precedes j) by
	// augmenting paths.
	matchR := make([]int, n) // right j -> left i, or -1
	matchL := make([]int, n)
	for i := range matchR {
		matchR[i], matchL[i] = -1, -1
	}
	var seen []bool
	var try func(i int) bool
	try = func(i int) bool {
		for j := range n {
			if !has(i, j) || seen[j] {
				continue
			}
			seen[j] = true
			if matchR[j] == -1 || try(matchR[j]) {
				matchR[j], matchL[i] = i, j
				return true
			}
		}
		return false
	}
	matching := 0
	for i := range n {
		seen = make([]bool, n)
		if try(i) {
			matching++
		}
	}

	// König: from the unmatched left vertices, alternate along
	// non-matching then matching edges. The minimum vertex cover is the
	// unvisited left plus the visited right; a node in neither side of
	// the cover belongs to a maximum antichain.
	visitL := make([]bool, n)
	visitR := make([]bool, n)
	var walk func(i int)
	walk = func(i int) {
		visitL[i] = true
		for j := range n {
			if has(i, j) && !visitR[j] && matchL[i] != j {
				visitR[j] = true
				if l := matchR[j]; l != -1 && !visitL[l] {
					walk(l)
				}
			}
		}
	}
	for i := range n {
		if matchL[i] == -1 {
			walk(i)
		}
	}
	var antichain []int
	for i := range n {
		if visitL[i] && !visitR[i] {
			antichain = append(antichain, i)
		}
	}
	return n - matching, antichain
}
