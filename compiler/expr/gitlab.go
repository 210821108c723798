package expr

import (
	"fmt"
	"regexp"
	"strings"
)

// GitLab's nodes. Strings, null and regular expressions are operands of
// comparisons; variables are also conditions on their own.

// GitLabVar is $NAME, or ${NAME} when Braced. Offset is that of the '$'.
type GitLabVar struct {
	Offset int
	Name   string
	Braced bool
}

// GitLabString is a string in single or double quotes (GitLab has no
// escapes: a string cannot hold its own quote). Offset is that of the
// opening quote.
type GitLabString struct {
	Offset int
	Value  string
}

// GitLabNull is null, the value of an undefined variable.
type GitLabNull struct {
	Offset int
}

// GitLabRegexp is /pattern/flags, the right operand of =~ and !~. Pattern
// is the text between the slashes as written, so \/ stands for a slash;
// Flags are among i, m, s and U, RE2's flags of those names. Offset is
// that of the opening slash.
type GitLabRegexp struct {
	Offset  int
	Pattern string
	Flags   string

	re *regexp.Regexp // compiled by the parser; nil in a tree built by hand
}

// GitLabBinary is a comparison (==, !=, =~, !~) or a logical && or ||.
// Offset is that of the operator.
type GitLabBinary struct {
	Op     Op
	Offset int
	X, Y   Node
}

func (n *GitLabVar) Pos() int    { return n.Offset }
func (n *GitLabString) Pos() int { return n.Offset }
func (n *GitLabNull) Pos() int   { return n.Offset }
func (n *GitLabRegexp) Pos() int { return n.Offset }
func (n *GitLabBinary) Pos() int { return n.X.Pos() }

func (*GitLabVar) node()    {}
func (*GitLabString) node() {}
func (*GitLabNull) node()   {}
func (*GitLabRegexp) node() {}
func (*GitLabBinary) node() {}

func (n *GitLabVar) String() string    { return printGitLab(n) }
func (n *GitLabString) String() string { return printGitLab(n) }
func (n *GitLabNull) String() string   { return printGitLab(n) }
func (n *GitLabRegexp) String() string { return printGitLab(n) }
func (n *GitLabBinary) String() string { return printGitLab(n) }

func printGitLab(n Node) string {
	var b strings.Builder
	writeGitLab(&b, n)
	return b.String()
}

func gitlabPrec(n Node) int {
	if n, ok := n.(*GitLabBinary); ok {
		return opPrec(n.Op)
	}
	return precPrimary
}

func writeGitLabPrec(b *strings.Builder, n Node, min int) {
	if gitlabPrec(n) < min {
		b.WriteByte('(')
		writeGitLab(b, n)
		b.WriteByte(')')
		return
	}
	writeGitLab(b, n)
}

func writeGitLab(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case *GitLabVar:
		if n.Braced {
			b.WriteString("${" + n.Name + "}")
		} else {
			b.WriteString("$" + n.Name)
		}
	case *GitLabString:
		q := `"`
		if strings.Contains(n.Value, `"`) {
			q = `'`
		}
		b.WriteString(q + n.Value + q)
	case *GitLabNull:
		b.WriteString("null")
	case *GitLabRegexp:
		b.WriteString("/" + n.Pattern + "/" + n.Flags)
	case *GitLabBinary:
		p := opPrec(n.Op)
		writeGitLabPrec(b, n.X, p)
		b.WriteString(" " + n.Op.String() + " ")
		writeGitLabPrec(b, n.Y, p+1)
	case nil:
		b.WriteString("<nil>")
	default:
		b.WriteString(n.String())
	}
}

// MaxGitLabTokens is the most tokens a GitLab expression may have. GitLab
// rejects longer ones: its lexer reads at most 100 times, and the last
// read must find the end.
const MaxGitLabTokens = 99

// ParseGitLab parses a GitLab CI/CD variable expression, as written in
// rules:if or only:variables. Errors are *SyntaxError.
//
// The grammar, loosest binding first:
//
//	or      = and { "||" and }
//	and     = cmp { "&&" cmp }
//	cmp     = operand [ ("==" | "!=") operand | ("=~" | "!~") (regexp | operand) ]
//	        | "(" or ")"
//	operand = variable | string | null
//
// Variables are $NAME or ${NAME}, with names of letters, digits and '_'.
// Strings are in single or double quotes, without escapes, on one line.
// A regexp is /pattern/flags in RE2 syntax (Go's regexp package checks
// it; lookarounds and backreferences are not RE2 and are rejected), with
// \/ for a slash and flags among i, m, s and U; like GitLab, it must have
// at least two characters between the slashes. Comparisons do not chain,
// and a parenthesised expression is a condition, not an operand.
func ParseGitLab(src string) (n Node, err error) {
	p := &glParser{src: src}
	defer catchSyntax(&n, &err)
	p.advance()
	if p.tok.kind == glEOF {
		p.fail(p.tok.off, "empty expression")
	}
	n = p.or()
	if p.tok.kind != glEOF {
		p.fail(p.tok.off, "unexpected %s after a complete expression", p.tok.describe())
	}
	return n, nil
}

