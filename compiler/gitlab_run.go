package compiler

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// How a GitLab job runs: its variables expanded as GitLab expands them,
// its checkout from the GIT_* variables, and its script as one shell
// session.

// maxVarExpansionWork bounds the bytes variable expansion produces in one
// compilation: a variable that refers twice to one that refers twice to
// another … doubles at each level, from a few bytes of file.
const maxVarExpansionWork = 64 << 20

// env renders the variables as a job's environment, with the references
// between them expanded as GitLab does when the job runs: a value refers
// to another variable of the file as $NAME or ${NAME}, and gets that
// variable's expanded value; "$$" is a literal "$". References the
// compiler cannot resolve stay as written, for the runner, which expands
// the environment once more with the variables of the run: predefined
// variables, the pipeline's own (given, which win over the file's), and
// variables in a loop of references or referring to one, which stay as
// written whole. For that second expansion "$$" stays "$$", and the
// value of a variable that must not be expanded (expand: false), also
// where another variable copies it, has its "$" doubled, so that it
// reaches the job as written.
func (g *glFront) env(d *glVarsDecl, given map[string]string) map[string]string {
	if d == nil || len(d.vals) == 0 {
		return nil
	}
	out := make(map[string]string, len(d.vals))
	const (
		unseen = iota
		visiting
		done
		looped // in a loop of references, or referring to one: as written
	)
	state := make(map[string]int8, len(d.vals))
	var resolve func(name string) (string, bool)
	resolve = func(name string) (string, bool) {
		switch state[name] {
		case done:
			return out[name], true
		case visiting, looped:
			return "", false
		}
		v := d.vals[name]
		if d.noExpand[name] {
			out[name], state[name] = strings.ReplaceAll(v, "$", "$$"), done
			return out[name], true
		}
		state[name] = visiting
		loop := false
		x := expandGLRefs(v, func(ref string) (string, bool) {
			if _, over := given[ref]; over {
				return "", false
			}
			if _, ok := d.vals[ref]; !ok {
				return "", false
			}
			x, ok := resolve(ref)
			loop = loop || !ok
			return x, ok
		})
		if loop {
			out[name], state[name] = v, looped
			return "", false
		}
		if len(x) > len(v) {
			g.varWork += len(x)
			if g.varWork > maxVarExpansionWork {
				g.at(d.nodes[name], RuleLimit, "variable %q expands to more than %s with the variables it refers to; the pipeline is too large", name, cikit.FormatBytes(maxVarExpansionWork))
				panic(abort{})
			}
		}
		out[name], state[name] = x, done
		return x, true
	}
	for _, n := range d.names {
		resolve(n)
	}
	for n := range d.vals {
		resolve(n)
	}
	return out
}

// expandGLRefs replaces the references $NAME and ${NAME} in s by what
// lookup gives for NAME, leaving those it has none for, and "$$", as
// written. A "$" that starts no reference is a literal "$", written "$$"
// for the runner's expansion, so that it cannot start one with the text
// put after it ("${$A}").
func expandGLRefs(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' {
			b.WriteByte(s[i])
			i++
			continue
		}
		if i+1 == len(s) {
			b.WriteString("$$")
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteString("$$")
			i += 2
			continue
		}
		start, end, next := i+1, i+1, i+1
		if s[i+1] == '{' {
			start = i + 2
			end = start
			for end < len(s) && isVarChar(s[end], end == start) {
				end++
			}
			if end == len(s) || s[end] != '}' || end == start {
				b.WriteString("$$")
				i++
				continue
			}
			next = end + 1
		} else {
			for end < len(s) && isVarChar(s[end], end == start) {
				end++
			}
			next = end
		}
		if end == start {
			b.WriteString("$$")
			i++
			continue
		}
		if v, ok := lookup(s[start:end]); ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i:next])
		}
		i = next
	}
	return b.String()
}

