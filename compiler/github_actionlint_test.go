package compiler_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/internal/testenv"
)

// actionlintLines says, for each of actionlint's error examples, on which
// lines the compiler must report: the lines of actionlint's findings in
// the example's .out, except those out of scope (with the reason), or
// lines given here instead when the stored .out is stale (with the
// reason).
var actionlintLines = map[string]struct {
	outOfScope map[int]string // line of a finding -> why it is not checked
	lines      []int          // replaces the .out's lines
	why        string         // why lines replaces them
}{
	"err__both_paths_and_paths_ignore.yaml": {
		lines: []int{4, 7, 10},
		why: "the stored .out predates actionlint a705189, which merged this example into exclusive_webhook_filters " +
			"and reports at the later of the two filter keys, as we do, instead of at the event",
	},
	"err__exclusive_webhook_filters.yaml": {
		lines: []int{4, 7, 9, 11, 14, 16, 19, 21, 25},
		why: "the stored .out is stale (see the README); these are the lines of actionlint's current .out for this " +
			"file, one per pair of exclusive filters, at the later key",
	},
	"err__invalid_json_in_fromjson.yaml": {
		outOfScope: map[int]string{
			24: "types of template values: the compiler checks the names an expression reads, not the types of their " +
				"values; GitHub formats null, arrays and objects into text ('', Array, Object) rather than failing",
			25: "the same: an array formatted into text",
			26: "the same: an object formatted into text",
			27: "the same: an array formatted into text",
			28: "types of function arguments: contains() of an object is false in GitHub, not an error",
		},
	},
	"err__invalid_runner_labels.yaml": {
		outOfScope: map[int]string{
			4: "runner labels name the platform's own runners, which the compiler cannot know: an unknown GitHub-hosted label is a valid self-hosted one",
			8: "the same: a self-hosted runner may carry labels GitHub gives to different hosted runners",
		},
	},
}

// actionlintOKFindings are the findings the compiler has in actionlint's
// "ok" examples, by line, with the reason each is true. The stored
// examples are older than actionlint's current checks, which flag the
// same lines (and upstream rewrote the examples when it added them).
var actionlintOKFindings = map[string]struct {
	lines []int
	why   string
}{
	"ok__workflow_call_job.yaml": {
		lines: []int{27},
		why: "the env context is not available in a job's if (GitHub's context availability table); actionlint " +
			"reports it since 135bfc3 and fixed this example in e3db034",
	},
	"ok__matrix_exclude_match_to_expr.yaml": {
		lines: []int{9, 19},
		why: "fromJSON('...') is given invalid JSON, which fails the run; actionlint checks fromJSON's argument " +
			"since 58e9469, which rewrote this example",
	},
	"ok__filters_for_specific_events.yaml": {
		lines: []int{4, 6, 10, 14},
		why: "GitHub's workflow syntax says an event cannot have both branches and branches-ignore, nor both tags " +
			"and tags-ignore; actionlint reports it since a705189, which rewrote this example",
	},
}

var actionlintOut = regexp.MustCompile(`^/?test\\?\.yaml:(\d+):(\d+): `)

// TestActionlintExamples compiles actionlint's own examples. Every
// ok__*.yaml must compile without diagnostics. For every err__*.yaml, each
// of actionlint's findings that concerns what the compiler checks must be
// matched by a diagnostic on the same line; the findings out of scope are
// listed in actionlintLines with the reason.
func TestActionlintExamples(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "actionlint")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		base := filepath.Base(file)
		t.Run(strings.TrimSuffix(base, ".yaml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			_, all, err := compiler.CompileBytes(".github/workflows/test.yaml", data, compiler.Options{})
			require.NoError(t, err)
			// What the platform does not run yet is not a finding about
			// the file, which actionlint judges.
			var diags []compiler.Diagnostic
			for _, d := range all {
				if d.Rule != compiler.RuleUnsupported {
					diags = append(diags, d)
				}
			}
			lines := map[int]bool{}
			for _, d := range diags {
				lines[d.Line] = true
			}
			if strings.HasPrefix(base, "ok__") {
				if ok, found := actionlintOKFindings[base]; found {
					t.Logf("true findings: %s", ok.why)
					var got []int
					for _, d := range diags {
						got = append(got, d.Line)
					}
					require.Equal(t, ok.lines, got, "%v", diags)
					return
				}
				require.Empty(t, diags, "actionlint accepts %s", base)
				return
			}
			want := actionlintFindingLines(t, file)
			conf := actionlintLines[base]
			if conf.lines != nil {
				t.Logf("lines given in the test: %s", conf.why)
				want = conf.lines
			}
			require.NotEmpty(t, want, "%s has no findings to check", base)
			for _, line := range want {
				if why, out := conf.outOfScope[line]; out {
					t.Logf("line %d out of scope: %s", line, why)
					continue
				}
				if !lines[line] {
					t.Errorf("actionlint reports line %d of %s, and the compiler does not (it reports %v)", line, base, diags)
				}
			}
		})
	}
}

// actionlintFindingLines reads the lines of the findings in the .out next
// to an err__ example; an example without one (its .out is stale) has
// none.
func actionlintFindingLines(t *testing.T, yamlFile string) []int {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(yamlFile, ".yaml") + ".out")
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var lines []int
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m := actionlintOut.FindStringSubmatch(l)
		require.NotNil(t, m, "unexpected line in the .out: %q", l)
		n, _ := strconv.Atoi(m[1])
		if !slices.Contains(lines, n) {
			lines = append(lines, n)
		}
	}
	return lines
}
