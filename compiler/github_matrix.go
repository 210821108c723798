package compiler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit/compiler/expr"
)

// ghMatrix is a job's strategy.matrix as read.
type ghMatrix struct {
	key  *yaml.Node // the "matrix" key
	node *yaml.Node // its value
	// expr is set when the whole matrix is one ${{ }} expression.
	expr ghText
	// axes in file order; an axis given by an expression has expr set
	// and no values.
	axes []ghAxis
	// include and exclude rows; an expression instead of the list sets
	// includeExpr or excludeExpr. Rows written as expressions are
	// ghRow.expr.
	include, exclude         []ghRow
	includeExpr, excludeExpr ghText
	hasInclude               bool
}

type ghAxis struct {
	name   string
	key    *yaml.Node
	expr   ghText
	values []any
	nodes  []*yaml.Node
}

type ghRow struct {
	node   *yaml.Node
	expr   ghText // the row is one expression
	keys   []string
	values map[string]any
	nodes  map[string]*yaml.Node // value nodes by key
}

// matrix reads strategy.matrix.
func (g *ghCompiler) matrix(e entry, job string) *ghMatrix {
	c := g.c
	v := c.resolve(e.val)
	m := &ghMatrix{key: e.key, node: v}
	what := fmt.Sprintf(`the matrix of job %q`, job)
	if v.Kind == yaml.ScalarNode && !isNull(v) {
		if !isExprTemplate(v.Value) {
			c.at(v, RuleType, "%s must be a mapping of names to lists of values, or a ${{ }} expression, got %s", what, ghDescribe(v))
			return nil
		}
		m.expr = ghText{v.Value, v}
		return m
	}
	entries, ok := c.ghMapping(v, what, true)
	if !ok {
		return nil
	}
	if len(entries) == 0 {
		c.at(e.key, RuleMatrix, "%s is empty", what)
		return nil
	}
	broken := false
	for _, me := range entries {
		val := c.resolve(me.val)
		switch me.name {
		case "include", "exclude":
			rows, expr, ok := g.matrixRows(me, val, job)
			broken = broken || !ok
			if me.name == "include" {
				m.include, m.includeExpr, m.hasInclude = rows, expr, true
			} else {
				m.exclude, m.excludeExpr = rows, expr
			}
			continue
		}
		axis := ghAxis{name: me.name, key: me.key}
		switch {
		case val.Kind == yaml.ScalarNode && !isNull(val) && isExprTemplate(val.Value):
			axis.expr = ghText{val.Value, val}
		case val.Kind != yaml.SequenceNode:
			c.at(val, RuleType, "matrix axis %q of job %q must be a list of values or a ${{ }} expression, got %s", me.name, job, ghDescribe(val))
			broken = true
			continue
		case len(val.Content) == 0:
			c.at(val, RuleMatrix, "matrix axis %q of job %q has no values, so the job would never run", me.name, job)
			broken = true
			continue
		default:
			for _, item := range val.Content {
				value := g.value(item)
				if k := slices.IndexFunc(axis.values, func(x any) bool { return reflect.DeepEqual(x, value) }); k >= 0 {
					c.at(item, RuleMatrix, "value %s of matrix axis %q of job %q is already listed at %d:%d", jsonText(value), me.name, job, axis.nodes[k].Line, axis.nodes[k].Column)
					continue
				}
				axis.values = append(axis.values, value)
				axis.nodes = append(axis.nodes, c.resolve(item))
			}
		}
		m.axes = append(m.axes, axis)
	}
	if broken {
		return nil
	}
	if len(m.axes) == 0 && !m.hasInclude {
		c.at(e.key, RuleMatrix, "%s has neither axes nor \"include\" entries", what)
		return nil
	}
	g.checkExclude(m, job)
	return m
}

