// Package mask replaces secret values, and their common encodings, with
// "***" in a job's output: streaming, in bounded memory, also when a value
// is split across two writes. The runner masks every job's output with
// one before a chunk of it leaves the runner. It depends on nothing but
// the standard library, so that runners and run-time packages use it
// without package secrets' clients.
package mask

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"
)

// MinValueBytes is the shortest value a Masker takes: a shorter one
// would mask ordinary words of the log, and is refused (ErrTooShort)
// rather than left unmasked. MaxValueBytes is the longest.
const (
	MinValueBytes = 4
	MaxValueBytes = 64 << 10
)

// Errors of Masker.Add. Test with errors.Is.
var (
	// ErrTooShort: a value is shorter than MinValueBytes.
	ErrTooShort = errors.New("secrets: value too short to be masked")
	// ErrTooLong: a value is longer than MaxValueBytes.
	ErrTooLong = errors.New("secrets: value too long to be masked")
)

// Replacement is what a masked value, or a run of overlapping ones,
// is replaced with in a job's output.
const Replacement = "***"

// Bounds of a Masker. A job registers its secrets and what its steps
// mask, each with its encodings; past these bounds Add fails rather than
// let a job grow the runner's memory, or the time its output takes to
// mask, without end.
const (
	// MaxPatterns bounds the patterns (values, their lines and
	// their encodings) one Masker holds.
	MaxPatterns = 50_000
	// MaxBytes bounds the bytes of those patterns together.
	MaxBytes = 32 << 20
)

// Line lengths of the tools whose wrapped output Add registers piece by
// piece: xxd -p writes 60 hex digits a line, base64 (GNU coreutils) 76
// characters.
const (
	xxdLine    = 60
	base64Line = 76
)

// A Masker holds the values a job's output must not show: every value
// registered with Add and its common encodings. It masks complete strings
// (String) and streams (Writer). A Masker is safe for concurrent use;
// values added while writers run take effect in their next Write, and in
// the bytes they hold back.
//
// # What is masked
//
// For a value v (after trimming white space), Add registers as patterns:
//
//   - v itself and, for a multi-line v, each of its lines of at least
//     MinValueBytes (each with its encodings below);
//   - base64 of v, standard and URL alphabets, at the three alignments
//     (v preceded by 0, 1 or 2 other bytes): the characters that depend on
//     v's bytes alone, so that v is found inside a longer encoded text;
//     the one or two characters that mix v's first or last bits with its
//     neighbours' stay visible;
//   - hex, lower and upper case;
//   - URL query escaping and path escaping;
//   - JSON string escaping, without the quotes;
//   - shell quoting: bash's printf %q, and the inside of '…' quoting
//     (where a ' ends the quotes, is written escaped, and opens them
//     again);
//   - the 60-character lines of xxd -p's hex and the 76-character lines
//     of base64's output when v is what was encoded (alignment 0): those
//     tools wrap lines, and a wrapped encoding of a long value is found
//     line by line. A line break at any other place in an encoding, or
//     an encoding a tool wraps at another width, is not found.
//
// An encoding is a pattern only when it differs from v and has at least
// MinValueBytes bytes.
//
// # Streams
//
// A Writer masks what goes through it as if the whole stream were
// masked at once: a value split across two writes, or across two chunks
// a reader cut, is masked. To do so it holds back the bytes at the end of
// a write that could begin a pattern (fewer than the longest pattern's
// length) until the next Write or Flush. A value written in two pieces
// with anything between them, a line break for instance, is two
// different texts and is not masked; nor is a value split across two
// MaskWriters, or across a Flush.
//
// # Cost
//
// Masking looks at each position of the text once, through a bitset of
// the patterns' first four bytes that fits a CPU's first-level cache;
// only where those four bytes may begin a pattern are patterns compared.
// With a hundred secrets (about a thousand patterns) it masks a build log
// at several hundred MB/s on one core (BenchmarkMasker). Patterns that
// share their first four bytes are compared one by one where those bytes
// occur: a job that registers many values with a common prefix slows the
// masking of its own output only.
type Masker struct {
	mu sync.RWMutex
	m  matcher
}

