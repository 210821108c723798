package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/cikit/cikit"
)

// Bounds of what `cikit run` reads from its flags and files.
const (
	// maxValuesFileBytes bounds a -var-file or -secret-file.
	maxValuesFileBytes = 1 << 20
	// maxValueBytes bounds one value of -input, -var or -secret.
	maxValueBytes = 64 << 10
	// maxEventNameBytes bounds the -event name.
	maxEventNameBytes = 64
)

var (
	// varName is a variable's or secret's name: it becomes an environment
	// variable's.
	varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// inputName is a workflow_dispatch input's name, as GitHub allows.
	inputName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	// eventName is the shape of an event name: GitHub's (push,
	// pull_request, workflow_dispatch …) or GitLab's pipeline sources
	// (push, merge_request_event, web …).
	eventName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// pairs is the value of a repeatable NAME=VALUE flag (-input, -var,
// -secret). A name given twice is an error: one of the values would be
// dropped. Values of a secret flag are never shown in an error: the flag
// package quotes the whole argument of a flag whose Set fails, so a
// secret flag's Set records its error in err, for the command to report
// after parsing.
type pairs struct {
	flag   string
	name   *regexp.Regexp
	secret bool
	keys   []string
	values map[string]string
	err    error
}

func newPairs(flag string, name *regexp.Regexp, secret bool) *pairs {
	return &pairs{flag: flag, name: name, secret: secret, values: map[string]string{}}
}

func (p *pairs) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.keys, ",")
}

func (p *pairs) Set(v string) error {
	err := p.set(v)
	if err != nil && p.secret {
		if p.err == nil {
			p.err = fmt.Errorf("-%s: %w", p.flag, err)
		}
		return nil
	}
	return err
}

func (p *pairs) set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		if p.secret {
			return errors.New("want NAME=VALUE (the value is not shown)")
		}
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if !p.name.MatchString(k) {
		if p.secret {
			return fmt.Errorf("invalid name: %s", nameRule(p.name))
		}
		return fmt.Errorf("invalid name %q: %s", k, nameRule(p.name))
	}
	if len(val) > maxValueBytes {
		return fmt.Errorf("the value of %s is %d bytes, more than the %d allowed", k, len(val), maxValueBytes)
	}
	if _, dup := p.values[k]; dup {
		return fmt.Errorf("%s is given twice", k)
	}
	p.keys = append(p.keys, k)
	p.values[k] = val
	return nil
}

func nameRule(re *regexp.Regexp) string {
	if re == inputName {
		return "names start with a letter or _ and hold only letters, digits, - and _"
	}
	return "names start with a letter or _ and hold only letters, digits and _"
}

// matrixPicks is the value of the repeatable -matrix KEY:VALUE flag: the
// matrix values whose variants run, by key.
type matrixPicks struct {
	keys   []string
	values map[string][]string
}

func (m *matrixPicks) String() string {
	if m == nil {
		return ""
	}
	return strings.Join(m.keys, ",")
}

func (m *matrixPicks) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want KEY:VALUE, got %q", v)
	}
	if m.values == nil {
		m.values = map[string][]string{}
	}
	if _, seen := m.values[k]; !seen {
		m.keys = append(m.keys, k)
	}
	m.values[k] = append(m.values[k], val)
	return nil
}

// readValuesFile reads a -var-file or -secret-file: NAME=VALUE lines, as
// a dotenv file has them. Blank lines and lines starting with # are
// skipped, a leading "export " is allowed, and a value in matching single
// or double quotes is taken without them (and without escapes); spaces
// around names and unquoted values are trimmed. Errors
// name the file and the line, never a value.
func readValuesFile(path string, name *regexp.Regexp) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxValuesFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxValuesFileBytes {
		return nil, fmt.Errorf("%s is larger than the %d bytes allowed", path, maxValuesFileBytes)
	}
	vals, err := parseValues(data, name)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return vals, nil
}

// parseValues parses the lines of a values file (see readValuesFile).
// Its errors start with the line number, "3: …".
func parseValues(data []byte, name *regexp.Regexp) (map[string]string, error) {
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxValuesFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return nil, fmt.Errorf("%d: want NAME=VALUE", n)
		}
		if !name.MatchString(k) {
			// Not quoted: in a secret file, what stands before = on a
			// malformed line may be a secret.
			return nil, fmt.Errorf("%d: invalid name: %s", n, nameRule(name))
		}
		if _, dup := vals[k]; dup {
			return nil, fmt.Errorf("%d: %s is given twice", n, k)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if len(v) > maxValueBytes {
			return nil, fmt.Errorf("%d: the value of %s is %d bytes, more than the %d allowed", n, k, len(v), maxValueBytes)
		}
		vals[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("0: %w", err)
	}
	return vals, nil
}

// mergeValues is a file's values with the flag's over them: a flag wins
// over the file, as an act or gitlab-ci-local user expects.
func mergeValues(file map[string]string, flag *pairs) map[string]string {
	out := make(map[string]string, len(file)+len(flag.values))
	for k, v := range file {
		out[k] = v
	}
	for k, v := range flag.values {
		out[k] = v
	}
	return out
}

// readPayload reads the -event-path file: a JSON object of at most
// cikit.MaxPayloadBytes, the event's payload as the forge would send it.
func readPayload(path string) (map[string]any, json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, cikit.MaxPayloadBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > cikit.MaxPayloadBytes {
		return nil, nil, fmt.Errorf("%s is larger than the %d bytes an event payload may have", path, cikit.MaxPayloadBytes)
	}
	obj, err := parsePayload(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return obj, data, nil
}

// parsePayload decodes an event payload, which must be one JSON object.
func parsePayload(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value: an event payload is one object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an event payload is a JSON object, got %s", jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
