package runtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/runtime"
)

var envFiles = []struct {
	name string
	in   string
	want []runtime.KV
}{
	{"empty", "", nil},
	{"simple", "A=1\nB=two words\n", []runtime.KV{{"A", "1"}, {"B", "two words"}}},
	{"no final newline", "A=1", []runtime.KV{{"A", "1"}}},
	{"empty value", "A=\n", []runtime.KV{{"A", ""}}},
	{"value with equals", "A=b=c\n", []runtime.KV{{"A", "b=c"}}},
	{"value with heredoc marker", "A=x<<y\n", []runtime.KV{{"A", "x<<y"}}},
	{"blank lines skipped", "\nA=1\n\n\nB=2\n", []runtime.KV{{"A", "1"}, {"B", "2"}}},
	{"crlf", "A=1\r\nB=2\r\n", []runtime.KV{{"A", "1"}, {"B", "2"}}},
	{"heredoc", "JSON<<EOF\n{\n  \"a\": 1\n}\nEOF\nB=2\n", []runtime.KV{{"JSON", "{\n  \"a\": 1\n}"}, {"B", "2"}}},
	{"heredoc crlf", "M<<EOF\r\none\r\ntwo\r\nEOF\r\n", []runtime.KV{{"M", "one\ntwo"}}},
	{"heredoc empty", "M<<EOF\nEOF\n", []runtime.KV{{"M", ""}}},
	{"heredoc keeps blank lines", "M<<EOF\n\na\n\nEOF", []runtime.KV{{"M", "\na\n"}}},
	{"heredoc delimiter with equals", "M<<ghadelimiter_1=2\nx\nghadelimiter_1=2\n", []runtime.KV{{"M", "x"}}},
	{"heredoc body looks like assignment", "M<<EOF\nX=1\nEOF\n", []runtime.KV{{"M", "X=1"}}},
	{"heredoc delimiter must be the whole line", "M<<EOF\n EOF\nEOF \nEOF\n", []runtime.KV{{"M", " EOF\nEOF "}}},
	{"repeated name", "A=1\nA=2\n", []runtime.KV{{"A", "1"}, {"A", "2"}}},
}

func TestParseEnvFile(t *testing.T) {
	t.Parallel()
	for _, tt := range envFiles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := runtime.ParseEnvFile(strings.NewReader(tt.in), runtime.DefaultEnvFileBytes)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tt.want, got))
		})
	}
}

func TestParseEnvFileErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"unclosed heredoc", "A=1\nM<<EOF\none\n", 2, `the value of "M" is not closed: no line "EOF" follows`},
		{"no delimiter", "M<<\nx\n", 1, "has no delimiter"},
		{"empty name", "=1\n", 1, "the name is empty"},
		{"empty heredoc name", "<<EOF\nEOF\n", 1, "the name is empty"},
		{"neither form", "A=1\njust text\n", 2, `"just text" is neither NAME=value nor NAME<<DELIMITER`},
		{"space in name", "MY VAR=1\n", 1, "holds \"=\", a space or a control character"},
		{"control in name", "A\rB=1\n", 1, "control character"},
		{"nul in value", "A=a\x00b\n", 1, "NUL byte"},
		{"nul in heredoc", "A<<E\n\x00\nE\n", 1, "NUL byte"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := runtime.ParseEnvFile(strings.NewReader(tt.in), runtime.DefaultEnvFileBytes)
			var fe *runtime.FileError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.line, fe.Line)
			require.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestParseEnvFileLimit(t *testing.T) {
	t.Parallel()
	in := "A=" + strings.Repeat("x", 98) // 100 bytes
	_, err := runtime.ParseEnvFile(strings.NewReader(in), 100)
	require.NoError(t, err)
	_, err = runtime.ParseEnvFile(strings.NewReader(in+"\n"), 100)
	require.True(t, errors.Is(err, runtime.ErrFileTooLarge), "%v", err)
	require.Contains(t, err.Error(), "more than 100 bytes")
	_, err = runtime.ParseEnvFile(strings.NewReader(in), 0)
	require.ErrorContains(t, err, "must be positive")
	_, err = runtime.ParsePathFile(strings.NewReader(in+"\n"), 100)
	require.ErrorIs(t, err, runtime.ErrFileTooLarge)
}

func TestParsePathFile(t *testing.T) {
	t.Parallel()
	got, err := runtime.ParsePathFile(strings.NewReader("/opt/a/bin\n\n  /opt/b bin  \r\n/opt/c"), 1<<10)
	require.NoError(t, err)
	require.Equal(t, []string{"/opt/a/bin", "/opt/b bin", "/opt/c"}, got)
	require.Equal(t, "/opt/c:/opt/b bin:/opt/a/bin:/usr/bin", runtime.PrependPath("/usr/bin", got, ":"))
	require.Equal(t, "/x", runtime.PrependPath("", []string{"/x"}, ":"))

	_, err = runtime.ParsePathFile(strings.NewReader("/a\n/b\x00\n"), 1<<10)
	var fe *runtime.FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 2, fe.Line)
}

// FuzzParseEnvFile feeds arbitrary bytes to the environment file parsers.
//
// Invariant: ParseEnvFile never panics and fails only with a *FileError
// whose line is within the file, or ErrFileTooLarge past the limit. Each
// variable it returns has a valid name and a value without NUL, and
// writing them back (NAME=value, or the heredoc form with a delimiter
// absent from the value for a multi-line one) parses to the same variables. ParsePathFile never panics and
// returns trimmed, non-empty directories.
func FuzzParseEnvFile(f *testing.F) {
	for _, tt := range envFiles {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("M<<EOF\none\n"))
	f.Add([]byte("A\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 4 << 10
		kvs, err := runtime.ParseEnvFile(strings.NewReader(string(data)), limit)
		if err != nil {
			var fe *runtime.FileError
			switch {
			case errors.Is(err, runtime.ErrFileTooLarge):
				if len(data) <= limit {
					t.Fatalf("too large at %d bytes", len(data))
				}
			case errors.As(err, &fe):
				if fe.Line < 1 || fe.Line > strings.Count(string(data), "\n")+1 {
					t.Fatalf("line %d out of range: %v", fe.Line, err)
				}
			default:
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		var b strings.Builder
		for _, kv := range kvs {
			if kv.Name == "" || strings.ContainsFunc(kv.Name, func(r rune) bool { return r == '=' || r == ' ' || r < 0x20 || r == 0x7f }) || strings.Contains(kv.Value, "\x00") {
				t.Fatalf("bad variable %q", kv)
			}
			if !strings.Contains(kv.Value, "\n") {
				b.WriteString(kv.Name + "=" + kv.Value + "\n")
				continue
			}
			delim := "D"
			for strings.Contains(kv.Value, delim) {
				delim += "D"
			}
			b.WriteString(kv.Name + "<<" + delim + "\n" + kv.Value + "\n" + delim + "\n")
		}
		again, err := runtime.ParseEnvFile(strings.NewReader(b.String()), int64(b.Len())+1)
		if err != nil {
			t.Fatalf("rewritten file fails: %v\n%q", err, b.String())
		}
		if diff := cmp.Diff(kvs, again); diff != "" && !(len(kvs) == 0 && len(again) == 0) {
			t.Fatalf("rewritten file differs:\n%s", diff)
		}
		dirs, err := runtime.ParsePathFile(strings.NewReader(string(data)), limit)
		if err == nil {
			for _, d := range dirs {
				if d == "" || d != strings.TrimSpace(d) {
					t.Fatalf("bad directory %q", d)
				}
			}
		}
	})
}
