package expr

import (
	"fmt"
)

// GitHub's limits on an expression, which we keep so that what parses here
// parses there, and so that a hostile expression stays cheap.
const (
	// MaxGitHubLength is the longest expression ParseGitHub accepts, in
	// bytes.
	MaxGitHubLength = 21000
	// MaxGitHubDepth is how deeply ParseGitHub lets an expression nest:
	// each parenthesis, argument list, index, '!' and property access
	// counts a level.
	MaxGitHubDepth = 50
)

// ParseGitHub parses a GitHub Actions expression: the text between ${{
// and }}, or a bare if: condition. Errors are *SyntaxError.
//
// The grammar, loosest binding first:
//
//	or      = and { "||" and }
//	and     = eq { "&&" eq }
//	eq      = cmp { ("==" | "!=") cmp }
//	cmp     = unary { ("<" | "<=" | ">" | ">=") unary }
//	unary   = "!" unary | postfix
//	postfix = primary { "." (name | "*") | "[" (or | "*") "]" }
//	primary = null | true | false | number | string
//	        | name | name "(" [ or { "," or } ] ")" | "(" or ")"
//
// Binary operators associate to the left. Accesses apply only to names,
// calls and parenthesised expressions, as in GitHub ('abc'.x is an error,
// ('abc').x is null). Numbers are JSON numbers plus a leading '+' or '.',
// 0x hexadecimal, 0o octal, NaN and Infinity; strings are single-quoted,
// with a doubled quote for a quote. Names are letters, digits, '_' and
// '-', starting with a letter or '_'; null, true, false, NaN and Infinity
// are keywords, case-sensitive, except after a dot.
//
// Parsing does not check names: unknown contexts, unknown functions and
// wrong argument counts are found by CheckGitHub (all of them) and by
// EvalGitHub (those it reaches).
func ParseGitHub(src string) (n Node, err error) {
	if len(src) > MaxGitHubLength {
		return nil, &SyntaxError{0, fmt.Sprintf("the expression is %d bytes long, longer than the %d GitHub allows", len(src), MaxGitHubLength)}
	}
	p := &parser{lx: lexer{src: src}}
	defer catchSyntax(&n, &err)
	p.advance()
	if p.tok.kind == tEOF {
		p.fail(p.tok.off, "empty expression")
	}
	n = p.expr()
	if p.tok.kind != tEOF {
		p.fail(p.tok.off, "unexpected %s after a complete expression", p.tok.describe())
	}
	return n, nil
}

// parser is a recursive-descent parser with one token of lookahead. It
// reports the first error by panicking with a *SyntaxError, which
// ParseGitHub recovers; nothing else panics through it.
type parser struct {
	lx    lexer
	tok   token
	last  token // the token before tok, for "expected … after '&&'"
	depth int
}

func (p *parser) fail(off int, format string, args ...any) {
	panic(&SyntaxError{off, fmt.Sprintf(format, args...)})
}

func (p *parser) advance() {
	p.last = p.tok
	t, err := p.lx.next()
	if err != nil {
		panic(err)
	}
	p.tok = t
}

func (p *parser) enter() {
	p.depth++
	if p.depth > MaxGitHubDepth {
		p.fail(p.tok.off, "the expression nests more than %d levels deep, more than GitHub allows", MaxGitHubDepth)
	}
}

func (p *parser) expr() Node {
	p.enter()
	defer func() { p.depth-- }()
	return p.binary(precOr)
}

// binaryOp returns the operator a token stands for.
func binaryOp(k tokKind) (Op, bool) {
	switch k {
	case tOr:
		return OpOr, true
	case tAnd:
		return OpAnd, true
	case tEq:
		return OpEq, true
	case tNe:
		return OpNe, true
	case tLt:
		return OpLt, true
	case tLe:
		return OpLe, true
	case tGt:
		return OpGt, true
	case tGe:
		return OpGe, true
	}
	return 0, false
}

// binary parses the operators of level prec and tighter.
func (p *parser) binary(prec int) Node {
	if prec > precCmp {
		return p.unary()
	}
	x := p.binary(prec + 1)
	chained := false
	defer func() {
		if chained {
			p.depth--
		}
	}()
	for {
		op, ok := binaryOp(p.tok.kind)
		if !ok || opPrec(op) != prec {
			return x
		}
		// GitHub counts a chain of && or || as a level of nesting.
		if !chained && (op == OpAnd || op == OpOr) {
			p.enter()
			chained = true
		}
		off := p.tok.off
		p.advance()
		y := p.binary(prec + 1)
		x = &Binary{Op: op, Offset: off, X: x, Y: y}
	}
}

