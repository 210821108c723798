package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// MaxActionBytes bounds an action's metadata file: 512 KiB.
const MaxActionBytes = 512 << 10

// MaxActionDepth bounds how deep composite actions nest, as on GitHub: a
// job's step may use an action whose steps use actions, down to this many
// levels. The executor counts the levels and fails the step past it.
const MaxActionDepth = 10

// Action is a local composite action, read from its action.yml.
type Action struct {
	// Name and Description are the metadata's.
	Name        string
	Description string
	// Dir is the action's directory, absolute: github.action_path and
	// GITHUB_ACTION_PATH in its steps, the default working directory of
	// none (they run in the workspace, as on GitHub).
	Dir string
	// Inputs and Outputs are sorted by name.
	Inputs  []ActionInput
	Outputs []ActionOutput
	// Steps are the action's steps, run as a job's steps are, with the
	// contexts of GitHub.Composite. Each run step has a Shell, as GitHub
	// requires of composite actions.
	Steps []cikit.Step
}

// ActionInput is one input an action declares.
type ActionInput struct {
	Name        string
	Description string
	Required    bool
	// Default is its value when the step does not set it; it may hold
	// expressions, evaluated in the calling step's contexts.
	Default string
	// Deprecation, when set, is the warning a step that sets it gets.
	Deprecation string
}

// ActionOutput is one output an action declares: Value is an expression
// over the action's steps, evaluated when they end.
type ActionOutput struct {
	Name        string
	Description string
	Value       string
}

// ErrNotComposite is wrapped by LoadAction's error for an action of
// another kind (JavaScript, Docker), which the platform does not run yet.
var ErrNotComposite = errors.New("not a composite action")