// matrixRows reads include or exclude: a list of mappings, or an
// expression.
func (g *ghCompiler) matrixRows(e entry, v *yaml.Node, job string) ([]ghRow, ghText, bool) {
	c := g.c
	if v.Kind == yaml.ScalarNode && !isNull(v) && isExprTemplate(v.Value) {
		return nil, ghText{v.Value, v}, true
	}
	if isNull(v) {
		return nil, ghText{}, true
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, "matrix %s of job %q must be a list of mappings, got %s", e.name, job, ghDescribe(v))
		return nil, ghText{}, false
	}
	ok := true
	var rows []ghRow
	for _, item := range v.Content {
		iv := c.resolve(item)
		if iv.Kind == yaml.ScalarNode && !isNull(iv) && isExprTemplate(iv.Value) {
			rows = append(rows, ghRow{node: iv, expr: ghText{iv.Value, iv}})
			continue
		}
		if iv.Kind != yaml.MappingNode {
			c.at(item, RuleType, "entries of matrix %s of job %q must be mappings of names to values, got %s", e.name, job, ghDescribe(iv))
			ok = false
			continue
		}
		row := ghRow{node: iv, values: map[string]any{}, nodes: map[string]*yaml.Node{}}
		for _, kv := range c.ghEntries(iv, true) {
			row.keys = append(row.keys, kv.name)
			row.values[kv.name] = g.value(kv.val)
			row.nodes[kv.name] = c.resolve(kv.val)
		}
		if len(row.keys) == 0 {
			c.at(item, RuleMatrix, "an empty entry in matrix %s of job %q does nothing", e.name, job)
			continue
		}
		rows = append(rows, row)
	}
	return rows, ghText{}, ok
}

// checkExclude reports exclude entries that name no axis, which GitHub
// refuses, and values that no axis has: a typo that leaves the matrix
// larger than meant. Exclude entries apply to the combinations of the axes
// only, before include entries add theirs. Values are compared as GitHub
// does (ghMatch); where expressions are involved they are not known, and
// nothing is reported.
func (g *ghCompiler) checkExclude(m *ghMatrix, job string) {
	c := g.c
	if len(m.exclude) == 0 {
		return
	}
	axes := map[string]*ghAxis{}
	var names []string
	for i := range m.axes {
		a := &m.axes[i]
		axes[strings.ToLower(a.name)] = a
		names = append(names, a.name)
	}
	for _, row := range m.exclude {
		if row.expr.set() {
			continue
		}
		for _, k := range row.keys {
			a := axes[strings.ToLower(k)]
			if a == nil {
				if len(names) == 0 {
					c.at(c.keyNode(row.node, k), RuleMatrix, "exclude of job %q names %q, and the matrix has no axes to exclude from", job, k)
				} else {
					c.at(c.keyNode(row.node, k), RuleMatrix, "exclude of job %q names %q, which is not a matrix axis%s (axes: %s)", job, k, didYouMean(c.suggest(k, names)), list(names))
				}
				continue
			}
			want := row.values[k]
			if a.expr.set() || holdsExpr(want) || slices.ContainsFunc(a.values, holdsExpr) {
				continue
			}
			if !slices.ContainsFunc(a.values, func(v any) bool { return ghMatch(want, v) }) {
				shown := make([]string, len(a.values))
				for i, v := range a.values {
					shown[i] = jsonText(v)
				}
				c.at(row.nodes[k], RuleMatrix, "exclude of job %q: axis %q has no value %s (values: %s), so this entry excludes nothing", job, a.name, jsonText(want), strings.Join(shown, ", "))
			}
		}
	}
}

// keyNode returns the key node of name in mapping m, for positions.
func (c *checker) keyNode(m *yaml.Node, name string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := c.resolve(m.Content[i]); k.Value == name {
			return m.Content[i]
		}
	}
	return m
}

// holdsExpr reports whether a matrix value is or holds a string with a
// ${{ }} expression.
func holdsExpr(v any) bool {
	switch v := v.(type) {
	case string:
		return hasExpr(v)
	case []any:
		return slices.ContainsFunc(v, holdsExpr)
	case map[string]any:
		for _, x := range v {
			if holdsExpr(x) {
				return true
			}
		}
	}
	return false
}

