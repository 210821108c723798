package expr

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cikit/cikit/internal/typo"
)

// Problem is a certain mistake in an expression, found without evaluating
// it. Offset is a byte offset into the parsed source.
type Problem struct {
	Offset int
	Msg    string
}

// CheckGitHub reports what is certainly wrong in a GitHub expression,
// wherever it is (also where evaluation would not reach): calls of unknown
// functions, calls with the wrong number of arguments, and, when known is
// not nil, contexts not in known (whose keys are context names, matched
// ignoring case). Messages suggest the nearest function or context name.
// Problems come sorted by offset.
//
// Which contexts and functions are allowed depends on where an expression
// is written (status functions only in if:, for one); the caller says
// which contexts through known, and checks the function names it restricts
// itself, from the Call nodes.
func CheckGitHub(n Node, known map[string]bool) []Problem {
	var out []Problem
	var names []string // known, sorted, built on first need
	walk(n, func(n Node) {
		switch n := n.(type) {
		case *Call:
			f := lookupFunc(n.Name)
			if f == nil {
				out = append(out, Problem{n.Offset, unknownFuncMsg(n.Name)})
			} else if msg := arityMsg(f, len(n.Args)); msg != "" {
				out = append(out, Problem{n.Offset, msg})
			}
		case *Context:
			if known == nil || known[strings.ToLower(n.Name)] {
				return
			}
			for k, ok := range known {
				if ok && foldEqual(k, n.Name) {
					return
				}
			}
			if names == nil {
				names = make([]string, 0, len(known))
				for k, ok := range known {
					if ok {
						names = append(names, k)
					}
				}
			}
			out = append(out, Problem{n.Offset, unknownContextMsg(n.Name, names)})
		}
	})
	slices.SortStableFunc(out, func(a, b Problem) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// unknownContextMsg is the message for a context name that is not
// available, with the nearest available one and the list.
func unknownContextMsg(name string, available []string) string {
	available = slices.Clone(available)
	slices.Sort(available)
	msg := fmt.Sprintf("unknown context %q", name)
	if s := suggest(strings.ToLower(name), available); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	if len(available) == 0 {
		return msg + " (no contexts are available here)"
	}
	return msg + " (available: " + strings.Join(available, ", ") + ")"
}

// walk calls f for n and every node below it, in source order.
func walk(n Node, f func(Node)) {
	if n == nil {
		return
	}
	switch x := n.(type) {
	case *Property:
		walk(x.X, f)
		f(n)
	case *Index:
		walk(x.X, f)
		f(n)
		walk(x.Index, f)
	case *Not:
		f(n)
		walk(x.X, f)
	case *Binary:
		walk(x.X, f)
		f(n)
		walk(x.Y, f)
	case *Call:
		f(n)
		for _, a := range x.Args {
			walk(a, f)
		}
	case *GitLabBinary:
		walk(x.X, f)
		f(n)
		walk(x.Y, f)
	default:
		f(n)
	}
}

// Ref is a use of a context: a chain of property accesses and indexes
// that starts at a context name. Path holds the context name and the
// properties, lower-cased; an index by a string literal counts as the
// property it names (matrix['os'] is matrix.os), and any other index, or
// an object filter, is "*". Offset is that of the context name.
type Ref struct {
	Offset int
	Path   []string
}

// String joins the path with dots, as in needs.build.outputs.version.
func (r Ref) String() string { return strings.Join(r.Path, ".") }

// References lists every context use in a GitHub expression, each with
// its longest chain (github.event.ref once, not also github and
// github.event), in source order. Indexes by non-literal expressions end
// their chain with "*" and are themselves searched for references.
func References(n Node) []Ref {
	var out []Ref
	// Chains are visited from their outermost access; the nodes below it
	// are part of its chain and not chains of their own.
	var visit func(n Node)
	visit = func(n Node) {
		switch x := n.(type) {
		case *Property, *Index:
			var path []string
			var indexes []Node
			cur := n
		chain:
			for {
				switch c := cur.(type) {
				case *Property:
					path = append(path, strings.ToLower(c.Name))
					cur = c.X
				case *Index:
					if lit, ok := c.Index.(*Literal); ok {
						if s, ok := lit.Value.(string); ok {
							path = append(path, strings.ToLower(s))
							cur = c.X
							continue
						}
					}
					path = append(path, "*")
					if c.Index != nil {
						indexes = append(indexes, c.Index)
					}
					cur = c.X
				default:
					break chain
				}
			}
			if ctx, ok := cur.(*Context); ok {
				path = append(path, strings.ToLower(ctx.Name))
				slices.Reverse(path)
				out = append(out, Ref{Offset: ctx.Offset, Path: path})
			} else {
				visit(cur)
			}
			for _, i := range indexes {
				visit(i)
			}
		case *Context:
			out = append(out, Ref{Offset: x.Offset, Path: []string{strings.ToLower(x.Name)}})
		case *Not:
			visit(x.X)
		case *Binary:
			visit(x.X)
			visit(x.Y)
		case *Call:
			for _, a := range x.Args {
				visit(a)
			}
		}
	}
	visit(n)
	slices.SortStableFunc(out, func(a, b Ref) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// UsesStatus reports whether a GitHub expression calls one of the status
// functions (success, failure, cancelled, always). GitHub runs a job or
// step whose if: has none only when earlier ones succeeded, as if the
// condition were success() && (…); the caller applies that rule.
func UsesStatus(n Node) bool {
	found := false
	walk(n, func(n Node) {
		if c, ok := n.(*Call); ok {
			switch strings.ToLower(c.Name) {
			case "success", "failure", "cancelled", "always":
				found = true
			}
		}
	})
	return found
}

// suggest returns the candidate nearest to name, ignoring case as
// expressions do, or "" when none is a likely typo.
func suggest(name string, candidates []string) string {
	return typo.Nearest(name, candidates, true, nil)
}
