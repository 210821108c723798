package cli

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPrefixWriterWholeLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &console{w: &out}
	w := c.prefixed("[a] ")
	for _, chunk := range []string{"one\ntw", "o\n", "", "three", "\nfour"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.Equal(t, "[a] one\n[a] two\n[a] three\n", out.String(), "the partial line waits")
	w.Flush()
	require.Equal(t, "[a] one\n[a] two\n[a] three\n[a] four\n", out.String())
	w.Flush()
	require.Equal(t, "[a] one\n[a] two\n[a] three\n[a] four\n", out.String(), "flush twice is harmless")
}

func TestPrefixWriterLongLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := (&console{w: &out}).prefixed("> ")
	long := strings.Repeat("x", maxLine+10)
	_, _ = w.Write([]byte(long))
	require.Equal(t, "> "+long+"\n", out.String(), "a line longer than maxLine is not held back")
}

// TestPrefixWriterConcurrentJobs: lines from parallel jobs never mix
// within a line.
func TestPrefixWriterConcurrentJobs(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &console{w: &out}
	var wg sync.WaitGroup
	for j := range 8 {
		wg.Go(func() {
			w := c.prefixed(fmt.Sprintf("[job%d] ", j))
			for i := range 200 {
				// Split every line over two writes.
				_, _ = fmt.Fprintf(w, "line %d of job", i)
				_, _ = fmt.Fprintf(w, " %d\n", j)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 8*200)
	for _, l := range lines {
		var j, i, j2 int
		_, err := fmt.Sscanf(l, "[job%d] line %d of job %d", &j, &i, &j2)
		require.NoError(t, err, l)
		require.Equal(t, j, j2, l)
	}
}
