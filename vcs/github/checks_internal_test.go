package github

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The cache keeps the runs used last, at most its size.
func TestRunCacheBounded(t *testing.T) {
	t.Parallel()
	c := newRunCache(2)
	a, b, d := runKey{"acme/api", "1", "a"}, runKey{"acme/api", "1", "b"}, runKey{"acme/api", "1", "d"}
	c.put(a, checkRun{id: 1})
	c.put(b, checkRun{id: 2})
	_, ok := c.get(a) // a is now the most recently used
	require.True(t, ok)
	c.put(d, checkRun{id: 3})
	_, ok = c.get(b)
	require.False(t, ok, "the least recently used is dropped")
	run, ok := c.get(a)
	require.True(t, ok)
	require.Equal(t, checkRun{id: 1}, run)
	c.put(a, checkRun{id: 4, completed: true})
	run, _ = c.get(a)
	require.Equal(t, checkRun{id: 4, completed: true}, run, "replaced")
	require.Equal(t, 2, c.lru.Len())
	require.Len(t, c.entries, 2)
}