func (p *parser) unary() Node {
	if p.tok.kind != tBang {
		return p.postfix()
	}
	off := p.tok.off
	p.enter()
	defer func() { p.depth-- }()
	p.advance()
	return &Not{Offset: off, X: p.unary()}
}

func (p *parser) postfix() Node {
	x, accessible := p.primary()
	if !accessible {
		if k := p.tok.kind; k == tDot || k == tLBrack {
			p.fail(p.tok.off, "unexpected %s: a literal has no properties or elements", p.tok.describe())
		}
		return x
	}
	levels := 0
	defer func() { p.depth -= levels }()
	for {
		switch p.tok.kind {
		case tDot:
			p.enter()
			levels++
			p.advance()
			switch p.tok.kind {
			case tIdent, tStar:
				x = &Property{X: x, Offset: p.tok.off, Name: p.tok.text}
				p.advance()
			default:
				p.fail(p.tok.off, "unexpected %s after '.': expected a property name or '*'", p.tok.describe())
			}
		case tLBrack:
			open := p.tok.off
			p.advance()
			var index Node
			if p.tok.kind == tStar {
				p.advance()
			} else {
				index = p.expr()
			}
			p.expect(tRBrack, "']' to close the '[' at offset %d", open)
			// Like GitHub, counted after the index, which is not nested in it.
			p.enter()
			levels++
			x = &Index{X: x, Offset: open, Index: index}
		default:
			return x
		}
	}
}

// primary parses a primary expression and reports whether GitHub allows
// accesses on it.
func (p *parser) primary() (Node, bool) {
	t := p.tok
	switch t.kind {
	case tNumber:
		p.advance()
		return &Literal{Offset: t.off, Value: t.num}, false
	case tString:
		p.advance()
		return &Literal{Offset: t.off, Value: t.str}, false
	case tTrue, tFalse:
		p.advance()
		return &Literal{Offset: t.off, Value: t.kind == tTrue}, false
	case tNull:
		p.advance()
		return &Literal{Offset: t.off}, false
	case tIdent:
		p.advance()
		if p.tok.kind != tLParen {
			return &Context{Offset: t.off, Name: t.text}, true
		}
		return p.call(t), true
	case tLParen:
		p.advance()
		x := p.expr()
		p.expect(tRParen, "')' to close the '(' at offset %d", t.off)
		return x, true
	case tEOF:
		if p.last.kind != tEOF && p.last.kind != tLParen && p.last.kind != tLBrack {
			p.fail(t.off, "unexpected end of input: expected an expression after %s", p.last.describe())
		}
		p.fail(t.off, "unexpected end of input: expected an expression")
	}
	p.fail(t.off, "unexpected %s: expected an expression", t.describe())
	return nil, false
}

// call parses the arguments of a call of name; the current token is '('.
func (p *parser) call(name token) Node {
	open := p.tok.off
	p.advance()
	c := &Call{Offset: name.off, Name: name.text}
	if p.tok.kind == tRParen {
		p.advance()
		return c
	}
	for {
		c.Args = append(c.Args, p.expr())
		if p.tok.kind == tComma {
			p.advance()
			continue
		}
		p.expect(tRParen, "',' or ')' to close the arguments of %s( at offset %d", name.text, open)
		return c
	}
}

// expect consumes a token of kind k or fails, saying what was expected.
func (p *parser) expect(k tokKind, format string, args ...any) {
	if p.tok.kind == k {
		p.advance()
		return
	}
	what := fmt.Sprintf(format, args...)
	if p.tok.kind == tEOF {
		p.fail(p.tok.off, "unexpected end of input: expected %s", what)
	}
	p.fail(p.tok.off, "unexpected %s: expected %s", p.tok.describe(), what)
}

// catchSyntax ends a parse whose parser panicked with a *SyntaxError
// (the way parsers here report their first error), returning it; other
// panics go on.
func catchSyntax(n *Node, err *error) {
	if r := recover(); r != nil {
		se, ok := r.(*SyntaxError)
		if !ok {
			panic(r)
		}
		*n, *err = nil, se
	}
}
