package refslug_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/refslug"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"main":                         "main",
		"feature/Login-Page":           "feature-login-page",
		"Feature/My_Branch-1.2":        "feature-my-branch-1-2",
		"-x_y.z-":                      "x-y-z",
		"über":                         "ber",
		"a" + string(make([]byte, 70)): "a",
		"":                             "",
	} {
		require.Equal(t, want, refslug.Of(in), "%q", in)
	}
	require.Len(t, refslug.Of(strings.Repeat("a", 100)), refslug.MaxLen)
	// Cut first, then trimmed: a dash at byte 63 goes.
	require.Equal(t, strings.Repeat("a", 62), refslug.Of(strings.Repeat("a", 62)+"/b"))
}
