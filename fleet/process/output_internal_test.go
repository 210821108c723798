package process

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/syncbuf"
)

// FuzzJobOutput writes arbitrary step output, in arbitrary pieces, with
// step marks between some of them: what reaches the job's writer is
// exactly the output without the marks, and every mark is passed.
// Output that imitates the start of a mark (its first bytes) is not lost.
func FuzzJobOutput(f *testing.F) {
	f.Add([]byte("hello\nworld"), []byte{3, 0, 5}, uint8(2))
	f.Add([]byte("\x00cikit-step-end-\x00cikit"), []byte{1, 1, 1, 30}, uint8(1))
	f.Add([]byte("no newline"), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, marks uint8) {
		dst := &syncbuf.Buffer{}
		o, err := newJobOutput(dst, nil)
		require.NoError(t, err)
		var want bytes.Buffer
		rest := data
		for i := 0; len(rest) > 0 || i < int(marks%8); i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), len(rest))
			}
			_, err := o.pw.Write(rest[:n])
			require.NoError(t, err)
			want.Write(rest[:n])
			rest = rest[n:]
			if i < int(marks%8) {
				require.True(t, o.step(time.Minute), "the mark was passed")
				require.Equal(t, want.String(), dst.String(), "everything before a mark is out when it passes")
			}
		}
		require.True(t, o.close(time.Minute))
		require.Equal(t, want.String(), dst.String())
	})
}