// value converts a YAML value to the JSON-like form of matrix values:
// nil, bool, float64, string, []any, map[string]any. The order of an
// object's keys is kept aside, for names.
func (g *ghCompiler) value(n *yaml.Node) any {
	c := g.c
	return c.yamlValue(n, func(m *yaml.Node) []entry { return c.ghEntries(m, true) }, g.setOrder)
}

// jsonText renders a matrix value for a message.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ghVariant is one combination of a job's matrix, ready for naming.
type ghVariant struct {
	keys    []string
	values  map[string]any
	parts   []string          // the values its name shows
	strings map[string]string // the values as text, for JobSpec.Matrix
}

// variants expands m into its combinations with GitHub's semantics, once
// every part of it is a known value. known is false when some part is an
// expression that only the run can evaluate (the outputs of a job it
// needs, say): then the job is kept as one, with its matrix unexpanded.
// ok is false when the expansion is reported (too large, or empty).
func (g *ghCompiler) variants(m *ghMatrix, j *ghJob, at *yaml.Node, call *ghCall) (vs []ghVariant, known, ok bool) {
	decl, known := g.resolveMatrix(m, j, call)
	if !known {
		return nil, false, true
	}
	c := g.c
	limit := c.opts.maxMatrixJobs()
	if size := decl.maxSize(); size > limit {
		c.at(at, RuleMatrix, "the matrix of job %q expands to up to %d jobs, more than the limit of %d", j.id, size, limit)
		return nil, true, false
	}
	expanded := decl.expand()
	if len(expanded) == 0 {
		c.at(at, RuleMatrix, "the matrix of job %q excludes every combination, so the job would never run", j.id)
		return nil, true, false
	}
	out := make([]ghVariant, len(expanded))
	axisKeys := nameKeys(decl, variant{})
	for i, v := range expanded {
		strs := make(map[string]string, len(v.values))
		for k, val := range v.values {
			strs[k] = renderValue(val)
		}
		keys := axisKeys
		if v.included {
			keys = nameKeys(decl, v)
		}
		out[i] = ghVariant{keys: v.keys, values: v.values, strings: strs, parts: g.variantParts(v.values, strs, keys)}
	}
	return out, true, true
}

// resolveMatrix turns m into a matrixDecl, evaluating the expressions in
// it that can be evaluated now. known is false when one cannot.
func (g *ghCompiler) resolveMatrix(m *ghMatrix, j *ghJob, call *ghCall) (*matrixDecl, bool) {
	if m.expr.set() {
		v, known := g.evalValue(m.expr, j, call)
		if !known {
			return nil, false
		}
		obj, isObj := v.(map[string]any)
		if !isObj {
			g.c.at(m.expr.node, RuleMatrix, "the matrix of job %q must evaluate to an object of axes, got %s", j.id, valueText(v))
			return nil, false
		}
		return g.matrixFromValue(obj, m.expr.node, j)
	}
	decl := &matrixDecl{match: ghMatch}
	for _, a := range m.axes {
		values := a.values
		if a.expr.set() {
			v, known := g.evalValue(a.expr, j, call)
			if !known {
				return nil, false
			}
			list, isList := v.([]any)
			if !isList {
				g.c.at(a.expr.node, RuleMatrix, "matrix axis %q of job %q must evaluate to a list of values, got %s", a.name, j.id, valueText(v))
				return nil, false
			}
			values = list
		}
		resolved := make([]any, len(values))
		for i, v := range values {
			var known bool
			if resolved[i], known = g.evalNested(v, j, call); !known {
				return nil, false
			}
		}
		decl.axes = append(decl.axes, matrixAxis{name: a.name, values: resolved})
	}
	rows := func(rows []ghRow, expr ghText, which string) ([]variant, bool) {
		if expr.set() {
			v, known := g.evalValue(expr, j, call)
			if !known {
				return nil, false
			}
			list, isList := v.([]any)
			if !isList {
				g.c.at(expr.node, RuleMatrix, "matrix %s of job %q must evaluate to a list of objects, got %s", which, j.id, valueText(v))
				return nil, false
			}
			var out []variant
			for _, item := range list {
				obj, isObj := item.(map[string]any)
				if !isObj {
					g.c.at(expr.node, RuleMatrix, "matrix %s of job %q must evaluate to a list of objects, got an entry %s", which, j.id, valueText(item))
					return nil, false
				}
				out = append(out, variantOf(obj))
			}
			return out, true
		}
		var out []variant
		for _, r := range rows {
			if r.expr.set() {
				v, known := g.evalValue(r.expr, j, call)
				if !known {
					return nil, false
				}
				obj, isObj := v.(map[string]any)
				if !isObj {
					g.c.at(r.expr.node, RuleMatrix, "an entry of matrix %s of job %q must evaluate to an object, got %s", which, j.id, valueText(v))
					return nil, false
				}
				out = append(out, variantOf(obj))
				continue
			}
			vals := make(map[string]any, len(r.values))
			for k, v := range r.values {
				var known bool
				if vals[k], known = g.evalNested(v, j, call); !known {
					return nil, false
				}
			}
			out = append(out, variant{keys: r.keys, values: vals})
		}
		return out, true
	}
	var ok bool
	if decl.include, ok = rows(m.include, m.includeExpr, "include"); !ok {
		return nil, false
	}
	if decl.exclude, ok = rows(m.exclude, m.excludeExpr, "exclude"); !ok {
		return nil, false
	}
	return decl, true
}

