package compiler

import (
	"bytes"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// scalarPos returns the line and column (1-based, in characters) in the
// file of the byte at offset off of scalar n's value. YAML changes text on
// the way from the file to the value — quotes, escapes, folded lines, the
// indentation of block scalars — so the value is aligned with the text it
// was read from: each byte of the value is matched to the next byte of the
// source that produced it, decoding double-quoted escapes on the way. The
// characters that matter (the start of an expression, a token in it) are
// never white space, which the alignment may attribute to indentation.
//
// Without the file's content, or for a node without position, the result
// is the node's own position plus the offset.
func (c *checker) scalarPos(n *yaml.Node, off int) (line, col int) {
	line, col = n.Line, n.Column
	if n.Line <= 0 || off <= 0 && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		return line, col
	}
	start := lineStart(c.data, n.Line)
	if start < 0 {
		return line, col + off
	}
	// Advance to the node's column, counted in characters.
	i := start
	for k := 1; k < n.Column && i < len(c.data) && c.data[i] != '\n'; k++ {
		_, size := utf8.DecodeRune(c.data[i:])
		i += size
	}
	val := n.Value
	if off > len(val) {
		off = len(val)
	}
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		// The content starts on the line after the indicator.
		nl := bytes.IndexByte(c.data[i:], '\n')
		if nl < 0 {
			return line, col + off
		}
		i += nl + 1
	case n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		i++ // the opening quote
	}
	src := c.data
	double := n.Style&yaml.DoubleQuotedStyle != 0
	v := 0
	// Skip the indentation of a block scalar's first line.
	for n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 && i < len(src) && (src[i] == ' ' || src[i] == '\t') && (len(val) == 0 || val[0] != src[i]) {
		i++
	}
	for v < off && i < len(src) {
		if double && src[i] == '\\' && i+1 < len(src) {
			// An escape stands for the bytes it decodes to.
			adv, decoded := escapeWidth(src[i:])
			if decoded == 0 { // an escaped line break decodes to nothing
				i += adv
				continue
			}
			if v+decoded > off {
				break
			}
			v += decoded
			i += adv
			continue
		}
		if val[v] == src[i] {
			v++
		}
		i++
	}
	return posOf(c.data, i)
}

// escapeWidth returns the length of the escape at the start of s (which
// is a backslash) in the source, and the length in bytes of what it
// decodes to.
func escapeWidth(s []byte) (src, decoded int) {
	switch s[1] {
	case 'x':
		return min(4, len(s)), 1
	case 'u':
		return min(6, len(s)), utf8.RuneLen(hexRune(s[2:min(6, len(s))]))
	case 'U':
		return min(10, len(s)), utf8.RuneLen(hexRune(s[2:min(10, len(s))]))
	case 'N', '_':
		return 2, 2 // U+0085 and U+00A0
	case 'L', 'P':
		return 2, 3 // U+2028 and U+2029
	case '\n':
		return 2, 0
	case '\r':
		if len(s) > 2 && s[2] == '\n' {
			return 3, 0
		}
		return 2, 0
	}
	return 2, 1
}

func hexRune(h []byte) rune {
	var r rune
	for _, b := range h {
		switch {
		case '0' <= b && b <= '9':
			r = r<<4 | rune(b-'0')
		case 'a' <= b && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case 'A' <= b && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		}
	}
	if r < 0 || r > utf8.MaxRune {
		return utf8.RuneError
	}
	return r
}

// lineStart returns the byte offset where 1-based line n starts in data,
// or -1 when data has fewer lines.
func lineStart(data []byte, n int) int {
	i := 0
	for l := 1; l < n; l++ {
		k := bytes.IndexByte(data[i:], '\n')
		if k < 0 {
			return -1
		}
		i += k + 1
	}
	return i
}

// posOf returns the 1-based line and column (in characters) of byte
// offset i of data.
func posOf(data []byte, i int) (line, col int) {
	i = min(i, len(data))
	line = 1 + bytes.Count(data[:i], []byte("\n"))
	ls := bytes.LastIndexByte(data[:i], '\n') + 1
	return line, 1 + utf8.RuneCount(data[ls:i])
}
