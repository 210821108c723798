package compiler

import (
	"encoding/json"
	"maps"
	"reflect"
	"strconv"
	"strings"
)

// DefaultMaxMatrixJobs is the default of Options.MaxMatrixJobs.
const DefaultMaxMatrixJobs = 256

// A matrix multiplies one job into variants, one per combination of its
// axes' values. Values are JSON-like, as YAML gives them: nil, bool,
// float64, string, []any and map[string]any; 1.20 is the number 1.2, as
// GitHub reads it.
type matrixDecl struct {
	axes    []matrixAxis
	include []variant
	exclude []variant
	// match decides whether the value of an include or exclude entry
	// (pattern) matches a combination's value; nil is valueMatches.
	// GitHub compares with its expression language's ==, which ignores
	// case and converts between numbers and strings.
	match func(pattern, v any) bool
}

type matrixAxis struct {
	name   string
	values []any
}

// variant is one combination: its keys in display order and their values.
type variant struct {
	keys   []string
	values map[string]any
	// included marks a combination made by an include entry that fit no
	// combination of the axes.
	included bool
}

// maxSize bounds the number of variants expand returns, without expanding:
// the product of the axes' lengths plus one per include. It saturates
// instead of overflowing.
func (m *matrixDecl) maxSize() int {
	const ceiling = 1 << 30
	n := 1
	if len(m.axes) == 0 {
		n = 0
	}
	for _, a := range m.axes {
		n *= len(a.values)
		if n > ceiling {
			return ceiling
		}
	}
	return n + len(m.include)
}

// expand returns the variants of m with GitHub's semantics:
//
//   - the product of the axes, in axis order, the last axis varying
//     fastest;
//   - minus every combination that matches an exclude entry (all of its
//     keys equal; a mapping value matches a mapping holding at least its
//     keys);
//   - then each include entry is added to every original combination
//     whose original keys it does not contradict — it may overwrite keys
//     added by an earlier include, never an axis value — and when it fits
//     no original combination it becomes a combination of its own.
//
// Callers check maxSize against their limit first.
func (m *matrixDecl) expand() []variant {
	var out []variant
	if len(m.axes) > 0 {
		axisKeys := make([]string, len(m.axes))
		for i, a := range m.axes {
			axisKeys[i] = a.name
		}
		idx := make([]int, len(m.axes))
	product:
		for {
			v := variant{keys: axisKeys, values: make(map[string]any, len(m.axes))}
			empty := false
			for i, a := range m.axes {
				if len(a.values) == 0 {
					empty = true
					break
				}
				v.values[a.name] = a.values[idx[i]]
			}
			if empty {
				break
			}
			if !m.excluded(v) {
				out = append(out, v)
			}
			for i := len(idx) - 1; ; i-- {
				if i < 0 {
					break product
				}
				idx[i]++
				if idx[i] < len(m.axes[i].values) {
					break
				}
				idx[i] = 0
			}
		}
	}
	original := len(out)
	isAxis := make(map[string]bool, len(m.axes))
	for _, a := range m.axes {
		isAxis[a.name] = true
	}
	match := m.match
	if match == nil {
		match = func(pattern, v any) bool { return reflect.DeepEqual(pattern, v) }
	}
	for _, inc := range m.include {
		added := false
		for i := range out[:original] {
			if !fits(inc, out[i], isAxis, match) {
				continue
			}
			added = true
			v := &out[i]
			if len(v.keys) == len(m.axes) {
				// First change to this combination: stop sharing the
				// axis key slice and the value map with the product.
				v.keys = append([]string(nil), v.keys...)
			}
			v.values = maps.Clone(v.values)
			for _, k := range inc.keys {
				if _, ok := v.values[k]; !ok {
					v.keys = append(v.keys, k)
				}
				v.values[k] = inc.values[k]
			}
		}
		if !added {
			out = append(out, variant{keys: append([]string(nil), inc.keys...), values: maps.Clone(inc.values), included: true})
		}
	}
	return out
}

// fits reports whether include entry inc may be added to combination v:
// it agrees with v on every axis key it names.
func fits(inc, v variant, isAxis map[string]bool, match func(pattern, v any) bool) bool {
	for _, k := range inc.keys {
		if isAxis[k] && !match(inc.values[k], v.values[k]) {
			return false
		}
	}
	return true
}

func (m *matrixDecl) excluded(v variant) bool {
	match := m.match
	if match == nil {
		match = valueMatches
	}
	for _, ex := range m.exclude {
		if matchesSubset(ex, v, match) {
			return true
		}
	}
	return false
}

func matchesSubset(ex, v variant, match func(pattern, v any) bool) bool {
	for _, k := range ex.keys {
		if !match(ex.values[k], v.values[k]) {
			return false
		}
	}
	return true
}

// valueMatches is equality, except that a mapping pattern matches any
// mapping that holds its keys with matching values.
func valueMatches(pattern, v any) bool {
	pm, ok1 := pattern.(map[string]any)
	vm, ok2 := v.(map[string]any)
	if !ok1 || !ok2 {
		return reflect.DeepEqual(pattern, v)
	}
	for k, pv := range pm {
		if !valueMatches(pv, vm[k]) {
			return false
		}
	}
	return true
}

// name returns the display name of a variant of job base, GitHub style:
// "test (ubuntu-latest, 20)".
func (v variant) name(base string) string {
	parts := make([]string, len(v.keys))
	for i, k := range v.keys {
		parts[i] = renderValue(v.values[k])
	}
	return base + " (" + strings.Join(parts, ", ") + ")"
}

// strings returns the variant's values as text, for JobSpec.Matrix.
func (v variant) strings() map[string]string {
	out := make(map[string]string, len(v.values))
	for k, val := range v.values {
		out[k] = renderValue(val)
	}
	return out
}

// renderValue formats a matrix value the way expressions turn it into a
// string: numbers without a trailing ".0", structures as JSON.
func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
