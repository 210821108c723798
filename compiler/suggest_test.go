package compiler

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	keys := []string{"allow_failure", "env", "image", "name", "needs", "stage", "steps", "timeout"}
	for name, want := range map[string]string{
		"allowed_failure": "allow_failure",
		"imgae":           "image",
		"step":            "steps",
		"Steps":           "steps",
		"need":            "needs",
		"timeot":          "timeout",
		"x":               "", // too short to be a typo of anything
		"cache":           "",
		"services":        "",
		"":                "",
	} {
		c := newChecker("f")
		require.Equal(t, want, c.suggest(name, keys), "%q", name)
	}
	c := newChecker("f")
	require.Equal(t, "build", c.suggest("biuld", []string{"test", "build", "guild"}))
	require.Equal(t, "", c.suggest("zz_0", []string{"aA_0"}), "half the name changed")
	require.Equal(t, "jobs", c.suggest("job", []string{"env", "jobs", "stages"}))
}

func TestList(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a, b", list([]string{"a", "b"}))
	var many []string
	for range 20 {
		many = append(many, "j")
	}
	require.Equal(t, "j, j, j, j, j, j, j, j, j, j, j, j, … (8 more)", list(many))
}

func TestValidNames(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"build": true, "_x": true, "test.unit": true, "e2e-web": true, "A9_.-": true,
		"": false, "9a": false, ".a": false, "-a": false, "a b": false, "a/b": false, "é": false,
	} {
		require.Equal(t, want, validJobID(id), "%q", id)
	}
	for name, want := range map[string]bool{
		"PATH": true, "_x1": true, "a": true,
		"": false, "1X": false, "MY-VAR": false, "X.Y": false, "A B": false,
	} {
		require.Equal(t, want, validEnvName(name), "%q", name)
	}
}
