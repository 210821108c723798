package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/typo"
)

// InputError is an input of a manual run that the pipeline does not take:
// unknown to it, not of its declared type, not one of its choices, or
// required and not given. Plan.CheckInputs returns it; a platform answers
// it as the caller's mistake (cikit's manual trigger: 400, field
// "variables.NAME").
type InputError struct {
	// File is the pipeline file that declares the inputs.
	File string
	// Name is the input at fault.
	Name string
	// Reason says what is wrong with it, for a person.
	Reason string
}

func (e *InputError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("input %s: %s", e.Name, e.Reason)
	}
	return fmt.Sprintf("input %s of %s: %s", e.Name, e.File, e.Reason)
}

// InputValues are the inputs of a manual run as a pipeline takes them,
// checked by Plan.CheckInputs: what cikit.RunContext's Inputs and
// InputTypes record.
type InputValues struct {
	// Values are the inputs given, and the defaults of the declared
	// inputs not given, as text. Nil when there are none.
	Values map[string]string
	// Types names the declared type of the inputs that are not text
	// (cikit.InputBoolean, cikit.InputNumber). Nil when there are none.
	Types map[string]string
}

// Typed are the values in their declared types (cikit.TypedInput), as
// Event.Inputs and GitHub's inputs context have them. Nil without values.
func (v InputValues) Typed() map[string]any {
	rc := cikit.RunContext{Inputs: v.Values, InputTypes: v.Types}
	return rc.TypedInputs()
}

// ManualInputs are the inputs the pipeline's manual trigger declares
// (GitHub's on.workflow_dispatch.inputs, the native on.manual.inputs), in
// file order.
func (p *Plan) ManualInputs() []Input {
	var out []Input
	for _, t := range p.Triggers {
		if canonicalEvent(t.Event) == "manual" {
			out = append(out, t.Inputs...)
		}
	}
	return out
}

// CheckInputs checks the inputs given to a manual run of the pipeline
// against those it declares, as GitHub does when a workflow is
// dispatched, and returns them with the defaults of those not given.
//
// For a GitHub workflow or a native pipeline, an input is refused (an
// *InputError naming it and the file) when
//
//   - the pipeline does not declare it — also when it declares no inputs
//     at all: GitHub refuses inputs a workflow does not define ("Unexpected
//     inputs provided", 422), and an input no job can read is a mistake
//     the caller should hear of;
//   - it is a boolean and its value is not "true" or "false", a number
//     and its value not a number, a choice and its value not one of the
//     options;
//   - it is required, has no default and is not given.
//
// A GitLab file declares no inputs: a manual pipeline's variables are
// free-form, and all of them are taken as they are (GitLab's pipeline
// variables), typed as text.
//
// Checks go in a fixed order (unknown names sorted, then the declared
// inputs in file order), so the same request always names the same
// input.
func (p *Plan) CheckInputs(given map[string]string) (InputValues, error) {
	if p.Format == FormatGitLab {
		if len(given) == 0 {
			return InputValues{}, nil
		}
		return InputValues{Values: maps.Clone(given)}, nil
	}
	declared := p.ManualInputs()
	names := make([]string, len(declared))
	for i, in := range declared {
		names[i] = in.Name
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if slices.Contains(names, k) {
			continue
		}
		if len(declared) == 0 {
			return InputValues{}, &InputError{File: p.File, Name: k, Reason: "the pipeline declares no inputs"}
		}
		budget := maxSuggestWork
		hint := didYouMean(typo.Nearest(k, names, false, &budget))
		return InputValues{}, &InputError{File: p.File, Name: k,
			Reason: fmt.Sprintf("the pipeline declares no such input (its inputs: %s)%s", list(names), hint)}
	}
	var out InputValues
	for _, in := range declared {
		v, ok := given[in.Name]
		if !ok {
			if in.Default == nil {
				if in.Required {
					return InputValues{}, &InputError{File: p.File, Name: in.Name, Reason: "it is required and has no default"}
				}
				continue
			}
			v = *in.Default
		}
		if reason := checkInput(in, v); reason != "" {
			return InputValues{}, &InputError{File: p.File, Name: in.Name, Reason: reason}
		}
		if out.Values == nil {
			out.Values = map[string]string{}
		}
		out.Values[in.Name] = v
		if in.Type == cikit.InputBoolean || in.Type == cikit.InputNumber {
			if out.Types == nil {
				out.Types = map[string]string{}
			}
			out.Types[in.Name] = in.Type
		}
	}
	return out, nil
}

// checkInput says why v is not a value of in, or "" when it is.
func checkInput(in Input, v string) string {
	switch in.Type {
	case cikit.InputBoolean:
		if _, ok := cikit.TypedInput(in.Type, v); !ok {
			return fmt.Sprintf("a boolean input is true or false, got %s", quoteValue(v))
		}
	case cikit.InputNumber:
		if _, ok := cikit.TypedInput(in.Type, v); !ok {
			return fmt.Sprintf("a number input takes a number, got %s", quoteValue(v))
		}
	case "choice":
		if !slices.Contains(in.Options, v) {
			return fmt.Sprintf("%s is not one of the choices %s", quoteValue(v), list(in.Options))
		}
	}
	return ""
}

// maxQuotedValue bounds the part of a value an InputError quotes: a value
// may be as large as a request body.
const maxQuotedValue = 64

// quoteValue quotes v for a message, its first maxQuotedValue bytes when
// it is longer.
func quoteValue(v string) string {
	if len(v) <= maxQuotedValue {
		return strconv.Quote(v)
	}
	cut := maxQuotedValue
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + fmt.Sprintf("… (%d bytes)", len(v))
}
