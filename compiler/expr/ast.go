package expr

import (
	"math"
	"strconv"
	"strings"
)

// Node is a node of a parsed expression, GitHub's or GitLab's. The tree is
// plain data: callers may walk it with a type switch, build one by hand,
// and print it with String.
//
// Every node records the byte offset in the source of its own token (the
// Offset field; what that token is is documented per type) and reports
// with Pos where its text starts. Offsets are relative to the string given
// to the parser; the caller maps them to lines and columns of its file.
type Node interface {
	// Pos is the byte offset where the node's text starts: for a binary
	// operation or an access, where its left operand starts.
	Pos() int
	// String prints the node as source text that parses back to an equal
	// tree (offsets aside), with parentheses only where they are needed.
	// A GitHub tree prints without the ${{ }} delimiters.
	String() string
	node()
}

// Op is a binary operator.
type Op uint8

// The binary operators. OpMatch and OpNotMatch are GitLab's; the order and
// equality operators GitHub's; the rest belong to both languages.
const (
	OpOr       Op = iota + 1 // ||
	OpAnd                    // &&
	OpEq                     // ==
	OpNe                     // !=
	OpLt                     // <
	OpLe                     // <=
	OpGt                     // >
	OpGe                     // >=
	OpMatch                  // =~
	OpNotMatch               // !~
)

var opText = [...]string{OpOr: "||", OpAnd: "&&", OpEq: "==", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">=", OpMatch: "=~", OpNotMatch: "!~"}

func (op Op) String() string {
	if int(op) < len(opText) && opText[op] != "" {
		return opText[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// GitHub's nodes.

// Literal is null, true, false, a number or a string. Value is nil, a bool,
// a float64 or a string. Offset is where the literal starts.
type Literal struct {
	Offset int
	Value  any
}

// Context is a context name at the start of an access chain, like github
// in github.ref. Name is as written; contexts match ignoring case.
type Context struct {
	Offset int
	Name   string
}

// Property is x.name, or the object filter x.* when Name is "*". Name is
// as written; properties match ignoring case. Offset is that of the name.
type Property struct {
	X      Node
	Offset int
	Name   string
}

// Index is x[index], or the object filter x[*] when Index is nil. Offset
// is that of the '['.
type Index struct {
	X      Node
	Offset int
	Index  Node
}

// Not is !x. Offset is that of the '!'.
type Not struct {
	Offset int
	X      Node
}

// Binary is x op y. Offset is that of the operator.
type Binary struct {
	Op     Op
	Offset int
	X, Y   Node
}

// Call is a function call. Name is as written; functions match ignoring
// case. Offset is that of the name.
type Call struct {
	Offset int
	Name   string
	Args   []Node
}

func (n *Literal) Pos() int  { return n.Offset }
func (n *Context) Pos() int  { return n.Offset }
func (n *Property) Pos() int { return n.X.Pos() }
func (n *Index) Pos() int    { return n.X.Pos() }
func (n *Not) Pos() int      { return n.Offset }
func (n *Binary) Pos() int   { return n.X.Pos() }
func (n *Call) Pos() int     { return n.Offset }

func (*Literal) node()  {}
func (*Context) node()  {}
func (*Property) node() {}
func (*Index) node()    {}
func (*Not) node()      {}
func (*Binary) node()   {}
func (*Call) node()     {}

func (n *Literal) String() string  { return printGitHub(n) }
func (n *Context) String() string  { return printGitHub(n) }
func (n *Property) String() string { return printGitHub(n) }
func (n *Index) String() string    { return printGitHub(n) }
func (n *Not) String() string      { return printGitHub(n) }
func (n *Binary) String() string   { return printGitHub(n) }
func (n *Call) String() string     { return printGitHub(n) }

// Precedence levels, loosest first; both languages use the same ladder
// for the operators they share.
const (
	precOr = iota + 1
	precAnd
	precEq // == != (and GitLab's =~ !~)
	precCmp
	precNot
	precPostfix
	precPrimary
)

func opPrec(op Op) int {
	switch op {
	case OpOr:
		return precOr
	case OpAnd:
		return precAnd
	case OpLt, OpLe, OpGt, OpGe:
		return precCmp
	}
	return precEq
}

func githubPrec(n Node) int {
	switch n := n.(type) {
	case *Binary:
		return opPrec(n.Op)
	case *Not:
		return precNot
	case *Property, *Index:
		return precPostfix
	}
	return precPrimary
}

func printGitHub(n Node) string {
	var b strings.Builder
	writeGitHub(&b, n)
	return b.String()
}

// writeGitHubPrec writes n, in parentheses when it binds looser than min.
func writeGitHubPrec(b *strings.Builder, n Node, min int) {
	if githubPrec(n) < min {
		b.WriteByte('(')
		writeGitHub(b, n)
		b.WriteByte(')')
		return
	}
	writeGitHub(b, n)
}

func writeGitHub(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case *Literal:
		writeLiteral(b, n.Value)
	case *Context:
		b.WriteString(n.Name)
	case *Property:
		writeAccessed(b, n.X)
		b.WriteByte('.')
		b.WriteString(n.Name)
	case *Index:
		writeAccessed(b, n.X)
		b.WriteByte('[')
		if n.Index == nil {
			b.WriteByte('*')
		} else {
			writeGitHub(b, n.Index)
		}
		b.WriteByte(']')
	case *Not:
		b.WriteByte('!')
		writeGitHubPrec(b, n.X, precNot)
	case *Binary:
		// Operators of one level associate to the left, so a right operand
		// of the same level needs parentheses and a left one does not.
		p := opPrec(n.Op)
		writeGitHubPrec(b, n.X, p)
		b.WriteByte(' ')
		b.WriteString(n.Op.String())
		b.WriteByte(' ')
		writeGitHubPrec(b, n.Y, p+1)
	case *Call:
		b.WriteString(n.Name)
		b.WriteByte('(')
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			writeGitHub(b, a)
		}
		b.WriteByte(')')
	case nil:
		b.WriteString("<nil>")
	default:
		b.WriteString(n.String())
	}
}

// writeAccessed writes the operand of an access: GitHub allows accesses
// only on contexts, calls, accesses and parenthesised expressions.
func writeAccessed(b *strings.Builder, x Node) {
	switch x.(type) {
	case *Context, *Call, *Property, *Index:
		writeGitHub(b, x)
	default:
		b.WriteByte('(')
		writeGitHub(b, x)
		b.WriteByte(')')
	}
}

func writeLiteral(b *strings.Builder, v any) {
	switch v := norm(v).(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		switch {
		case math.IsNaN(v):
			b.WriteString("NaN")
		case math.IsInf(v, 1):
			b.WriteString("Infinity")
		case math.IsInf(v, -1):
			b.WriteString("-Infinity")
		default:
			// The shortest form that parses back to the same float.
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
	case string:
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(v, "'", "''"))
		b.WriteByte('\'')
	default:
		b.WriteString("<invalid literal>")
	}
}
