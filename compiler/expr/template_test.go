package expr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

func lseg(off int, text string) expr.Segment { return expr.Segment{Offset: off, Text: text} }
func eseg(off int, text string) expr.Segment {
	return expr.Segment{Offset: off, Text: text, Expr: true}
}

// templates are strings and their segments. They also seed
// FuzzSplitTemplate.
var templates = []struct {
	s    string
	want []expr.Segment
}{
	{"", nil},
	{"plain text", []expr.Segment{lseg(0, "plain text")}},
	{"${{ matrix.os }}", []expr.Segment{eseg(3, " matrix.os ")}},
	{"build-${{ matrix.os }}-${{ inputs.x }}", []expr.Segment{
		lseg(0, "build-"), eseg(9, " matrix.os "), lseg(22, "-"), eseg(26, " inputs.x "),
	}},
	{"${{a}}${{b}}", []expr.Segment{eseg(3, "a"), eseg(9, "b")}},
	{" ${{ a }} ", []expr.Segment{lseg(0, " "), eseg(4, " a "), lseg(9, " ")}},
	// }} inside a string does not end the expression.
	{"${{ format('{{0}}', x) }}!", []expr.Segment{eseg(3, " format('{{0}}', x) "), lseg(25, "!")}},
	{"${{ 'it''s }}' }}", []expr.Segment{eseg(3, " 'it''s }}' ")}},
	{"${{ a }}}", []expr.Segment{eseg(3, " a "), lseg(8, "}")}},
	{"${{ }}", []expr.Segment{eseg(3, " ")}},
	{"$ {{ a }} ${ {b}}", []expr.Segment{lseg(0, "$ {{ a }} ${ {b}}")}},
	{"}} before", []expr.Segment{lseg(0, "}} before")}},
	{"$${{ a }}", []expr.Segment{lseg(0, "$"), eseg(4, " a ")}},
	{"${{ '${{' }}", []expr.Segment{eseg(3, " '${{' ")}},
}

func TestSplitTemplate(t *testing.T) {
	t.Parallel()
	for _, tt := range templates {
		got, err := expr.SplitTemplate(tt.s)
		require.NoError(t, err, tt.s)
		require.Equal(t, tt.want, got, tt.s)
		for _, seg := range got {
			require.Equal(t, seg.Text, tt.s[seg.Offset:seg.Offset+len(seg.Text)])
		}
	}
}

// templateErrors are templates that do not split. They also seed
// FuzzSplitTemplate.
var templateErrors = []struct {
	s   string
	off int
	msg string
}{
	{"${{", 0, "the ${{ at offset 0 has no closing }}"},
	{"a-${{ matrix.os }", 2, "the ${{ at offset 2 has no closing }}"},
	{"${{ a }} ${{ b ", 9, "no closing }}"},
	{"${{ format('{0}}}) }}", 0, "(the string started by the quote at offset 11 is not closed)"},
}

func TestSplitTemplateErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range templateErrors {
		_, err := expr.SplitTemplate(tt.s)
		se := syntaxError(t, err)
		require.Equal(t, tt.off, se.Offset, tt.s)
		require.Contains(t, se.Msg, tt.msg, tt.s)
	}
}

func TestEvalTemplate(t *testing.T) {
	t.Parallel()
	env := testEnv()
	tests := []struct {
		s    string
		want any
	}{
		{"plain", "plain"},
		{"", ""},
		{"build-${{ matrix.os }}-${{ matrix.node }}", "build-ubuntu-latest-20"},
		// A lone expression keeps its type; anything around it makes a string.
		{"${{ matrix.node }}", 20.0},
		{"${{ matrix.list }}", []any{"zero", "one", "two"}},
		{"${{ github.nothing }}", nil},
		{" ${{ matrix.node }}", " 20"},
		{"${{ inputs.debug }}${{ github.nothing }}", "false"},
		{"${{ matrix.list }} and ${{ obj }}", "Array and Object"},
		{"${{ format('{{0}}') }}", "{0}"},
		{"v${{ needs.build.outputs.version }}", expr.Unknown},
		{"${{ needs.build.outputs.version }}", expr.Unknown},
		{"${{ success() }}", expr.Unknown},
	}
	for _, tt := range tests {
		got, err := expr.EvalTemplate(tt.s, env)
		require.NoError(t, err, tt.s)
		require.Equal(t, tt.want, got, tt.s)
	}
}

func TestEvalTemplateErrors(t *testing.T) {
	t.Parallel()
	env := testEnv()
	tests := []struct {
		s      string
		off    int
		msg    string
		syntax bool
	}{
		{"x-${{ matrix.os", 2, "no closing }}", true},
		// Offsets are into the template, not the expression.
		{"x-${{ matrix.os == }}", 19, "unexpected end of input: expected an expression after '=='", true},
		{"x-${{   }}", 8, "empty expression", true},
		{"a ${{ matrx.os }}", 6, `unknown context "matrx"; did you mean "matrix"?`, false},
		// Errors after an Unknown segment are reported.
		{"${{ needs.a.x }}-${{ fromJSON('') }}", 21, "fromJSON: the input is empty", false},
	}
	for _, tt := range tests {
		got, err := expr.EvalTemplate(tt.s, env)
		require.Nil(t, got)
		if tt.syntax {
			se := syntaxError(t, err)
			require.Equal(t, tt.off, se.Offset, tt.s)
			require.Contains(t, se.Msg, tt.msg)
		} else {
			ee := evalError(t, err)
			require.Equal(t, tt.off, ee.Offset, tt.s)
			require.Contains(t, ee.Msg, tt.msg)
		}
	}
}
