package compiler

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func row(kv ...any) variant {
	v := variant{values: map[string]any{}}
	for i := 0; i < len(kv); i += 2 {
		v.keys = append(v.keys, kv[i].(string))
		v.values[kv[i].(string)] = kv[i+1]
	}
	return v
}

func names(vs []variant) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.name("job")
	}
	return out
}

// TestMatrixGitHubDocsExample is the include example of GitHub's
// documentation ("Expanding or adding matrix configurations"), with the
// result it documents.
func TestMatrixGitHubDocsExample(t *testing.T) {
	t.Parallel()
	m := &matrixDecl{
		axes: []matrixAxis{{"fruit", []any{"apple", "pear"}}, {"animal", []any{"cat", "dog"}}},
		include: []variant{
			row("color", "green"),
			row("color", "pink", "animal", "cat"),
			row("fruit", "apple", "shape", "circle"),
			row("fruit", "banana"),
			row("fruit", "banana", "animal", "cat"),
		},
	}
	require.Equal(t, 4+5, m.maxSize())
	require.Equal(t, []string{
		"job (apple, cat, pink, circle)",
		"job (apple, dog, green, circle)",
		"job (pear, cat, pink)",
		"job (pear, dog, green)",
		"job (banana)",
		"job (banana, cat)",
	}, names(m.expand()))
}

// TestMatrixExclude is GitHub's exclude example: os × version × environment
// minus two combinations given by partial keys.
func TestMatrixExclude(t *testing.T) {
	t.Parallel()
	m := &matrixDecl{
		axes: []matrixAxis{{"os", []any{"macos-latest", "windows-latest"}}, {"version", []any{12.0, 14.0, 16.0}}, {"environment", []any{"staging", "production"}}},
		exclude: []variant{
			row("os", "macos-latest", "version", 12.0, "environment", "production"),
			row("os", "windows-latest", "version", 16.0),
		},
	}
	got := m.expand()
	require.Len(t, got, 12-1-2)
	require.NotContains(t, names(got), "job (macos-latest, 12, production)")
	require.NotContains(t, names(got), "job (windows-latest, 16, staging)")
	require.Contains(t, names(got), "job (windows-latest, 14, production)")
}

func TestMatrixExcludeObjectSubset(t *testing.T) {
	t.Parallel()
	m := &matrixDecl{
		axes:    []matrixAxis{{"cfg", []any{map[string]any{"os": "linux", "arch": "amd64"}, map[string]any{"os": "linux", "arch": "arm64"}}}},
		exclude: []variant{row("cfg", map[string]any{"arch": "arm64"})},
	}
	got := m.expand()
	require.Len(t, got, 1)
	require.Equal(t, `job ({"arch":"amd64","os":"linux"})`, got[0].name("job"))
}

func TestMatrixIncludeOnlyAndEmptyAxis(t *testing.T) {
	t.Parallel()
	m := &matrixDecl{include: []variant{row("go", 1.2), row("go", "1.21", "experimental", true)}}
	require.Equal(t, []string{"job (1.2)", "job (1.21, true)"}, names(m.expand()))
	require.Equal(t, map[string]string{"go": "1.21", "experimental": "true"}, m.expand()[1].strings())

	empty := &matrixDecl{axes: []matrixAxis{{"os", []any{"linux"}}, {"go", nil}}}
	require.Empty(t, empty.expand())
	require.Equal(t, 0, empty.maxSize())
}

func TestMatrixIncludeDoesNotLeakBetweenCombinations(t *testing.T) {
	t.Parallel()
	m := &matrixDecl{
		axes:    []matrixAxis{{"os", []any{"linux", "mac"}}},
		include: []variant{row("os", "linux", "extra", "x")},
	}
	got := m.expand()
	require.Equal(t, []string{"job (linux, x)", "job (mac)"}, names(got))
	require.Equal(t, []string{"os"}, got[1].keys, "the untouched combination keeps its keys")
}
