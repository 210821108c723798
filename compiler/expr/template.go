package expr

import (
	"errors"
	"strings"
)

// Segment is a piece of a template: literal text, or the source of an
// expression that was written between ${{ and }}.
type Segment struct {
	// Offset is the byte offset of Text in the template: for an
	// expression, just after its "${{". Add it to a *SyntaxError's offset
	// from ParseGitHub(Text) to place the error in the template.
	Offset int
	// Text is the literal text, or the expression's source without the
	// delimiters (spaces included).
	Text string
	// Expr tells the two apart.
	Expr bool
}

// SplitTemplate splits a string that may hold ${{ }} expressions, like
// "build-${{ matrix.os }}-${{ inputs.x }}", into its segments, in order.
// Empty literal segments are left out, so a string without expressions is
// one literal segment (none for ""). An expression ends at the first }}
// outside a single-quoted string, so ${{ format('{{0}}', x) }} is one
// expression. A ${{ without its }} is a *SyntaxError at the ${{.
//
// There is no escape for a literal "${{"; GitHub has none either.
func SplitTemplate(s string) ([]Segment, error) {
	var out []Segment
	i := 0
	for {
		j := strings.Index(s[i:], "${{")
		if j < 0 {
			if i < len(s) {
				out = append(out, Segment{Offset: i, Text: s[i:]})
			}
			return out, nil
		}
		open := i + j
		if open > i {
			out = append(out, Segment{Offset: i, Text: s[i:open]})
		}
		start := open + 3
		end, err := expressionEnd(s, start)
		if err != nil {
			return nil, err
		}
		out = append(out, Segment{Offset: start, Text: s[start:end], Expr: true})
		i = end + 2
	}
}

// expressionEnd returns the offset of the }} that closes the expression
// starting at start, skipping over string literals.
func expressionEnd(s string, start int) (int, error) {
	quote := -1 // offset of the open string's quote, or -1
	for k := start; k < len(s); k++ {
		switch {
		case s[k] == '\'':
			// A doubled quote inside a string closes and reopens it: the same.
			if quote < 0 {
				quote = k
			} else {
				quote = -1
			}
		case quote < 0 && s[k] == '}' && k+1 < len(s) && s[k+1] == '}':
			return k, nil
		}
	}
	msg := "the ${{ at offset " + itoa(start-3) + " has no closing }}"
	if quote >= 0 {
		msg += " (the string started by the quote at offset " + itoa(quote) + " is not closed)"
	}
	return 0, &SyntaxError{start - 3, msg}
}

// EvalTemplate evaluates a template the way GitHub evaluates a YAML value
// with expressions. A template that is exactly one ${{ }} (nothing around
// it, not even spaces) has the expression's value, of any type; otherwise
// the result is a string, the literal text with each expression's value
// formatted by ToString. It is Unknown when any expression is.
//
// Syntax errors are *SyntaxError and evaluation errors *EvalError, both
// with offsets into s.
func EvalTemplate(s string, env *GitHubEnv) (any, error) {
	segs, err := SplitTemplate(s)
	if err != nil {
		return nil, err
	}
	if len(segs) == 1 && segs[0].Expr {
		return evalSegment(segs[0], env)
	}
	var b strings.Builder
	unknown := false
	for _, seg := range segs {
		if !seg.Expr {
			b.WriteString(seg.Text)
			continue
		}
		v, err := evalSegment(seg, env)
		if err != nil {
			return nil, err
		}
		if v == Unknown {
			unknown = true // errors in later segments still count
			continue
		}
		b.WriteString(ToString(v))
	}
	if unknown {
		return Unknown, nil
	}
	return b.String(), nil
}

func evalSegment(seg Segment, env *GitHubEnv) (any, error) {
	n, err := ParseGitHub(seg.Text)
	var se *SyntaxError
	if errors.As(err, &se) {
		return nil, &SyntaxError{Offset: seg.Offset + se.Offset, Msg: se.Msg}
	}
	if err != nil {
		return nil, err
	}
	v, err := EvalGitHub(n, env)
	var ee *EvalError
	if errors.As(err, &ee) {
		return nil, &EvalError{Offset: seg.Offset + ee.Offset, Msg: ee.Msg, Err: ee.Err}
	}
	return v, err
}