// New returns a Masker with no values.
func New() *Masker {
	return &Masker{}
}

// Add registers value and its encodings. It fails with ErrTooShort when
// value, trimmed of white space, is shorter than MinValueBytes, with
// ErrTooLong when it is longer than MaxValueBytes, and with an error
// when the Masker would pass MaxPatterns or MaxBytes; then
// nothing of value is registered. Errors never show the value. Adding a
// value twice is not an error.
func (m *Masker) Add(value string) error {
	pats, err := maskPatterns(value)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n, size int
	for _, p := range pats {
		if _, ok := m.m.set[p]; !ok {
			n++
			size += len(p)
		}
	}
	if len(m.m.pats)+n > MaxPatterns || m.m.size+size > MaxBytes {
		return fmt.Errorf("secrets: a value and its encodings (%d patterns, %d bytes) would pass the masker's bounds of %d patterns and %d bytes; it is not masked",
			n, size, MaxPatterns, MaxBytes)
	}
	for _, p := range pats {
		m.m.add(p)
	}
	return nil
}

// Len returns the number of patterns registered: values, lines and
// encodings.
func (m *Masker) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m.pats)
}

// String returns s with every pattern replaced by Replacement;
// overlapping and adjacent occurrences are replaced together, once.
func (m *Masker) String(s string) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.m.pats) == 0 || len(s) < MinValueBytes {
		return s
	}
	var st maskState
	out, _, masked := m.m.mask(nil, []byte(s), true, &st)
	if !masked {
		return s
	}
	return string(out)
}

// Writer returns a Writer that writes to dst what is written to it,
// masked.
func (m *Masker) Writer(dst io.Writer) *Writer {
	return &Writer{m: m, dst: dst}
}

// maskPatterns returns the patterns of value: see Masker.
func maskPatterns(value string) ([]string, error) {
	v := strings.TrimSpace(value)
	switch {
	case len(v) < MinValueBytes:
		return nil, fmt.Errorf("%w: a value of %d bytes (without surrounding white space) would mask ordinary text; a masked value needs at least %d", ErrTooShort, len(v), MinValueBytes)
	case len(v) > MaxValueBytes:
		return nil, fmt.Errorf("%w: a value of %d bytes is longer than the %d a masked value may have", ErrTooLong, len(v), MaxValueBytes)
	}
	var pats []string
	seen := map[string]bool{}
	addPat := func(p string) {
		if len(p) >= MinValueBytes && !seen[p] {
			seen[p] = true
			pats = append(pats, p)
		}
	}
	addValue := func(v string) {
		addPat(v)
		for _, e := range encodings(v) {
			if e != v {
				addPat(e)
			}
		}
	}
	addValue(v)
	if strings.ContainsAny(v, "\r\n") {
		for l := range strings.SplitSeq(v, "\n") {
			if l = strings.TrimSpace(l); len(l) >= MinValueBytes && l != v {
				addValue(l)
			}
		}
	}
	return pats, nil
}

// encodings returns the encoded forms of v that Masker registers.
func encodings(v string) []string {
	var es []string
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for a := range 3 {
			es = append(es, base64Aligned(enc, v, a))
		}
	}
	lower := hex.EncodeToString([]byte(v))
	upper := strings.ToUpper(lower)
	es = append(es, lower, upper)
	es = append(es, wrapped(lower, xxdLine)...)
	es = append(es, wrapped(upper, xxdLine)...)
	if s := base64Aligned(base64.RawStdEncoding, v, 0); len(s) > base64Line {
		es = append(es, wrapped(s, base64Line)...)
	}
	es = append(es, url.QueryEscape(v), url.PathEscape(v), jsonEscape(v), shellQuote(v),
		strings.ReplaceAll(v, "'", `'\''`))
	return es
}

