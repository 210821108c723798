package runtime

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cikit/cikit"
)

// ParseDotenv reads a GitLab artifacts:reports:dotenv file as GitLab
// does: every line is NAME=VALUE, the name of letters, digits and "_",
// spaces around the name and the value trimmed, a later line of a name
// replacing the earlier one. Values are taken as they are: no quotes are
// removed, no variables expanded, nothing spans lines. An empty line, a
// comment, a line without "=", a bad name, a file over
// cikit.MaxDotenvBytes or with more than cikit.MaxDotenvVariables
// variables is an error, and then none of the file's variables count.
func ParseDotenv(data []byte) (map[string]string, error) {
	if len(data) > cikit.MaxDotenvBytes {
		return nil, fmt.Errorf("the dotenv file is %d bytes; at most %d are allowed", len(data), cikit.MaxDotenvBytes)
	}
	vars := map[string]string{}
	data = bytes.TrimSuffix(data, []byte("\n"))
	if len(data) == 0 {
		return vars, nil
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		name, value, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return nil, fmt.Errorf("line %d: want NAME=VALUE, got %q", i+1, clip(string(line)))
		}
		name, value = bytes.TrimSpace(name), bytes.TrimSpace(value)
		if !validName(name) {
			return nil, fmt.Errorf("line %d: %q is no variable name: use letters, digits and _", i+1, clip(string(name)))
		}
		vars[string(name)] = string(value)
	}
	if len(vars) > cikit.MaxDotenvVariables {
		return nil, fmt.Errorf("the dotenv file sets %d variables; at most %d are allowed", len(vars), cikit.MaxDotenvVariables)
	}
	return vars, nil
}

// validName reports whether name is a dotenv variable's name.
func validName(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !isNameByte(c, false) {
			return false
		}
	}
	return true
}

// NeedsDotenv returns the variables a GitLab job receives from the
// dotenv reports of the jobs it needs: their outputs
// (cikit.NeedResult.Outputs), except those of the needs in
// Spec.NoArtifactsFrom (needs:artifacts:false), a later need in
// Spec.Needs winning over an earlier one. Nil for other formats.
func NeedsDotenv(p Params) map[string]string {
	if p.Spec.Format != "gitlab" || p.Context == nil || len(p.Context.Needs) == 0 {
		return nil
	}
	var out map[string]string
	for _, id := range p.Spec.Needs {
		n, ok := p.Context.Needs[id]
		if !ok || slices.Contains(p.Spec.NoArtifactsFrom, id) || len(n.Outputs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		for k, v := range n.Outputs {
			out[k] = v
		}
	}
	return out
}
