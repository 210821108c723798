package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

// TestContextCacheIsBounded: the cache answers what it was given, a run
// without a context included, and forgets the oldest runs once their
// contexts pass runContextCacheBytes.
func TestContextCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c contextCache
	_, _, ok := c.get("r0")
	require.False(t, ok)
	c.put("none", nil, 7)
	rc, number, ok := c.get("none")
	require.True(t, ok, "a run without a context is remembered too")
	require.Nil(t, rc)
	require.Equal(t, int64(7), number, "with its number")

	payload := json.RawMessage(`"` + strings.Repeat("p", cikit.MaxPayloadBytes-2) + `"`)
	n := runContextCacheBytes/cikit.MaxPayloadBytes + 2
	for i := range n {
		c.put(fmt.Sprint("r", i), &cikit.RunContext{Repository: fmt.Sprint("acme/", i), Payload: payload}, int64(i+1))
	}
	require.LessOrEqual(t, c.bytes, runContextCacheBytes)
	_, _, ok = c.get("r0")
	require.False(t, ok, "the oldest is forgotten")
	rc, _, ok = c.get(fmt.Sprint("r", n-1))
	require.True(t, ok)
	require.Equal(t, fmt.Sprint("acme/", n-1), rc.Repository)
	require.Len(t, c.runs, c.order.Len())
}