// base64Aligned returns the characters of the base64 encoding of v,
// preceded by align (0, 1 or 2) bytes, that depend on v's bytes alone: a
// character holds 6 bits, and those mixing v's bits with a neighbour's
// are left out.
func base64Aligned(enc *base64.Encoding, v string, align int) string {
	b := make([]byte, align+len(v))
	copy(b[align:], v)
	s := enc.EncodeToString(b)
	from := (8*align + 5) / 6
	to := (8 * (align + len(v))) / 6
	if from >= to {
		return ""
	}
	return s[from:to]
}

// wrapped returns the lines of s wrapped every width bytes, when s is
// longer than a line.
func wrapped(s string, width int) []string {
	if len(s) <= width {
		return nil
	}
	var ls []string
	for len(s) > width {
		ls = append(ls, s[:width])
		s = s[width:]
	}
	return append(ls, s)
}

// jsonEscape returns v as a JSON string without its quotes, with < > &
// as they are (as jq and most encoders write them).
func jsonEscape(v string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// shellQuote returns v quoted as bash's printf %q does: with backslashes
// before the characters the shell treats specially, or, when v holds a
// control character or invalid UTF-8, in $'…' with C escapes.
func shellQuote(v string) string {
	ansi := !utf8.ValidString(v)
	for i := 0; i < len(v) && !ansi; i++ {
		ansi = v[i] < 0x20 || v[i] == 0x7f
	}
	var b strings.Builder
	if ansi {
		b.WriteString("$'")
		for len(v) > 0 {
			r, size := utf8.DecodeRuneInString(v)
			if r == utf8.RuneError && size <= 1 || r < 0x20 || r == 0x7f {
				c := v[0]
				if e := ansiEscapes[c]; e != "" {
					b.WriteString(e)
				} else {
					fmt.Fprintf(&b, `\%03o`, c)
				}
				v = v[1:]
				continue
			}
			switch r {
			case '\\':
				b.WriteString(`\\`)
			case '\'':
				b.WriteString(`\'`)
			default:
				b.WriteString(v[:size])
			}
			v = v[size:]
		}
		b.WriteString("'")
		return b.String()
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if strings.IndexByte(" '\"\\|&;()<>!{}*[]?^$`,", c) >= 0 || i == 0 && (c == '~' || c == '#') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

var ansiEscapes = [256]string{
	'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`, 0x1b: `\E`,
}

// A Writer writes to its destination what is written to it, with the
// patterns of its Masker replaced by Replacement (see Masker,
// Streams). It holds back fewer bytes than the longest pattern between
// writes (at most 6 × MaxValueBytes); Flush writes them. A Writer is
// safe for concurrent use.
type Writer struct {
	mu   sync.Mutex
	m    *Masker
	dst  io.Writer
	held []byte // the bytes held back, and room for a piece of a write
	st   maskState
	out  []byte
	err  error
}

// pieceBytes is how much of a write is masked at once, bounding what a
// Writer allocates beyond the bytes it holds back.
const pieceBytes = 64 << 10

// Write masks p and writes it on, except the bytes at its end that could
// begin a pattern. It fails when the destination failed, and from then on
// at once with that error.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 && w.err == nil {
		piece := p[:min(len(p), pieceBytes)]
		p = p[len(piece):]
		w.write(piece, false)
	}
	if w.err != nil {
		return 0, w.err
	}
	return n, nil
}

// Flush writes the bytes held back, masked.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.write(nil, true)
	return w.err
}

