package expr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

// fakeHash stands for the runner's hash of the files: it names the globs
// it was given, so a test sees which template produced which text.
func fakeHash(globs []string) (string, error) {
	return "<" + strings.Join(globs, "|") + ">", nil
}

// cacheKeys are keys and how they render with fakeHash. They also seed
// FuzzRenderCacheKey.
var cacheKeys = []struct {
	key, want string
}{
	{"", ""},
	{"deps", "deps"},
	{"deps-{{ hash(\"go.sum\") }}", "deps-<go.sum>"},
	{"{{hash(\"a\",\"b/**\")}}", "<a|b/**>"},
	{"x-{{ hash( \"a\" , \"b\" ) }}-y-{{ hash(\"c\") }}", "x-<a|b>-y-<c>"},
	{"{{ hash(\"a\",) }}", "<a>"},
	{"{{ hash(\"with \\\"quote\\\"\") }}", "<with \"quote\">"},
	{"a } b }} c", "a } b }} c"},
	{"{ {not a template} }", "{ {not a template} }"},
}

func TestRenderCacheKey(t *testing.T) {
	t.Parallel()
	for _, tt := range cacheKeys {
		got, err := expr.RenderCacheKey(tt.key, fakeHash)
		require.NoError(t, err, tt.key)
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("RenderCacheKey(%q) (-want +got):\n%s", tt.key, diff)
		}
	}
}

// cacheKeyErrors are keys that do not render, and a part of the error.
// They also seed FuzzRenderCacheKey.
var cacheKeyErrors = []struct {
	key, msg string
}{
	{"deps-{{ hash(\"go.sum\")", "unterminated {{"},
	{"{{ matrix.os }}", "not a hash call"},
	{"{{ }}", "not a hash call"},
	{"{{ hash() }}", "at least one file or glob"},
	{"{{ hash(\"a\" }}", `close the call with ")"`},
	{"{{ hash('a') }}", "double-quoted strings, got 'a'"},
	{"{{ hash(a) }}", "double-quoted strings, got a"},
	{"{{ hash(\"\") }}", "hash of an empty path"},
	{"{{ hash(\"a\" \"b\") }}", "separate the arguments of hash with commas"},
	{"{{ hash(\"a\",,\"b\") }}", "double-quoted strings, got ,"},
	{"ok-{{ hash(\"a\") }}-{{ hash(b) }}", "{{ hash(b) }}"},
}

func TestRenderCacheKeyErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range cacheKeyErrors {
		got, err := expr.RenderCacheKey(tt.key, fakeHash)
		require.Error(t, err, tt.key)
		require.Contains(t, err.Error(), tt.msg, tt.key)
		require.Empty(t, got, tt.key)
	}
}

func TestRenderCacheKeyHashError(t *testing.T) {
	t.Parallel()
	errNoFiles := errors.New("no file matches")
	calls := 0
	_, err := expr.RenderCacheKey(`k-{{ hash("a") }}-{{ hash("b") }}`, func([]string) (string, error) {
		calls++
		return "", errNoFiles
	})
	require.ErrorIs(t, err, errNoFiles)
	require.Equal(t, 1, calls, "rendering stops at the first error")

	_, err = expr.RenderCacheKey("plain", func([]string) (string, error) {
		return "", fmt.Errorf("hash called for a key without templates")
	})
	require.NoError(t, err)
}

func TestParseHashCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		call string
		want []string
		err  error
	}{
		{`hash("go.sum")`, []string{"go.sum"}, nil},
		{`hash("a", "b/**", "c")`, []string{"a", "b/**", "c"}, nil},
		{`matrix.os`, nil, expr.ErrNotHashCall},
		{`hashFiles("a")`, nil, expr.ErrNotHashCall},
	}
	for _, tt := range tests {
		got, err := expr.ParseHashCall(tt.call)
		require.ErrorIs(t, err, tt.err, tt.call)
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseHashCall(%q) (-want +got):\n%s", tt.call, diff)
		}
	}
}

func TestBuiltinAction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		uses string
		want string
		ok   bool
	}{
		{"actions/upload-artifact@v4", "upload-artifact", true},
		{"actions/download-artifact@v4.1.8", "download-artifact", true},
		{"actions/cache@v4", "cache", true},
		{"actions/cache/restore@v4", "cache/restore", true},
		{"actions/cache/save@0c45773b623bea8c8e75f6c82b208c3cf94ea4f9", "cache/save", true},
		{"Actions/Cache@main", "cache", true},
		{"actions/cache", "", false},
		{"actions/cache@", "", false},
		{"actions/checkout@v4", "", false},
		{"actions/cache/other@v4", "", false},
		{"my/actions/cache@v4", "", false},
		{"./actions/cache", "", false},
		{"docker://actions/cache@v4", "", false},
	}
	for _, tt := range tests {
		got, ok := expr.BuiltinAction(tt.uses)
		require.Equal(t, tt.ok, ok, tt.uses)
		require.Equal(t, tt.want, got, tt.uses)
	}
}
