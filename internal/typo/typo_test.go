package typo_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/typo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "abc", 0},
		{"abc", "abd", 1},
		{"needs", "neesd", 1}, // a transposition is one edit
		{"allowed_failure", "allow_failure", 2},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // optimal string alignment, not full Damerau
		{"héllo", "hello", 1},
	} {
		require.Equal(t, tc.want, typo.Distance([]rune(tc.a), []rune(tc.b)), "%q %q", tc.a, tc.b)
		require.Equal(t, tc.want, typo.Distance([]rune(tc.b), []rune(tc.a)), "%q %q", tc.b, tc.a)
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	keys := []string{"allow_failure", "env", "image", "name", "needs", "stage", "steps", "timeout"}
	require.Equal(t, "allow_failure", typo.Nearest("allowed_failure", keys, false, nil))
	require.Equal(t, "", typo.Nearest("x", keys, false, nil), "too short to be a typo of anything")
	require.Equal(t, "", typo.Nearest("MATRX", []string{"matrix"}, false, nil), "case counts unless folded")
	require.Equal(t, "matrix", typo.Nearest("MATRX", []string{"matrix"}, true, nil), "case folded")
	budget := 5
	require.Equal(t, "", typo.Nearest("imgae", keys, false, &budget), "the budget ran out before image")
	require.Less(t, budget, 0)
}
