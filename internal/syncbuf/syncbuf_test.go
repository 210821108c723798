package syncbuf_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cikit/cikit/internal/syncbuf"
)

// TestBuffer: concurrent writes all land, whole, and reads see them (the
// race detector checks the locking).
func TestBuffer(t *testing.T) {
	t.Parallel()
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "writer %d\n", i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	got := b.Bytes()
	got[0] = 'X'
	if b.String()[0] == 'X' {
		t.Fatal("Bytes shares the buffer's memory")
	}
}
