package mask_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/secrets/mask"
)

func newMasker(t *testing.T, values ...string) *mask.Masker {
	t.Helper()
	m := mask.New()
	for _, v := range values {
		require.NoError(t, m.Add(v))
	}
	return m
}

// leftOver is what is left of s without its masks and white space: the
// characters an encoding mixes with its neighbours stay visible.
func leftOver(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, mask.Replacement, " ")), "")
}

func TestMaskerAddRefusesShortValues(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, v := range []string{"", "abc", "  ab \n", "\t\t"} {
		err := m.Add(v)
		require.ErrorIs(t, err, mask.ErrTooShort, "%q", v)
		require.Contains(t, err.Error(), fmt.Sprintf("at least %d", mask.MinValueBytes))
		if strings.TrimSpace(v) != "" {
			require.NotContains(t, err.Error(), strings.TrimSpace(v))
		}
	}
	err := m.Add("abc")
	require.Contains(t, err.Error(), "a value of 3 bytes")
	require.ErrorIs(t, m.Add(strings.Repeat("x", mask.MaxValueBytes+1)), mask.ErrTooLong)
	require.Zero(t, m.Len())
	// A multi-line value with short lines is masked whole; its short
	// lines are not patterns.
	require.NoError(t, m.Add("ab\ncd\nlong-enough-line"))
	require.Equal(t, "x *** y", m.String("x ab\ncd\nlong-enough-line y"))
	require.Equal(t, "ab *** cd", m.String("ab long-enough-line cd"))
}

func TestMaskerBounds(t *testing.T) {
	t.Parallel()
	m := mask.New()
	var err error
	for i := 0; err == nil; i++ {
		err = m.Add(fmt.Sprintf("value-%08d", i))
		require.LessOrEqual(t, m.Len(), mask.MaxPatterns)
	}
	require.ErrorContains(t, err, "bounds")
	require.NotContains(t, err.Error(), "value-")
	n := m.Len()
	require.Error(t, m.Add("yet-another-value"))
	require.Equal(t, n, m.Len(), "a refused value registers nothing")
	require.NoError(t, m.Add("value-00000000"), "a value added before is no error")
}

func TestMaskerEncodings(t *testing.T) {
	t.Parallel()
	const v = `p@ss w'rd"&<x>/é?`
	m := newMasker(t, v)
	enc := func(e *base64.Encoding, prefix string) string {
		return e.EncodeToString([]byte(prefix + v))
	}
	var js bytes.Buffer
	je := json.NewEncoder(&js)
	je.SetEscapeHTML(false)
	require.NoError(t, je.Encode(map[string]string{"password": v}))
	for _, tc := range []struct {
		name, text string
		left       int // characters of the text that may stay visible
	}{
		{"raw", "token=" + v + ";", len("token=;")},
		{"base64", enc(base64.StdEncoding, ""), 1},
		{"base64 after 1 byte", enc(base64.StdEncoding, "x"), 3},
		{"base64 after 2 bytes", enc(base64.StdEncoding, "xy"), 4},
		{"base64 after 3 bytes", enc(base64.StdEncoding, "xyz"), 4 + 1},
		{"base64url", enc(base64.URLEncoding, ""), 1},
		{"base64url after 1 byte", enc(base64.URLEncoding, "a"), 3},
		{"base64url after 2 bytes", enc(base64.RawURLEncoding, "ab"), 4},
		{"basic auth", "Authorization: Basic " + enc(base64.StdEncoding, "user:"), len("Authorization:Basic") + 7 + 2},
		{"hex", hex.EncodeToString([]byte(v)), 0},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(v))), 0},
		{"query", "https://h/?p=" + url.QueryEscape(v) + "&x=1", len("https://h/?p=&x=1")},
		{"path", "https://h/" + url.PathEscape(v) + "/x", len("https://h//x")},
		{"json", js.String(), len(`{"password":""}`)},
		{"single quotes", `echo '` + strings.ReplaceAll(v, "'", `'\''`) + `'`, len("echo''")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.String(tc.text)
			require.Contains(t, got, mask.Replacement)
			require.NotContains(t, got, v)
			left := strings.TrimRight(leftOver(got), "=")
			require.LessOrEqual(t, len(left), tc.left, "%s masked: %s", tc.text, got)
		})
	}
}

// bashOut runs script with bash, X in its environment, and returns its
// output.
func bashOut(t *testing.T, x, script string) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed: %v", err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "X="+x, "LC_ALL=C.UTF-8")
	out, err := cmd.Output()
	require.NoError(t, err, script)
	return string(out)
}

