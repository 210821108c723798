package expr

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// SyntaxError is an expression that does not parse (or a template whose
// ${{ is not closed). Offset is a byte offset into the string given to the
// parser, within [0, len(src)]; Msg says what was expected where.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("syntax error at offset %d: %s", e.Offset, e.Msg)
}

// tokKind is the kind of a token of GitHub's expression language.
type tokKind uint8

const (
	tEOF tokKind = iota
	tLParen
	tRParen
	tLBrack
	tRBrack
	tComma
	tDot
	tStar
	tBang
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tAnd
	tOr
	tNumber
	tString
	tIdent
	tTrue
	tFalse
	tNull
)

type token struct {
	kind tokKind
	off  int
	text string  // the source text of the token
	num  float64 // tNumber
	str  string  // tString: the value, quotes removed
}

// describe names the token for a message: "')'", "number 2", "'push'",
// "\"github\"".
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tNumber:
		return "number " + t.text
	case tString:
		return "string " + t.text
	case tIdent:
		return fmt.Sprintf("%q", t.text)
	}
	return "'" + t.text + "'"
}

// lexer splits GitHub expression source into tokens. Like GitHub's, it
// reads a word up to the next boundary character and then decides what
// the word is, so "b@r" is one bad word rather than b, @, r.
type lexer struct {
	src  string
	pos  int
	prev tokKind // the previous token's kind; tEOF before the first
}

// isBoundary reports whether c ends a word (a number or an identifier).
func isBoundary(c byte) bool {
	switch c {
	case '(', '[', ')', ']', ',', '.', '!', '>', '<', '=', '&', '|', ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// next returns the next token, or a *SyntaxError.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tEOF, off: start}, nil
	}
	tok := func(k tokKind, n int) (token, error) {
		l.pos += n
		l.prev = k
		return token{kind: k, off: start, text: l.src[start:l.pos]}, nil
	}
	c := l.src[start]
	two := func(second byte) bool { return start+1 < len(l.src) && l.src[start+1] == second }
	switch c {
	case '(':
		return tok(tLParen, 1)
	case ')':
		return tok(tRParen, 1)
	case '[':
		return tok(tLBrack, 1)
	case ']':
		return tok(tRBrack, 1)
	case ',':
		return tok(tComma, 1)
	case '*':
		return tok(tStar, 1)
	case '.':
		// A dot after something that can be accessed is a property access;
		// elsewhere it starts a number, as in .5.
		switch l.prev {
		case tIdent, tRBrack, tRParen, tStar:
			return tok(tDot, 1)
		case tString, tNumber, tTrue, tFalse, tNull:
			// Not valid either way; as a dot, the parser can say why.
			if start+1 < len(l.src) && isNameStart(l.src[start+1]) {
				return tok(tDot, 1)
			}
		}
		return l.number()
	case '!':
		if two('=') {
			return tok(tNe, 2)
		}
		return tok(tBang, 1)
	case '=':
		if two('=') {
			return tok(tEq, 2)
		}
		return token{}, &SyntaxError{start, "unexpected '=': compare with '=='"}
	case '<':
		if two('=') {
			return tok(tLe, 2)
		}
		return tok(tLt, 1)
	case '>':
		if two('=') {
			return tok(tGe, 2)
		}
		return tok(tGt, 1)
	case '&':
		if two('&') {
			return tok(tAnd, 2)
		}
		return token{}, &SyntaxError{start, "unexpected '&': the and operator is '&&'"}
	case '|':
		if two('|') {
			return tok(tOr, 2)
		}
		return token{}, &SyntaxError{start, "unexpected '|': the or operator is '||'"}
	case '\'':
		return l.string()
	case '"':
		return token{}, &SyntaxError{start, "unexpected '\"': strings in expressions are in single quotes, as in 'text'"}
	case '-', '+':
		return l.number()
	}
	if isDigit(c) {
		return l.number()
	}
	return l.word()
}

// number reads a number: the word up to the next boundary, dots included.
func (l *lexer) number() (token, error) {
	start := l.pos
	end := start + 1
	for end < len(l.src) && (!isBoundary(l.src[end]) || l.src[end] == '.') {
		end++
	}
	text := l.src[start:end]
	f := parseNumber(text)
	if math.IsNaN(f) {
		return token{}, &SyntaxError{start, fmt.Sprintf("invalid number %q", text)}
	}
	l.pos = end
	l.prev = tNumber
	return token{kind: tNumber, off: start, text: text, num: f}, nil
}

// string reads a single-quoted string, in which a doubled quote stands for
// one.
func (l *lexer) string() (token, error) {
	start := l.pos
	i := start + 1
	escaped := false
	for {
		j := strings.IndexByte(l.src[i:], '\'')
		if j < 0 {
			return token{}, &SyntaxError{start, "unterminated string: the quote at offset " + itoa(start) + " is not closed (write '' for a quote inside a string)"}
		}
		i += j + 1
		if i < len(l.src) && l.src[i] == '\'' {
			escaped = true
			i++
			continue
		}
		break
	}
	text := l.src[start:i]
	value := text[1 : len(text)-1]
	if escaped {
		value = strings.ReplaceAll(value, "''", "'")
	}
	l.pos = i
	l.prev = tString
	return token{kind: tString, off: start, text: text, str: value}, nil
}

// word reads an identifier or keyword. Identifiers are letters, digits, _
// and -, starting with a letter or _. Keywords are case-sensitive, and are
// plain identifiers after a dot (github.event.null is a property).
func (l *lexer) word() (token, error) {
	start := l.pos
	end := start
	for end < len(l.src) && !isBoundary(l.src[end]) {
		end++
	}
	text := l.src[start:end]
	for i := 0; i < len(text); {
		c := text[i]
		ok := isNameStart(c) || i > 0 && (c == '-' || isDigit(c))
		if !ok {
			return token{}, &SyntaxError{start + i, "unexpected " + describeChar(text[i:])}
		}
		i++
	}
	kind := tIdent
	var num float64
	if l.prev != tDot {
		switch text {
		case "true":
			kind = tTrue
		case "false":
			kind = tFalse
		case "null":
			kind = tNull
		case "NaN":
			kind, num = tNumber, math.NaN()
		case "Infinity":
			kind, num = tNumber, math.Inf(1)
		}
	}
	l.pos = end
	l.prev = kind
	return token{kind: kind, off: start, text: text, num: num}, nil
}

func isNameStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// describeChar names the character s starts with for a message.
func describeChar(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x", s[0])
	}
	return fmt.Sprintf("character %q", r)
}

func itoa(i int) string { return fmt.Sprint(i) }
