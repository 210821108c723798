package cikit

import (
	"math"
	"strconv"
	"strings"
)

// Input types of RunContext.InputTypes that are not text.
const (
	InputBoolean = "boolean"
	InputNumber  = "number"
)

// TypedInputs are the run's inputs in their declared types, as GitHub's
// inputs context has them: a "boolean" input the bool its text "true" or
// "false" says, a "number" input the float64 its text is, every other
// input its text. A value that is not of its recorded type (a context
// recorded by hand) stays text. Nil when the run has no inputs.
func (rc *RunContext) TypedInputs() map[string]any {
	if rc == nil || len(rc.Inputs) == 0 {
		return nil
	}
	out := make(map[string]any, len(rc.Inputs))
	for k, v := range rc.Inputs {
		if typed, ok := TypedInput(rc.InputTypes[k], v); ok {
			out[k] = typed
		} else {
			out[k] = v
		}
	}
	return out
}

// TypedInput is the value of an input of type typ given as text v: a bool
// for "boolean" (v "true" or "false"), a finite float64 for "number", v
// itself for every other type. ok is false when v is not of typ.
func TypedInput(typ, v string) (value any, ok bool) {
	switch typ {
	case InputBoolean:
		switch v {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		return nil, false
	case InputNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		return f, true
	}
	return v, true
}