type glKind uint8

const (
	glEOF glKind = iota
	glLParen
	glRParen
	glVar
	glString
	glNull
	glRegexp
	glOp
)

type glToken struct {
	kind glKind
	off  int
	text string
	op   Op
	node Node // for operands
}

func (t glToken) describe() string {
	switch t.kind {
	case glEOF:
		return "end of input"
	case glVar:
		return "variable " + t.text
	case glString:
		return "string " + t.text
	case glRegexp:
		return "regular expression " + t.text
	}
	return "'" + t.text + "'"
}

type glParser struct {
	src    string
	pos    int
	tok    glToken
	tokens int
}

func (p *glParser) fail(off int, format string, args ...any) {
	panic(&SyntaxError{off, fmt.Sprintf(format, args...)})
}

func (p *glParser) advance() {
	p.tok = p.lex()
	if p.tok.kind != glEOF {
		p.tokens++
		if p.tokens > MaxGitLabTokens {
			p.fail(p.tok.off, "the expression has more than %d tokens, more than GitLab allows", MaxGitLabTokens)
		}
	}
}

func isVarChar(c byte) bool {
	return c == '_' || isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func (p *glParser) lex() glToken {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		p.pos++
	}
	start := p.pos
	if start >= len(p.src) {
		return glToken{kind: glEOF, off: start}
	}
	s := p.src
	tok := func(k glKind, n int) glToken {
		p.pos += n
		return glToken{kind: k, off: start, text: s[start:p.pos]}
	}
	op := func(o Op) glToken {
		t := tok(glOp, 2)
		t.op = o
		return t
	}
	next := byte(0)
	if start+1 < len(s) {
		next = s[start+1]
	}
	switch c := s[start]; {
	case c == '(':
		return tok(glLParen, 1)
	case c == ')':
		return tok(glRParen, 1)
	case c == '=' && next == '=':
		return op(OpEq)
	case c == '!' && next == '=':
		return op(OpNe)
	case c == '=' && next == '~':
		return op(OpMatch)
	case c == '!' && next == '~':
		return op(OpNotMatch)
	case c == '&' && next == '&':
		return op(OpAnd)
	case c == '|' && next == '|':
		return op(OpOr)
	case c == '!':
		p.fail(start, "unexpected '!': compare instead, as in $VAR == null or $VAR !~ /re/")
	case c == '=' || c == '&' || c == '|':
		p.fail(start, "unexpected %q: the operators are ==, !=, =~, !~, && and ||", c)
	case c == '$':
		return p.variable()
	case c == '"' || c == '\'':
		end := start + 1
		for end < len(s) && s[end] != c && s[end] != '\n' {
			end++
		}
		if end == len(s) || s[end] != c {
			p.fail(start, "unterminated string: the quote at offset %d is not closed on its line (GitLab strings have no escapes)", start)
		}
		t := tok(glString, end+1-start)
		t.node = &GitLabString{Offset: start, Value: s[start+1 : end]}
		return t
	case c == '/':
		return p.regexp()
	case isVarChar(c):
		end := start
		for end < len(s) && isVarChar(s[end]) {
			end++
		}
		if word := s[start:end]; word != "null" {
			p.fail(start, "unexpected word %q: variables start with '$', strings are quoted, and the only keyword is null", word)
		}
		t := tok(glNull, 4)
		t.node = &GitLabNull{Offset: start}
		return t
	}
	p.fail(start, "unexpected %s", describeChar(s[start:]))
	return glToken{}
}

func (p *glParser) variable() glToken {
	s, start := p.src, p.pos
	i := start + 1
	braced := i < len(s) && s[i] == '{'
	if braced {
		i++
	}
	nameStart := i
	for i < len(s) && isVarChar(s[i]) {
		i++
	}
	name := s[nameStart:i]
	if name == "" {
		p.fail(i, "expected a variable name after %q", s[start:nameStart])
	}
	if braced {
		if i >= len(s) || s[i] != '}' {
			p.fail(i, "expected '}' to close the ${ at offset %d", start)
		}
		i++
	}
	p.pos = i
	return glToken{kind: glVar, off: start, text: s[start:i], node: &GitLabVar{Offset: start, Name: name, Braced: braced}}
}