type actionFile struct {
	Name        string                  `yaml:"name"`
	Description string                  `yaml:"description"`
	Author      string                  `yaml:"author"`
	Branding    map[string]string       `yaml:"branding"`
	Inputs      map[string]actionInput  `yaml:"inputs"`
	Outputs     map[string]actionOutput `yaml:"outputs"`
	Runs        struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionInput struct {
	Description        string    `yaml:"description"`
	Required           yaml.Node `yaml:"required"`
	Default            yaml.Node `yaml:"default"`
	DeprecationMessage string    `yaml:"deprecationMessage"`
}

type actionOutput struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

type actionStep struct {
	ID               string               `yaml:"id"`
	Name             string               `yaml:"name"`
	Run              string               `yaml:"run"`
	Shell            string               `yaml:"shell"`
	If               yaml.Node            `yaml:"if"`
	Env              map[string]yaml.Node `yaml:"env"`
	WorkingDirectory string               `yaml:"working-directory"`
	Uses             string               `yaml:"uses"`
	With             map[string]yaml.Node `yaml:"with"`
	ContinueOnError  yaml.Node            `yaml:"continue-on-error"`
}

// LoadAction reads the local action in dir: its action.yml, or
// action.yaml, of at most MaxActionBytes. It must be a composite action
// (runs.using: composite); another kind fails with an error wrapping
// ErrNotComposite that names it ("node20 actions are not run yet"). Keys
// GitHub does not define for a composite action are errors, so that none
// is accepted and ignored; so is a run step without shell, or a step with
// both or neither of run and uses. Errors name the file.
func LoadAction(dir string) (*Action, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var file string
	var data []byte
	for _, name := range []string{"action.yml", "action.yaml"} {
		file = filepath.Join(dir, name)
		data, err = readFile(file, MaxActionBytes)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no action.yml or action.yaml", dir)
	}
	if err != nil {
		return nil, err
	}
	return parseAction(data, file, dir)
}

// parseAction reads the metadata data of the action in dir, read from
// file (for errors).
func parseAction(data []byte, file, dir string) (*Action, error) {
	var kind struct {
		Runs struct {
			Using string `yaml:"using"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &kind); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	switch using := strings.ToLower(kind.Runs.Using); {
	case using == "composite":
	case using == "":
		return nil, fmt.Errorf("%s: runs.using is missing: a local action runs with using: composite", file)
	case strings.HasPrefix(using, "node"):
		return nil, fmt.Errorf("%s: %w: %s actions (JavaScript) are not run yet; only composite actions are", file, ErrNotComposite, kind.Runs.Using)
	case using == "docker":
		return nil, fmt.Errorf("%s: %w: docker actions are not run yet; only composite actions are", file, ErrNotComposite)
	default:
		return nil, fmt.Errorf("%s: %w: runs.using %q is not an action kind GitHub knows (composite, docker, node20 …)", file, ErrNotComposite, kind.Runs.Using)
	}
	var af actionFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&af); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	a := &Action{Name: af.Name, Description: af.Description, Dir: dir}
	for _, name := range slices.Sorted(maps.Keys(af.Inputs)) {
		in := af.Inputs[name]
		req, err := boolNode(&in.Required)
		if err != nil {
			return nil, fmt.Errorf("%s: input %q: required: %w", file, name, err)
		}
		def, err := scalar(&in.Default)
		if err != nil {
			return nil, fmt.Errorf("%s: input %q: default: %w", file, name, err)
		}
		a.Inputs = append(a.Inputs, ActionInput{Name: name, Description: in.Description, Required: req, Default: def, Deprecation: in.DeprecationMessage})
	}
	for _, name := range slices.Sorted(maps.Keys(af.Outputs)) {
		out := af.Outputs[name]
		if out.Value == "" {
			return nil, fmt.Errorf("%s: output %q has no value: a composite action's outputs say value: ${{ steps.<id>.outputs.<name> }}", file, name)
		}
		a.Outputs = append(a.Outputs, ActionOutput{Name: name, Description: out.Description, Value: out.Value})
	}
	if len(af.Runs.Steps) == 0 {
		return nil, fmt.Errorf("%s: runs.steps is empty", file)
	}
	for i, s := range af.Runs.Steps {
		step, err := s.step()
		if err != nil {
			return nil, fmt.Errorf("%s: step %d: %w", file, i+1, err)
		}
		a.Steps = append(a.Steps, step)
	}
	return a, nil
}

func readFile(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %s", name, ErrFileTooLarge, cikit.FormatBytes(limit))
	}
	return data, nil
}

func (s *actionStep) step() (cikit.Step, error) {
	st := cikit.Step{ID: s.ID, Name: s.Name, Run: s.Run, Shell: s.Shell, WorkingDirectory: s.WorkingDirectory, Uses: s.Uses}
	hasRun := strings.TrimSpace(s.Run) != ""
	switch {
	case hasRun && s.Uses != "":
		return st, fmt.Errorf("a step has run or uses, not both")
	case !hasRun && s.Uses == "":
		return st, fmt.Errorf("a step needs run or uses")
	case hasRun && s.Shell == "":
		return st, fmt.Errorf("a run step of a composite action needs shell: (bash, sh, python, pwsh …)")
	case s.Uses != "" && (s.Shell != "" || s.WorkingDirectory != ""):
		return st, fmt.Errorf("shell and working-directory are for run steps, not uses: %s", s.Uses)
	}
	if st.Name == "" {
		if hasRun {
			st.Name, _, _ = strings.Cut(strings.TrimSpace(s.Run), "\n")
		} else {
			st.Name = s.Uses
		}
	}
	cond, err := scalar(&s.If)
	if err != nil {
		return st, fmt.Errorf("if: %w", err)
	}
	if cond != "" {
		st.If = &cikit.Condition{Lang: cikit.LangGitHub, Expr: cond}
	}
	if st.ContinueOnError, err = boolNode(&s.ContinueOnError); err != nil {
		return st, fmt.Errorf("continue-on-error: %w", err)
	}
	if st.Env, err = scalars(s.Env); err != nil {
		return st, fmt.Errorf("env: %w", err)
	}
	if st.With, err = scalars(s.With); err != nil {
		return st, fmt.Errorf("with: %w", err)
	}
	return st, nil
}

// scalar is the text of a scalar node; "" for an absent one.
func scalar(n *yaml.Node) (string, error) {
	switch n.Kind {
	case 0:
		return "", nil
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", nil
		}
		return n.Value, nil
	}
	return "", fmt.Errorf("line %d: a string, number or boolean, not a list or a mapping", n.Line)
}

func scalars(m map[string]yaml.Node) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, n := range m {
		v, err := scalar(&n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func boolNode(n *yaml.Node) (bool, error) {
	v, err := scalar(n)
	if err != nil {
		return false, err
	}
	switch strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf("line %d: %q is not true or false (expressions are not evaluated here)", n.Line, v)
}

// InputsContext builds the inputs context of the action's steps from the with:
// of the step that uses it (its values already expanded). An input the
// step does not set takes its default, expanded by expand in the calling
// step's contexts (GitHub.Expand), or "". Input names match ignoring
// case. The warnings, for the step's log, name a required input not set,
// a deprecated input set, and with: keys the action does not declare.
func (a *Action) InputsContext(with map[string]string, expand func(string) (string, error)) (map[string]string, []string, error) {
	given := make(map[string]string, len(with))
	for k, v := range with {
		given[strings.ToLower(k)] = v
	}
	out := make(map[string]string, len(a.Inputs))
	var warnings []string
	declared := map[string]bool{}
	for _, in := range a.Inputs {
		key := strings.ToLower(in.Name)
		declared[key] = true
		if v, ok := given[key]; ok {
			out[in.Name] = v
			if in.Deprecation != "" {
				warnings = append(warnings, fmt.Sprintf("Input %q has been deprecated with message: %s", in.Name, in.Deprecation))
			}
			continue
		}
		if in.Required && in.Default == "" {
			warnings = append(warnings, fmt.Sprintf("Input required and not supplied: %s", in.Name))
		}
		v, err := expand(in.Default)
		if err != nil {
			return nil, nil, fmt.Errorf("default of input %q: %w", in.Name, err)
		}
		out[in.Name] = v
	}
	var unexpected []string
	for k := range with {
		if !declared[strings.ToLower(k)] {
			unexpected = append(unexpected, k)
		}
	}
	if len(unexpected) > 0 {
		slices.Sort(unexpected)
		valid := make([]string, len(a.Inputs))
		for i, in := range a.Inputs {
			valid[i] = in.Name
		}
		warnings = append(warnings, fmt.Sprintf("Unexpected input(s) %s; valid inputs are %s: they are not passed to the action", quoteAll(unexpected), quoteAll(valid)))
	}
	return out, warnings, nil
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = "'" + v + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// EvalOutputs evaluates the action's outputs with g, the contexts its
// steps ran in (GitHub.Composite), once they have ended.
func (a *Action) EvalOutputs(g *GitHub) (map[string]string, error) {
	out := make(map[string]string, len(a.Outputs))
	for _, o := range a.Outputs {
		v, err := g.Expand(o.Value)
		if err != nil {
			return nil, fmt.Errorf("output %q of action %s: %w", o.Name, a.Dir, err)
		}
		out[o.Name] = v
	}
	return out, nil
}

// LocalAction resolves a step's uses: that names a local action ("./path",
// relative to the workspace, as on GitHub) to its directory. It reports
// false for another kind of uses; an error for a path that leaves the
// workspace.
func LocalAction(workspace, uses string) (string, bool, error) {
	if !strings.HasPrefix(uses, "./") && uses != "." {
		return "", false, nil
	}
	rel := filepath.Clean(filepath.FromSlash(uses))
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", true, fmt.Errorf("uses: %s leaves the workspace", uses)
	}
	return filepath.Join(workspace, rel), true, nil
}