// TestMaskerTools masks what real tools print of a value: what is left
// is at most the few characters that also hold other bits.
func TestMaskerTools(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"base64", "xxd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	values := []string{
		"s3cr3t-v4lue",
		"it's a \"quoted\" $value `x` ~#!",
		"tab\tand\x01control",
		"ghp_0123456789abcdefghijABCDEFGHIJ0123456789xyzXYZ", // 50 bytes: xxd -p wraps its hex
		"a-long-value-of-more-than-fifty-seven-bytes-which-base64-wraps-at-76-characters-0123456789", // base64 wraps too
	}
	for _, v := range values {
		m := newMasker(t, v)
		for _, tc := range []struct {
			script string
			left   int // characters that may stay visible
		}{
			{`echo "$X"`, 0},
			{`printf %s "$X" | base64`, 3},
			{`printf %s "$X" | base64 -w0`, 3},
			{`printf %s "$X" | xxd -p`, 0},
			{`printf %s "$X" | xxd -p -u`, 0},
			{`printf '%q\n' "$X"`, 0},
			{`printf '%s' "${X:0:5}"; printf '%s\n' "${X:5}"`, 0},
			{`printf 'before '; printf '%s' "$X" | head -c 7; printf '%s' "$X" | tail -c +8; echo ' after'`, 0},
		} {
			out := bashOut(t, v, tc.script)
			var b bytes.Buffer
			w := m.Writer(&b)
			_, err := io.Copy(w, strings.NewReader(out))
			require.NoError(t, err)
			require.NoError(t, w.Flush())
			got := b.String()
			left := strings.TrimSuffix(leftOver(got), "==")
			left = strings.TrimPrefix(strings.TrimSuffix(left, "after"), "before")
			require.LessOrEqual(t, len(left), tc.left, "%s with X=%q:\n%s\nmasked:\n%s", tc.script, v, out, got)
		}
	}
}

// TestMaskerShellQuoteMatchesBash: the printf %q form is bash's.
func TestMaskerShellQuoteMatchesBash(t *testing.T) {
	t.Parallel()
	for _, v := range []string{
		"abc def", "it's", `a"b`, "x$y`z", "~home", "a~b", "#x", "a#b", "a=b", "a,b", "a:b",
		"{a}", "a%b", "a+b@c", "tab\there", "nl\nx", "\x01ctl", "é-é-é", "a!b^c", "a*b?[c]",
		"a|b&c;d(e)<f>", `a\b`, "a\x1bb", "a\x7f", "a'b\nc", "x\\y\tq", "x\v\f\a\b\r-x", "é\x01xx",
		"\xffzzz",
	} {
		v += "-zz" // long enough to be masked
		q := strings.TrimSuffix(bashOut(t, v, `printf '%q\n' "$X"`), "\n")
		m := newMasker(t, v)
		require.Equal(t, "<***>", m.String("<"+q+">"), "bash quotes %q as %s", v, q)
	}
}

func TestMaskWriterSplits(t *testing.T) {
	t.Parallel()
	const v = "s3cr3t-value-42"
	m := newMasker(t, v)
	text := "before " + v + " after\n"
	for i := 0; i <= len(text); i++ {
		var b bytes.Buffer
		w := m.Writer(&b)
		_, _ = w.Write([]byte(text[:i]))
		_, _ = w.Write([]byte(text[i:]))
		require.NoError(t, w.Flush())
		require.Equal(t, "before *** after\n", b.String(), "split at %d", i)
	}
	// Byte by byte.
	var b bytes.Buffer
	w := m.Writer(&b)
	for i := range len(text) {
		_, _ = w.Write([]byte{text[i]})
	}
	require.NoError(t, w.Flush())
	require.Equal(t, "before *** after\n", b.String())
	// A line break between the pieces makes another text: documented as
	// not masked.
	require.Equal(t, "s3cr3t-\nvalue-42", m.String("s3cr3t-\nvalue-42"))
}