func (p *glParser) regexp() glToken {
	s, start := p.src, p.pos
	i := start + 1
	for i < len(s) && s[i] != '/' {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		i++
	}
	if i >= len(s) {
		p.fail(start, "unterminated regular expression: the / at offset %d is not closed (write \\/ for a slash inside it)", start)
	}
	pattern := s[start+1 : i]
	i++
	flagsStart := i
	for i < len(s) && strings.IndexByte("imsU", s[i]) >= 0 {
		i++
	}
	flags := s[flagsStart:i]
	if i < len(s) && isVarChar(s[i]) {
		p.fail(i, "unknown regular expression flag %q: the flags are i, m, s and U", s[i])
	}
	if len(pattern) < 2 {
		p.fail(start, "GitLab does not accept regular expressions of fewer than two characters, like /%s/", pattern)
	}
	re, err := compileGitLabRegexp(pattern, flags)
	if err != nil {
		p.fail(start, "%s", err)
	}
	p.pos = i
	return glToken{kind: glRegexp, off: start, text: s[start:i], node: &GitLabRegexp{Offset: start, Pattern: pattern, Flags: flags, re: re}}
}

// compileGitLabRegexp compiles /pattern/flags the way GitLab does: flags
// become a (?flags) prefix and \/ a slash.
func compileGitLabRegexp(pattern, flags string) (*regexp.Regexp, error) {
	src := strings.ReplaceAll(pattern, `\/`, "/")
	if flags != "" {
		src = "(?" + flags + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "Perl syntax") || strings.Contains(msg, "escape sequence") {
			return nil, fmt.Errorf("regular expression /%s/ is not supported: GitLab uses RE2 syntax, which has no lookarounds or backreferences (%v)", pattern, err)
		}
		return nil, fmt.Errorf("invalid regular expression /%s/: %v", pattern, err)
	}
	return re, nil
}

func (p *glParser) or() Node {
	x := p.and()
	for p.tok.kind == glOp && p.tok.op == OpOr {
		off := p.tok.off
		p.advance()
		x = &GitLabBinary{Op: OpOr, Offset: off, X: x, Y: p.and()}
	}
	return x
}

func (p *glParser) and() Node {
	x := p.cmp()
	for p.tok.kind == glOp && p.tok.op == OpAnd {
		off := p.tok.off
		p.advance()
		x = &GitLabBinary{Op: OpAnd, Offset: off, X: x, Y: p.cmp()}
	}
	return x
}

func isComparison(op Op) bool {
	return op == OpEq || op == OpNe || op == OpMatch || op == OpNotMatch
}

func (p *glParser) cmp() Node {
	if p.tok.kind == glLParen {
		open := p.tok.off
		p.advance()
		x := p.or()
		if p.tok.kind != glRParen {
			if p.tok.kind == glEOF {
				p.fail(p.tok.off, "unexpected end of input: expected ')' to close the '(' at offset %d", open)
			}
			p.fail(p.tok.off, "unexpected %s: expected ')' to close the '(' at offset %d", p.tok.describe(), open)
		}
		p.advance()
		if p.tok.kind == glOp && isComparison(p.tok.op) {
			p.fail(p.tok.off, "unexpected '%s': a parenthesised condition cannot be compared", p.tok.op)
		}
		return x
	}
	x := p.operand(false)
	if p.tok.kind != glOp || !isComparison(p.tok.op) {
		return x
	}
	op, off := p.tok.op, p.tok.off
	p.advance()
	y := p.operand(op == OpMatch || op == OpNotMatch)
	if p.tok.kind == glOp && isComparison(p.tok.op) {
		p.fail(p.tok.off, "unexpected '%s': comparisons do not chain; join them with && or ||", p.tok.op)
	}
	return &GitLabBinary{Op: op, Offset: off, X: x, Y: y}
}

func (p *glParser) operand(regexpOK bool) Node {
	t := p.tok
	switch t.kind {
	case glVar, glString, glNull:
		p.advance()
		return t.node
	case glRegexp:
		if !regexpOK {
			p.fail(t.off, "a regular expression can only be the right operand of =~ or !~")
		}
		p.advance()
		return t.node
	case glEOF:
		p.fail(t.off, "unexpected end of input: expected a variable, a string or null")
	}
	p.fail(t.off, "unexpected %s: expected a variable, a string or null", t.describe())
	return nil
}

// VariableRefs lists the variables a GitLab expression reads, each once,
// in order of first use. Variables inside regular expressions are not
// expanded by GitLab and are not listed.
func VariableRefs(n Node) []string {
	var out []string
	seen := map[string]bool{}
	walk(n, func(n Node) {
		if v, ok := n.(*GitLabVar); ok && !seen[v.Name] {
			seen[v.Name] = true
			out = append(out, v.Name)
		}
	})
	return out
}