// write masks the held bytes and piece (with final, all of them) and
// writes out what can no longer begin a pattern. It holds the Masker's
// read lock while it masks, not while it writes: a destination that is
// stuck does not stop values from being added.
func (w *Writer) write(piece []byte, final bool) {
	buf, inHeld := piece, len(w.held) > 0
	if inHeld {
		buf = append(w.held, piece...)
		w.held = buf
	}
	if len(buf) == 0 {
		return
	}
	out, cut, masked := w.out[:0], len(buf), false
	w.m.mu.RLock()
	if len(w.m.m.pats) > 0 {
		out, cut, masked = w.m.m.mask(out, buf, final, &w.st)
	}
	w.m.mu.RUnlock()
	if masked {
		w.emit(out)
		w.out = out[:0]
	} else {
		w.emit(buf[:cut])
	}
	if cut < len(buf) {
		rest := buf[cut:]
		if inHeld {
			// buf is w.held: move the rest to its start.
			w.held = buf[:copy(buf, rest)]
		} else {
			w.held = append(w.held[:0], rest...)
		}
	} else {
		w.held = w.held[:0]
	}
	if final {
		w.st = maskState{}
	}
}

func (w *Writer) emit(b []byte) {
	if len(b) > 0 && w.err == nil {
		_, w.err = w.dst.Write(b)
	}
}

// maskState carries a run of masked bytes from one piece of a stream to
// the next.
type maskState struct {
	// cover is how many of the held bytes a pattern found before covers;
	// open, whether the last thing written was Replacement for a run
	// that reaches the held bytes (so that one continuing it adds none).
	cover int
	open  bool
}

// matcher finds patterns: a pattern is looked for where its first four
// bytes (MinValueBytes) are. A bitset indexed by a hash of each four-byte
// window of the input rules most positions out; at the others the
// patterns starting with that window are compared.
type matcher struct {
	pats    []string
	set     map[string]struct{}
	size    int
	maxLen  int
	shift   uint     // 32 - log2(len(bitset) * 64)
	bitset  []uint64 // of hash(first four bytes) of each pattern
	buckets map[uint32][]int32
	// pre1, pre2, pre3 are the patterns' first 1, 2 and 3 bytes, for
	// the bytes at the end of a write that may begin one; pre3 by hash.
	pre1 [4]uint64
	pre2 []uint64
	pre3 []uint64
}

const (
	gramBytes  = 4 // == MinValueBytes
	hashMul    = 0x9E3779B1
	minBitsLog = 16
	maxBitsLog = 24
)

