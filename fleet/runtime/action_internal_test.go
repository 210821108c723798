package runtime

import (
	"strings"
	"testing"
)

// FuzzParseAction feeds arbitrary metadata to the action.yml reader,
// seeded with composite and other actions.
//
// Invariant: parseAction never panics; it fails with an error naming the
// file, or returns a composite action whose steps each have run or uses,
// not both, a shell for a run step, and a name.
func FuzzParseAction(f *testing.F) {
	f.Add("runs:\n  using: composite\n  steps:\n    - run: echo hi\n      shell: bash\n      env: {A: 1}\n")
	f.Add("inputs:\n  a: {required: true, default: x}\noutputs:\n  o: {value: '${{ steps.s.outputs.o }}'}\nruns:\n  using: composite\n  steps:\n    - {id: s, uses: ./x, with: {k: v}, if: always()}\n")
	f.Add("runs:\n  using: node20\n  main: index.js\n")
	f.Add("a: &a [*a]\n")
	f.Fuzz(func(t *testing.T, data string) {
		a, err := parseAction([]byte(data), "/x/action.yml", "/x")
		if err != nil {
			if !strings.Contains(err.Error(), "/x/action.yml") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		for i, s := range a.Steps {
			if (strings.TrimSpace(s.Run) == "") == (s.Uses == "") || (s.Run != "" && s.Shell == "") || s.Name == "" {
				t.Fatalf("step %d: %+v", i, s)
			}
		}
	})
}
