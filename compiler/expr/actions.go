package expr

import (
	"slices"
	"strings"
)

// builtinActions are the actions the runner runs itself, by the name
// BuiltinAction returns, keyed by the lower-case action path.
var builtinActions = map[string]string{
	"actions/upload-artifact":   "upload-artifact",
	"actions/download-artifact": "download-artifact",
	"actions/cache":             "cache",
	"actions/cache/restore":     "cache/restore",
	"actions/cache/save":        "cache/save",
}

// BuiltinAction says whether uses, the "uses" of a GitHub step, names
// one of the artifact and cache actions the runner runs natively from
// the step's inputs instead of running the action's code, and which:
// "upload-artifact", "download-artifact", "cache", "cache/restore" or
// "cache/save". Any version counts (actions/cache@v4, @main, a commit);
// the name ignores case, as GitHub's repository names do. A reference
// without a version, or with an empty one, is not a builtin action.
//
// The compiler checks the inputs of these steps against what the runner
// honours; the runner uses the same function to recognise them, so the
// two agree on which steps are run natively.
func BuiltinAction(uses string) (name string, ok bool) {
	path, ref, found := strings.Cut(uses, "@")
	if !found || ref == "" {
		return "", false
	}
	name, ok = builtinActions[strings.ToLower(path)]
	return name, ok
}

// builtinInputs are the inputs of each builtin action the runner reads,
// lower-case.
var builtinInputs = map[string][]string{
	"cache":             {"fail-on-cache-miss", "key", "lookup-only", "path", "restore-keys", "save-always"},
	"cache/restore":     {"fail-on-cache-miss", "key", "lookup-only", "path", "restore-keys"},
	"cache/save":        {"key", "path"},
	"upload-artifact":   {"if-no-files-found", "include-hidden-files", "name", "overwrite", "path", "retention-days"},
	"download-artifact": {"github-token", "merge-multiple", "name", "path", "pattern", "repository", "run-id"},
}

// BuiltinInputs returns the inputs, lower-case and sorted, that the
// runner reads of the builtin action name (as BuiltinAction names it):
// any other input of such a step has no effect, and the compiler says so
// where it is written. Input names ignore case, as GitHub's do.
// github-token, repository and run-id of download-artifact are read to
// fail the step: the runner downloads only the artifacts of its own run.
func BuiltinInputs(name string) []string { return slices.Clone(builtinInputs[name]) }
