package groupcommit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRounds(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "b", "a", "c", "a", "b"}
	got := Rounds([]int{0, 1, 2, 3, 4, 5}, func(i int) string { return keys[i] })
	require.Equal(t, [][]int{{0, 1, 3}, {2, 5}, {4}}, got)
	require.Empty(t, Rounds(nil, func(i int) string { return keys[i] }))
	require.Equal(t, [][]int{{4, 1}}, Rounds([]int{4, 1}, func(i int) string { return keys[i] }), "todo's order, not the indexes'")
}