func gram(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func (mt *matcher) add(p string) {
	if _, ok := mt.set[p]; ok {
		return
	}
	if mt.set == nil {
		mt.set = map[string]struct{}{}
		mt.buckets = map[uint32][]int32{}
		mt.pre2 = make([]uint64, 1<<16/64)
		mt.pre3 = make([]uint64, 1<<16/64)
		mt.resize(minBitsLog)
	}
	mt.set[p] = struct{}{}
	mt.pats = append(mt.pats, p)
	mt.size += len(p)
	mt.maxLen = max(mt.maxLen, len(p))
	// About 1/64 of the bitset is set: few false hits.
	if log := bits.Len(uint(len(mt.pats)*64)) - 1; log > int(32-mt.shift) && log <= maxBitsLog {
		mt.resize(log)
	}
	g := gram([]byte(p[:gramBytes]))
	mt.setBit(g)
	mt.buckets[g] = append(mt.buckets[g], int32(len(mt.pats)-1))
	mt.pre1[p[0]>>6] |= 1 << (p[0] & 63)
	k2 := uint(p[0]) | uint(p[1])<<8
	mt.pre2[k2>>6] |= 1 << (k2 & 63)
	k3 := pre3Hash(p[0], p[1], p[2])
	mt.pre3[k3>>6] |= 1 << (k3 & 63)
}

func (mt *matcher) resize(log int) {
	mt.shift = uint(32 - log)
	mt.bitset = make([]uint64, 1<<log/64)
	for g := range mt.buckets {
		mt.setBit(g)
	}
}

func (mt *matcher) setBit(g uint32) {
	h := (g * hashMul) >> mt.shift
	mt.bitset[h>>6] |= 1 << (h & 63)
}

func pre3Hash(a, b, c byte) uint32 {
	return ((uint32(a) | uint32(b)<<8 | uint32(c)<<16) * hashMul) >> 16
}

// mayBegin reports whether the n < 4 bytes b may begin a pattern
// (false positives allowed).
func (mt *matcher) mayBegin(b []byte) bool {
	switch len(b) {
	case 1:
		return mt.pre1[b[0]>>6]&(1<<(b[0]&63)) != 0
	case 2:
		k := uint(b[0]) | uint(b[1])<<8
		return mt.pre2[k>>6]&(1<<(k&63)) != 0
	case 3:
		k := pre3Hash(b[0], b[1], b[2])
		return mt.pre3[k>>6]&(1<<(k&63)) != 0
	}
	return false
}

// next returns the first position from i on whose four bytes may begin
// a pattern, or len(b)-3 (or more) when there is none.
func (mt *matcher) next(b []byte, i int) int {
	set, shift := mt.bitset, mt.shift
	// Five windows from one eight-byte load; where one may begin a
	// pattern, the loop below finds which.
	for ; i+8 <= len(b); i += 5 {
		v := binary.LittleEndian.Uint64(b[i:])
		h0 := (uint32(v) * hashMul) >> shift
		h1 := (uint32(v>>8) * hashMul) >> shift
		h2 := (uint32(v>>16) * hashMul) >> shift
		h3 := (uint32(v>>24) * hashMul) >> shift
		h4 := (uint32(v>>32) * hashMul) >> shift
		if (set[h0>>6]>>(h0&63)|set[h1>>6]>>(h1&63)|set[h2>>6]>>(h2&63)|set[h3>>6]>>(h3&63)|set[h4>>6]>>(h4&63))&1 != 0 {
			break
		}
	}
	for ; i+gramBytes <= len(b); i++ {
		h := (binary.LittleEndian.Uint32(b[i:]) * hashMul) >> shift
		if set[h>>6]&(1<<(h&63)) != 0 {
			return i
		}
	}
	return i
}

// mask appends to out buf[:cut] masked, where cut is the first position
// of buf that could begin a pattern continuing past buf's end (len(buf)
// when final: buf ends the stream). It reports whether anything was
// masked; if not, out is unchanged and buf[:cut] is the output. st
// carries a masked run from the previous call and to the next.
func (mt *matcher) mask(out, buf []byte, final bool, st *maskState) ([]byte, int, bool) {
	n := len(buf)
	cut := n
	covEnd, run := st.cover, st.open
	plain := covEnd // start of the bytes not written yet
	masked := covEnd > 0
	for i := 0; i < n; {
		if i+gramBytes > n {
			if !final && mt.mayBegin(buf[i:]) {
				cut = i
				break
			}
			i++
			continue
		}
		if i = mt.next(buf, i); i+gramBytes > n {
			continue
		}
		longest, partial := 0, false
		for _, k := range mt.buckets[gram(buf[i:])] {
			p := mt.pats[k]
			switch {
			case len(p) <= n-i:
				if len(p) > longest && string(buf[i:i+len(p)]) == p {
					longest = len(p)
				}
			case !final && string(buf[i:]) == p[:n-i]:
				partial = true
			}
		}
		if partial {
			cut = i
			break
		}
		if longest > 0 {
			if !run || i > covEnd {
				out = append(out, buf[plain:i]...)
				out = append(out, Replacement...)
				run = true
			}
			masked = true
			covEnd = max(covEnd, i+longest)
			plain = covEnd
		}
		i++
	}
	if !masked {
		if cut > 0 {
			*st = maskState{}
		}
		return out, cut, false
	}
	if plain < cut {
		out = append(out, buf[plain:cut]...)
	}
	*st = maskState{cover: max(0, covEnd-cut), open: run && covEnd >= cut}
	return out, cut, true
}
