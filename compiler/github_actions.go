package compiler

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// builtinInput is one input of an action the runner runs natively (see
// expr.BuiltinAction): the artifact and cache actions.
type builtinInput struct {
	required bool
	// check validates a literal value and says what is wrong, or "".
	check func(v string) string
	// unhonoured, when set, says what the runner does instead of what a
	// value other than def asks for: a warning.
	unhonoured string
	def        string
	// fails says the input asks for the artifacts of another run or
	// repository, which the runner does not download: it fails a step
	// that sets it, a warning.
	fails bool
}

// ghBoolValues are the values of a boolean action input: those of
// @actions/core's getBooleanInput, which fails the step on any other.
var ghBoolValues = []string{"true", "True", "TRUE", "false", "False", "FALSE"}

func checkBool(v string) string {
	if slices.Contains(ghBoolValues, v) {
		return ""
	}
	return "must be true or false, got " + strconv.Quote(v)
}

// checkRange returns a check of a whole number within [lo, hi].
func checkRange(lo, hi int) func(string) string {
	return func(v string) string {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return "must be a whole number from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi) + ", got " + strconv.Quote(v)
		}
		return ""
	}
}

func checkOneOf(valid ...string) func(string) string {
	return func(v string) string {
		if slices.Contains(valid, v) {
			return ""
		}
		return "must be one of " + strings.Join(valid, ", ") + ", got " + strconv.Quote(v)
	}
}

// Inputs shared by the cache actions.
var (
	cachePath          = builtinInput{required: true}
	cacheKey           = builtinInput{required: true}
	cacheCrossOS       = builtinInput{check: checkBool, def: "false", unhonoured: "has no effect: a cache restores on the OS it was saved on, and paths are not rewritten"}
	cacheChunkSize     = builtinInput{unhonoured: "is not used: the runner uploads a cache in parts of its own size"}
	cacheBool          = builtinInput{check: checkBool}
	artifactsOfAnother = "the runner downloads only the artifacts of this run, and fails the step when it runs"
)

// builtinInputs are the inputs of each action the runner runs natively,
// by the name expr.BuiltinAction gives it, keyed by lower-case name
// (action inputs ignore case).
var builtinInputs = map[string]map[string]builtinInput{
	"upload-artifact": {
		"name":                 {},
		"path":                 {required: true},
		"if-no-files-found":    {check: checkOneOf("warn", "error", "ignore")},
		"retention-days":       {check: checkRange(1, 90)},
		"compression-level":    {check: checkRange(0, 9), unhonoured: "is not used: artifacts are compressed with zstd at a fixed level"},
		"overwrite":            {check: checkBool},
		"include-hidden-files": {check: checkBool},
	},
	"download-artifact": {
		"name":           {},
		"path":           {},
		"pattern":        {},
		"merge-multiple": {check: checkBool},
		"artifact-ids":   {unhonoured: "is not honoured: artifacts are chosen by name and pattern only"},
		"github-token":   {fails: true},
		"repository":     {fails: true},
		"run-id":         {fails: true},
	},
	"cache": {
		"path":                 cachePath,
		"key":                  cacheKey,
		"restore-keys":         {},
		"lookup-only":          cacheBool,
		"fail-on-cache-miss":   cacheBool,
		"save-always":          cacheBool,
		"enablecrossosarchive": cacheCrossOS,
		"upload-chunk-size":    cacheChunkSize,
	},
	"cache/restore": {
		"path":                 cachePath,
		"key":                  cacheKey,
		"restore-keys":         {},
		"lookup-only":          cacheBool,
		"fail-on-cache-miss":   cacheBool,
		"enablecrossosarchive": cacheCrossOS,
	},
	"cache/save": {
		"path":                 cachePath,
		"key":                  cacheKey,
		"enablecrossosarchive": cacheCrossOS,
		"upload-chunk-size":    cacheChunkSize,
	},
}

// builtinInputNames are the inputs of each builtin action as the action
// spells them, for messages.
var builtinInputNames = func() map[string][]string {
	out := make(map[string][]string, len(builtinInputs))
	for action, inputs := range builtinInputs {
		names := make([]string, 0, len(inputs))
		for name := range inputs {
			if name == "enablecrossosarchive" {
				name = "enableCrossOsArchive"
			}
			names = append(names, name)
		}
		slices.Sort(names)
		out[action] = names
	}
	return out
}()

// builtinActionInputs checks the inputs of a step that uses an action the
// runner runs natively (action is its expr.BuiltinAction name, uses the
// node of its "uses"; with is nil without inputs). A missing required
// input, and a literal value the action would reject, are errors: the
// step would fail. An unknown input, which the action ignores, and one
// the runner does not honour, are warnings. Values with ${{ }} are known
// only when the step runs, where the runner checks them.
func (g *ghCompiler) builtinActionInputs(j *ghJob, action string, uses, with *yaml.Node, where string) {
	c := g.c
	inputs := builtinInputs[action]
	ref := "actions/" + action
	given := map[string]bool{}
	if with != nil && with.Kind == yaml.MappingNode {
		for _, e := range c.ghEntries(with, true) {
			name := strings.ToLower(e.name)
			in, known := inputs[name]
			if !known {
				g.warn(j, e.key, "input %q is not one of %s's, which ignores it (in %s)%s", e.name, ref, where, didYouMean(c.suggest(e.name, builtinInputNames[action])))
				continue
			}
			v := c.resolve(e.val)
			value := ""
			if v.Kind == yaml.ScalarNode && !isNull(v) {
				value = v.Value
			}
			given[name] = value != ""
			if value == "" {
				continue
			}
			if in.check != nil && !hasExpr(value) {
				if msg := in.check(value); msg != "" {
					c.at(v, RuleInput, "input %q of %s %s (in %s)", e.name, ref, msg, where)
					continue
				}
			}
			if in.fails {
				g.warn(j, e.key, "input %q of %s asks for the artifacts of another run or repository, which the runner does not download: %s fails when it runs", e.name, ref, where)
				continue
			}
			if in.unhonoured == "" || !hasExpr(value) && strings.EqualFold(value, in.def) {
				continue
			}
			g.warn(j, e.key, "input %q of %s %s (in %s)", e.name, ref, in.unhonoured, where)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if inputs[name].required && !given[name] {
			c.at(uses, RuleInput, "%s needs the input %q (in %s): the step fails without it", ref, name, where)
		}
	}
}