// matrixFromValue builds a matrix from the object a matrix expression
// evaluated to.
func (g *ghCompiler) matrixFromValue(obj map[string]any, at *yaml.Node, j *ghJob) (*matrixDecl, bool) {
	decl := &matrixDecl{match: ghMatch}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		switch strings.ToLower(k) {
		case "include", "exclude":
			list, isList := v.([]any)
			if !isList {
				g.c.at(at, RuleMatrix, "%q of the matrix of job %q must be a list of objects, got %s", k, j.id, valueText(v))
				return nil, false
			}
			var rows []variant
			for _, item := range list {
				obj, isObj := item.(map[string]any)
				if !isObj {
					g.c.at(at, RuleMatrix, "%q of the matrix of job %q must be a list of objects, got an entry %s", k, j.id, valueText(item))
					return nil, false
				}
				rows = append(rows, variantOf(obj))
			}
			if strings.EqualFold(k, "include") {
				decl.include = rows
			} else {
				decl.exclude = rows
			}
		default:
			list, isList := v.([]any)
			if !isList || len(list) == 0 {
				g.c.at(at, RuleMatrix, "matrix axis %q of job %q must be a non-empty list, got %s", k, j.id, valueText(v))
				return nil, false
			}
			decl.axes = append(decl.axes, matrixAxis{name: k, values: list})
		}
	}
	if len(decl.axes) == 0 && len(decl.include) == 0 {
		g.c.at(at, RuleMatrix, "the matrix of job %q has neither axes nor include entries", j.id)
		return nil, false
	}
	return decl, true
}

// variantOf makes a row of an object, its keys sorted: JSON objects have
// no order to keep.
func variantOf(obj map[string]any) variant {
	return variant{keys: sortedKeys(obj), values: obj}
}

// evalNested evaluates the expressions in a literal matrix value; known
// is false when one depends on the run: then the whole matrix does.
func (g *ghCompiler) evalNested(v any, j *ghJob, call *ghCall) (any, bool) {
	if !holdsExpr(v) {
		return v, true
	}
	switch v := v.(type) {
	case string:
		return g.evalValue(ghText{v, nil}, j, call)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			var known bool
			if out[i], known = g.evalNested(x, j, call); !known {
				return nil, false
			}
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			var known bool
			if out[k], known = g.evalNested(x, j, call); !known {
				return nil, false
			}
		}
		if o, ok := g.order[reflect.ValueOf(v).Pointer()]; ok {
			g.setOrder(out, o.keys)
		}
		return out, true
	}
	return v, true
}

// variantID names a variant GitHub's way: the job's ID and the variant's
// values in parentheses, "test (ubuntu-latest, 20)". The parentheses stay
// when no value is shown, so that a variant's ID never equals its job's.
func variantID(base string, v ghVariant) string {
	return base + " (" + strings.Join(v.parts, ", ") + ")"
}