// TestMaskWriterChunkBoundary: a value straddling the 64 KiB chunks a
// reader cuts the output in, or the pieces a Writer masks a big
// write in.
func TestMaskWriterChunkBoundary(t *testing.T) {
	t.Parallel()
	const v = "straddling-secret-value"
	m := newMasker(t, v)
	for _, at := range []int{64<<10 - 1, 64<<10 - 10, 64<<10 - len(v) + 1, 128<<10 - 5} {
		text := strings.Repeat("x", at) + v + strings.Repeat("y", 1000)
		want := strings.Repeat("x", at) + "***" + strings.Repeat("y", 1000)
		// One big write.
		var b bytes.Buffer
		w := m.Writer(&b)
		_, _ = w.Write([]byte(text))
		require.NoError(t, w.Flush())
		require.Equal(t, want, b.String())
		// Through a reader of 64 KiB chunks.
		b.Reset()
		w = m.Writer(&b)
		_, err := io.CopyBuffer(w, struct{ io.Reader }{strings.NewReader(text)}, make([]byte, 64<<10))
		require.NoError(t, err)
		require.NoError(t, w.Flush())
		require.Equal(t, want, b.String())
	}
}

// TestMaskWriterHoldsLittle: a Writer holds back only what could
// begin a pattern, and writes the rest at once.
func TestMaskWriterHoldsLittle(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "abcdefgh")
	var b bytes.Buffer
	w := m.Writer(&b)
	_, _ = w.Write([]byte("hello world\nxx abcde"))
	require.Equal(t, "hello world\nxx ", b.String())
	_, _ = w.Write([]byte("fgz"))
	require.Equal(t, "hello world\nxx abcdefgz", b.String())
	_, _ = w.Write([]byte(" abc"))
	require.NoError(t, w.Flush())
	require.Equal(t, "hello world\nxx abcdefgz abc", b.String())
}

// TestMaskWriterValueAddedLater: a value added while a writer holds the
// start of it is masked there too.
func TestMaskWriterValueAddedLater(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "token-one")
	var b bytes.Buffer
	w := m.Writer(&b)
	_, _ = w.Write([]byte("x token-"))
	require.NoError(t, m.Add("token-two"))
	_, _ = w.Write([]byte("two y"))
	require.NoError(t, w.Flush())
	require.Equal(t, "x *** y", b.String())
}

// TestMaskWriterHeldRunContinues: a value held back as the possible
// start of a longer pattern, right after a masked one, is masked when it
// turns out to be the value alone.
func TestMaskWriterHeldRunContinues(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "aaa'") // also registers aaa'\'' (inside '…')
	var b bytes.Buffer
	w := m.Writer(&b)
	_, _ = w.Write([]byte("aaa'aaa'"))
	require.NoError(t, w.Flush())
	require.Equal(t, "***", b.String())
}

func TestMaskerOverlaps(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "abcdef", "defghi", "zzzz")
	require.Equal(t, "x***y", m.String("xabcdefghiy"))
	require.Equal(t, "x***y", m.String("xabcdefdefghiy"), "adjacent values")
	require.Equal(t, "x***", m.String("xzzzzzzzzz"))
	require.Equal(t, "*** ***", m.String("abcdef defghi"))
}

func TestMaskWriterPassesThrough(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "never-in-the-log")
	text := strings.Repeat("plain log line with never-in-the-lo and nothing else\n", 5000)
	var b bytes.Buffer
	w := m.Writer(&b)
	for i := 0; i < len(text); i += 777 {
		_, _ = w.Write([]byte(text[i:min(i+777, len(text))]))
	}
	require.NoError(t, w.Flush())
	require.Equal(t, text, b.String())
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestMaskWriterError(t *testing.T) {
	t.Parallel()
	w := newMasker(t, "some-value").Writer(failWriter{})
	_, err := w.Write([]byte("hello\n"))
	require.ErrorContains(t, err, "disk full")
	_, err = w.Write([]byte("again\n"))
	require.ErrorContains(t, err, "disk full")
	require.ErrorContains(t, w.Flush(), "disk full")
}

// TestMaskerConcurrent: values are added while writers write (run with
// -race).
func TestMaskerConcurrent(t *testing.T) {
	t.Parallel()
	m := newMasker(t, "first-value")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			var b bytes.Buffer
			w := m.Writer(&b)
			for range 200 {
				_, _ = w.Write([]byte("a line with first-value in it\n"))
			}
			require.NoError(t, w.Flush())
			require.NotContains(t, b.String(), "first-value")
		})
		wg.Go(func() {
			for k := range 50 {
				require.NoError(t, m.Add(fmt.Sprintf("value-%d-%d", i, k)))
				_ = m.String("value-1-1")
			}
		})
	}
	wg.Wait()
	require.Equal(t, "***", m.String("value-3-49"))
}
