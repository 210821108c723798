package runtime

import "strings"

// GitLabEnv expands a GitLab job's variables (Spec.Env) when the job
// starts, as GitLab Runner does: a value's $NAME and ${NAME} take the
// value of NAME and "$$" is a literal "$". The compiler already expanded
// the references between the file's variables; what it left are those
// only the run knows: GitLab's predefined variables and the manual
// trigger's. A reference reads, in this order, overrides (Overrides), the
// job's variables as written (one pass: a value read is not expanded
// again, so references in a loop end), base (Env and the executor's own
// environment), and is empty when none holds the name. A "$" before
// anything but a name, "{" or "$" stays as it is.
func GitLabEnv(vars, base, overrides map[string]string) map[string]string {
	lookup := func(name string) string {
		if v, ok := overrides[name]; ok {
			return v
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return base[name]
	}
	out := make(map[string]string, len(vars))
	for k, v := range vars {
		out[k] = expandGitLab(v, lookup)
	}
	return out
}

func expandGitLab(s string, lookup func(string) string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		braced := s[i+1] == '{'
		start := i + 1
		if braced {
			start++
		}
		end := start
		for end < len(s) && isNameByte(s[end], end == start) {
			end++
		}
		if end == start || (braced && (end == len(s) || s[end] != '}')) {
			b.WriteByte('$')
			i++
			continue
		}
		b.WriteString(lookup(s[start:end]))
		i = end
		if braced {
			i++
		}
	}
	return b.String()
}

// isNameByte reports whether c may be in a variable's name: letters,
// digits (not first) and "_".
func isNameByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}