// variantName is the display name of a variant of a job named base; like
// GitHub, it shows no parentheses when no value is shown.
func variantName(base string, v ghVariant) string {
	if len(v.parts) == 0 {
		return base
	}
	return base + " (" + strings.Join(v.parts, ", ") + ")"
}

// variantParts renders the values GitHub shows in a variant's name: those
// of its name keys, each flattened to its strings, numbers and booleans,
// objects in the order their keys were written. Empty strings and nulls
// are not shown.
func (g *ghCompiler) variantParts(values map[string]any, strs map[string]string, keys []string) []string {
	parts := make([]string, 0, len(keys))
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case nil:
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range g.keyOrder(x) {
				walk(x[k])
			}
		default:
			if s := renderValue(x); s != "" {
				parts = append(parts, s)
			}
		}
	}
	for _, k := range keys {
		switch values[k].(type) {
		case []any, map[string]any:
			walk(values[k])
		default:
			if s := strs[k]; s != "" {
				parts = append(parts, s)
			}
		}
	}
	return parts
}

// keyOrdered is the key order of one object. It holds the object, so
// that its address, the key of the table, is not reused while the table
// lives.
type keyOrdered struct {
	m    map[string]any
	keys []string
}

func (g *ghCompiler) setOrder(m map[string]any, keys []string) {
	if g.order == nil {
		g.order = map[uintptr]keyOrdered{}
	}
	g.order[reflect.ValueOf(m).Pointer()] = keyOrdered{m, keys}
}

// keyOrder returns the keys of an object in the order they were written,
// for objects read from the file, and sorted for others (the results of
// expressions).
func (g *ghCompiler) keyOrder(m map[string]any) []string {
	if o, ok := g.order[reflect.ValueOf(m).Pointer()]; ok && len(o.keys) == len(m) {
		return o.keys
	}
	return sortedKeys(m)
}

// nameKeys are the keys whose values name a variant. GitHub names a
// combination of the axes by its axis values alone, in axis order, and
// not by what include entries add to it; a combination an include entry
// makes on its own is named by all its values, the axes' first.
func nameKeys(decl *matrixDecl, v variant) []string {
	if !v.included {
		keys := make([]string, len(decl.axes))
		for i, a := range decl.axes {
			keys[i] = a.name
		}
		return keys
	}
	isAxis := make(map[string]bool, len(decl.axes))
	for _, a := range decl.axes {
		isAxis[a.name] = true
	}
	keys := make([]string, 0, len(v.keys))
	for _, k := range v.keys {
		if isAxis[k] {
			keys = append(keys, k)
		}
	}
	for _, k := range v.keys {
		if !isAxis[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// ghMatch is how GitHub matches a value of an include or exclude entry
// (pattern) to a combination's value: each leaf of the pattern is compared
// with ==, at the same path in the value, where a missing key or index is
// null. So a pattern object matches any object with at least its keys,
// and strings compare ignoring case.
func ghMatch(pattern, v any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		m, _ := v.(map[string]any)
		for k, pv := range p {
			if !ghMatch(pv, lookupFold(m, k)) {
				return false
			}
		}
		return true
	case []any:
		a, _ := v.([]any)
		for i, pv := range p {
			var elem any
			if i < len(a) {
				elem = a[i]
			}
			if !ghMatch(pv, elem) {
				return false
			}
		}
		return true
	}
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return expr.Equal(pattern, v)
}

// lookupFold finds key in m, ignoring case as GitHub's objects do.
func lookupFold(m map[string]any, key string) any {
	if v, ok := m[key]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// unexpandedMatrix renders a matrix that is left for the run as the
// single JobSpec.Matrix entry "*": the matrix as written, in JSON, with
// its expressions as strings.
func (g *ghCompiler) unexpandedMatrix(m *ghMatrix) map[string]string {
	if m.expr.set() {
		return map[string]string{"*": m.expr.s}
	}
	return map[string]string{"*": jsonText(g.value(m.node))}
}
