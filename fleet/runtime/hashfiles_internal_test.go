package runtime

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMayMatchUnder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pat, dir string
		want     bool
	}{
		{"src/*.go", "src", true},
		{"src/*.go", "src/deep", false},
		{"src/*.go", "other", false},
		{"src/**/*.go", "src/a/b/c", true},
		{"**/go.sum", ".git", true},
		{"*/deep/*.go", "src", true},
		{"*/deep/*.go", "src/deep", true},
		{"*/deep/*.go", "src/other", false},
		{"go.sum", "vendor", false},
		{"src/**", "src/x", true},
		{"src/**", "lib", false},
	} {
		require.Equal(t, tt.want, mayMatchUnder(strings.Split(tt.pat, "/"), strings.Split(tt.dir, "/")), "%s under %s", tt.pat, tt.dir)
	}
}
