package compiler

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

// TestBuiltinInputsAgreeWithTheRunner: every input the compiler accepts
// without a warning is one the runner reads (expr.BuiltinInputs), and
// every input the runner reads is one the compiler knows. An input the
// runner does not read must carry the warning the compiler gives where it
// is written: accepted and ignored, it would be a silent surprise.
func TestBuiltinInputsAgreeWithTheRunner(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, []string{"cache", "cache/restore", "cache/save", "upload-artifact", "download-artifact"}, slices.Collect(maps.Keys(builtinInputs)))
	for action, inputs := range builtinInputs {
		read := expr.BuiltinInputs(action)
		require.NotEmpty(t, read, action)
		for name, in := range inputs {
			if slices.Contains(read, name) {
				require.Empty(t, in.unhonoured, "%s: input %q is read by the runner but warned of as unhonoured", action, name)
				continue
			}
			require.NotEmpty(t, in.unhonoured, "%s: input %q is accepted without a warning but the runner does not read it", action, name)
		}
		for _, name := range read {
			_, ok := inputs[name]
			require.True(t, ok, "%s: the runner reads input %q, which the compiler does not know", action, name)
		}
	}
}
