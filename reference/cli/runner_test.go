package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "4096": 4096, "1K": 1 << 10, "512M": 512 << 20, "512MiB": 512 << 20, "2G": 2 << 30, "2GB": 2 << 30, "3t": 3 << 40,
	} {
		var b byteSize
		require.NoError(t, b.Set(in), in)
		require.Equal(t, want, int64(b), in)
	}
	for _, in := range []string{"", "1.5G", "-1", "G", "2X", "10E", "9999999T"} {
		var b byteSize
		require.Error(t, b.Set(in), in)
	}
	for b, want := range map[byteSize]string{0: "0", 1000: "1000", 1 << 10: "1K", 3 << 20: "3M", 1536 << 20: "1536M", 4 << 30: "4G"} {
		require.Equal(t, want, b.String())
	}
}
