package expr_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/cikit/cikit/compiler/expr"
)

var keywords = []string{"true", "false", "null", "NaN", "Infinity"}

// genName draws a GitHub name that is not a keyword, in mixed case.
func genName() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		first := rapid.SampledFrom([]byte("abcxyzABCXYZ_")).Draw(t, "first")
		rest := rapid.SliceOfN(rapid.SampledFrom([]byte("abzAZ09_-")), 0, 6).Draw(t, "rest")
		return string(first) + string(rest)
	}).Filter(func(s string) bool {
		for _, k := range keywords {
			if s == k {
				return false
			}
		}
		return true
	})
}

func genLiteral() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.SampledFrom([]float64{0, math.Copysign(0, -1), -1, 0.5, 1e21, 1e-7, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64}), func(f float64) any { return f }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.SampledFrom([]string{"", "'", "''", "}}", "${{ x }}", "a'b", "\n"}), func(s string) any { return s }),
	)
}

var binaryOps = []expr.Op{expr.OpOr, expr.OpAnd, expr.OpEq, expr.OpNe, expr.OpLt, expr.OpLe, expr.OpGt, expr.OpGe}

// drawGitHub draws a GitHub syntax tree at most depth levels deep. Offsets
// are left zero; they are not part of what is compared.
func drawGitHub(t *rapid.T, depth int) expr.Node {
	kinds := 3
	if depth > 0 {
		kinds = 8
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return &expr.Literal{Value: genLiteral().Draw(t, "literal")}
	case 1:
		return &expr.Context{Name: genName().Draw(t, "context")}
	case 2:
		name := rapid.OneOf(genName(), rapid.SampledFrom([]string{"format", "contains", "toJSON", "ALWAYS"})).Draw(t, "function")
		c := &expr.Call{Name: name}
		if depth > 0 {
			for range rapid.IntRange(0, 3).Draw(t, "args") {
				c.Args = append(c.Args, drawGitHub(t, depth-1))
			}
		}
		return c
	case 3:
		name := rapid.OneOf(genName(), rapid.SampledFrom(append([]string{"*"}, keywords...))).Draw(t, "property")
		return &expr.Property{X: drawGitHub(t, depth-1), Name: name}
	case 4:
		var index expr.Node
		if rapid.Bool().Draw(t, "star") {
			index = nil
		} else {
			index = drawGitHub(t, depth-1)
		}
		return &expr.Index{X: drawGitHub(t, depth-1), Index: index}
	case 5:
		return &expr.Not{X: drawGitHub(t, depth-1)}
	default:
		op := rapid.SampledFrom(binaryOps).Draw(t, "op")
		return &expr.Binary{Op: op, X: drawGitHub(t, depth-1), Y: drawGitHub(t, depth-1)}
	}
}

// TestGitHubPrintParse is the parser's round-trip property: for any tree,
// String prints source that ParseGitHub reads back into the same tree
// (offsets aside), and printing that again gives the same text.
func TestGitHubPrintParse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		want := drawGitHub(t, 5)
		src := want.String()
		got, err := expr.ParseGitHub(src)
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		if diff := cmp.Diff(want, got, treeOpts); diff != "" {
			t.Fatalf("%q parses to another tree (-want +got):\n%s", src, diff)
		}
		if again := got.String(); again != src {
			t.Fatalf("printed %q, then %q", src, again)
		}
		checkOffsets(t, got, src)
	})
}

// checkOffsets asserts that every node of n lies within src, and that a
// node starts no later than its own token.
func checkOffsets(t interface{ Fatalf(string, ...any) }, n expr.Node, src string) {
	var visit func(n expr.Node)
	visit = func(n expr.Node) {
		if n == nil {
			return
		}
		var off int
		switch x := n.(type) {
		case *expr.Literal:
			off = x.Offset
		case *expr.Context:
			off = x.Offset
		case *expr.Property:
			off = x.Offset
			visit(x.X)
		case *expr.Index:
			off = x.Offset
			visit(x.X)
			visit(x.Index)
		case *expr.Not:
			off = x.Offset
			visit(x.X)
		case *expr.Binary:
			off = x.Offset
			visit(x.X)
			visit(x.Y)
		case *expr.Call:
			off = x.Offset
			for _, a := range x.Args {
				visit(a)
			}
		case *expr.GitLabVar:
			off = x.Offset
		case *expr.GitLabString:
			off = x.Offset
		case *expr.GitLabNull:
			off = x.Offset
		case *expr.GitLabRegexp:
			off = x.Offset
		case *expr.GitLabBinary:
			off = x.Offset
			visit(x.X)
			visit(x.Y)
		}
		if off < 0 || off >= len(src) || n.Pos() > off || n.Pos() < 0 {
			t.Fatalf("%T at offset %d, starting at %d, in %q", n, off, n.Pos(), src)
		}
	}
	visit(n)
}

// genGitLabString draws a string GitLab can write: one line, and not
// holding both kinds of quote.
func genGitLabString() *rapid.Generator[string] {
	return rapid.String().Filter(func(s string) bool {
		return !strings.Contains(s, "\n") && !(strings.Contains(s, `"`) && strings.Contains(s, "'"))
	})
}

func drawGitLabOperand(t *rapid.T) expr.Node {
	switch rapid.IntRange(0, 2).Draw(t, "operand") {
	case 0:
		name := rapid.StringMatching(`[A-Za-z0-9_]{1,8}`).Draw(t, "var")
		return &expr.GitLabVar{Name: name, Braced: rapid.Bool().Draw(t, "braced")}
	case 1:
		return &expr.GitLabString{Value: genGitLabString().Draw(t, "string")}
	}
	return &expr.GitLabNull{}
}

func drawGitLab(t *rapid.T, depth int) expr.Node {
	kinds := 2
	if depth > 0 {
		kinds = 3
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return drawGitLabOperand(t)
	case 1:
		op := rapid.SampledFrom([]expr.Op{expr.OpEq, expr.OpNe, expr.OpMatch, expr.OpNotMatch}).Draw(t, "cmp")
		var y expr.Node
		if (op == expr.OpMatch || op == expr.OpNotMatch) && rapid.Bool().Draw(t, "regexp") {
			y = &expr.GitLabRegexp{
				Pattern: rapid.SampledFrom([]string{"^main$", `^v\d+\.\d+`, `a\/b`, "[a-z]+", `\\d`, "x|y", "(?i)abc"}).Draw(t, "pattern"),
				Flags:   rapid.StringMatching(`[imsU]{0,3}`).Draw(t, "flags"),
			}
		} else {
			y = drawGitLabOperand(t)
		}
		return &expr.GitLabBinary{Op: op, X: drawGitLabOperand(t), Y: y}
	}
	op := rapid.SampledFrom([]expr.Op{expr.OpAnd, expr.OpOr}).Draw(t, "logic")
	return &expr.GitLabBinary{Op: op, X: drawGitLab(t, depth-1), Y: drawGitLab(t, depth-1)}
}

// TestGitLabPrintParse is the GitLab parser's round-trip property.
func TestGitLabPrintParse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		want := drawGitLab(t, 3)
		src := want.String()
		got, err := expr.ParseGitLab(src)
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		if diff := cmp.Diff(want, got, treeOpts); diff != "" {
			t.Fatalf("%q parses to another tree (-want +got):\n%s", src, diff)
		}
		if again := got.String(); again != src {
			t.Fatalf("printed %q, then %q", src, again)
		}
		checkOffsets(t, got, src)
	})
}