func isVarChar(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

// glGitStrategies maps GIT_STRATEGY's values to Checkout.Strategy: GitLab's
// "empty" (a clean directory, no checkout) is our "none", whose workspace
// starts empty.
var glGitStrategies = map[string]string{"clone": "clone", "fetch": "fetch", "none": "none", "empty": "none"}

// glGitNotHonoured are the runner's git variables the checkout does not
// follow yet, and what each asks for.
var glGitNotHonoured = map[string]string{
	"GIT_CHECKOUT":               "leaving the commit unchecked-out",
	"GIT_CLEAN_FLAGS":            "its own git clean flags",
	"GIT_CLONE_PATH":             "its own clone path",
	"GIT_FETCH_EXTRA_FLAGS":      "extra git fetch flags",
	"GIT_LFS_SKIP_SMUDGE":        "skipping Git LFS files",
	"GIT_SUBMODULE_DEPTH":        "a submodule depth",
	"GIT_SUBMODULE_FORCE_HTTPS":  "submodules over HTTPS",
	"GIT_SUBMODULE_PATHS":        "chosen submodule paths",
	"GIT_SUBMODULE_UPDATE_FLAGS": "extra git submodule update flags",
}

// checkout reads how the job's commit is put into its workspace from
// GitLab's GIT_STRATEGY, GIT_DEPTH and GIT_SUBMODULE_STRATEGY, as the
// pipeline's variables (given, which win) or the job's (env, expanded)
// set them: by default a fetch of the runner's shallow depth, without
// submodules.
func (g *glFront) checkout(j *glJob, vars *glVarsDecl, env map[string]string) *cikit.Checkout {
	co := &cikit.Checkout{Strategy: "fetch"}
	get := func(name string) (string, *yaml.Node, bool) {
		if v, ok := g.vars.given[name]; ok {
			return v, j.key, true
		}
		v, ok := env[name]
		at := vars.nodes[name]
		if at == nil {
			at = j.key
		}
		// The value reaches the runner with "$$" for "$".
		return strings.ReplaceAll(v, "$$", "$"), at, ok
	}
	unresolved := func(name, v string, at *yaml.Node) bool {
		if !strings.Contains(v, "$") {
			return false
		}
		j.spec.Warnings = append(j.spec.Warnings, g.notHonoured(at, "%s of job %q is %q, which refers to a variable known only when the job runs; the checkout takes the default instead", name, j.name, v))
		return true
	}
	if v, at, ok := get("GIT_STRATEGY"); ok && !unresolved("GIT_STRATEGY", v, at) {
		if s, valid := glGitStrategies[strings.TrimSpace(v)]; valid {
			co.Strategy = s
		} else {
			g.at(at, RuleValue, "invalid GIT_STRATEGY %q of job %q (valid: clone, empty, fetch, none)", v, j.name)
		}
	}
	if v, at, ok := get("GIT_DEPTH"); ok && strings.TrimSpace(v) != "" && !unresolved("GIT_DEPTH", v, at) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil || n < 0:
			g.at(at, RuleValue, "invalid GIT_DEPTH %q of job %q: a number of commits, 0 for the whole history", v, j.name)
		case n == 0:
			co.Depth = -1
		default:
			co.Depth = n
		}
	}
	if v, at, ok := get("GIT_SUBMODULE_STRATEGY"); ok && !unresolved("GIT_SUBMODULE_STRATEGY", v, at) {
		switch s := strings.TrimSpace(v); s {
		case "none", "":
		case "normal", "recursive":
			co.Submodules = s
		default:
			g.at(at, RuleValue, "invalid GIT_SUBMODULE_STRATEGY %q of job %q (valid: none, normal, recursive)", v, j.name)
		}
	}
	for _, name := range sortedKeys(glGitNotHonoured) {
		if v, at, ok := get(name); ok && v != "" {
			j.spec.Warnings = append(j.spec.Warnings, g.notHonoured(at, "%s asks for %s, which the runner's checkout does not do yet", name, glGitNotHonoured[name]))
		}
	}
	return co
}

// glScriptStep makes the commands of a script one step, run in one shell
// session as GitLab runs them: each command is printed as GitLab prints
// it ("$ make", the first line of a multi-line one followed by
// "# collapsed multi-line command") and then run, so that a cd or a
// variable set by one command holds in the next, and the first command
// that fails fails the step (the shell's -e).
func glScriptStep(name string, commands []string) cikit.Step {
	var b strings.Builder
	for _, cmd := range commands {
		shown := strings.TrimSpace(cmd)
		if strings.Contains(shown, "\n") {
			shown = firstLine(shown) + " # collapsed multi-line command"
		}
		b.WriteString("printf '%s\\n' ")
		b.WriteString(shellQuote("$ " + shown))
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(cmd, "\n"))
		b.WriteString("\n")
	}
	return cikit.Step{Name: name, Run: b.String()}
}

// shellQuote quotes s as one word of a POSIX shell: in single quotes,
// each single quote of s written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
