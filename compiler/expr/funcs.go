package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// funcSpec describes one of GitHub's functions.
type funcSpec struct {
	name     string // as GitHub's documentation spells it
	min, max int    // argument counts; max < 0 for no limit
	odd      bool   // the count must be odd (case)
	// own says the function deals with Unknown arguments itself; the
	// others are Unknown as soon as one argument is.
	own  bool
	call func(e *evaluator, c *Call, args []any) (any, error)
}

// funcs are GitHub's functions by lower-case name.
var funcs map[string]*funcSpec

// funcNames lists the functions as documented, sorted, for messages.
var funcNames []string

func init() {
	funcs = map[string]*funcSpec{
		"contains":   {name: "contains", min: 2, max: 2, own: true, call: fnContains},
		"startswith": {name: "startsWith", min: 2, max: 2, call: fnStartsWith},
		"endswith":   {name: "endsWith", min: 2, max: 2, call: fnEndsWith},
		"format":     {name: "format", min: 1, max: 255, own: true, call: fnFormat},
		"join":       {name: "join", min: 1, max: 2, own: true, call: fnJoin},
		"tojson":     {name: "toJSON", min: 1, max: 1, own: true, call: fnToJSON},
		"fromjson":   {name: "fromJSON", min: 1, max: 1, call: fnFromJSON},
		"hashfiles":  {name: "hashFiles", min: 1, max: 255, call: fnHashFiles},
		"case":       {name: "case", min: 3, max: -1, odd: true, own: true, call: fnCase},
		"success":    {name: "success", call: fnSuccess},
		"failure":    {name: "failure", call: fnFailure},
		"cancelled":  {name: "cancelled", call: fnCancelled},
		"always":     {name: "always", call: fnAlways},
	}
	for _, f := range funcs {
		funcNames = append(funcNames, f.name)
	}
	slices.SortFunc(funcNames, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
}

// lookupFunc finds a function by name, ignoring case.
func lookupFunc(name string) *funcSpec {
	if f, ok := funcs[name]; ok {
		return f
	}
	return funcs[strings.ToLower(name)]
}

// unknownFuncMsg is the message for a call of a function that does not
// exist.
func unknownFuncMsg(name string) string {
	if s := suggest(name, funcNames); s != "" {
		return fmt.Sprintf("unknown function %q; did you mean %q?", name, s)
	}
	return fmt.Sprintf("unknown function %q (functions: %s)", name, strings.Join(funcNames, ", "))
}

// arityMsg says what is wrong with calling f with n arguments, or "".
func arityMsg(f *funcSpec, n int) string {
	plural := func(k int) string {
		if k == 1 {
			return "1 argument"
		}
		return strconv.Itoa(k) + " arguments"
	}
	switch {
	case n >= f.min && (f.max < 0 || n <= f.max) && (!f.odd || n%2 == 1):
		return ""
	case f.odd && n >= f.min:
		return fmt.Sprintf("%s takes an odd number of arguments (pairs of a condition and a value, then a default), not %d", f.name, n)
	case f.max == 0:
		return fmt.Sprintf("%s takes no arguments, not %d", f.name, n)
	case f.min == f.max:
		return fmt.Sprintf("%s takes %s, not %d", f.name, plural(f.min), n)
	case f.max == f.min+1:
		return fmt.Sprintf("%s takes %d or %s, not %d", f.name, f.min, plural(f.max), n)
	case n < f.min:
		return fmt.Sprintf("%s takes at least %s, not %d", f.name, plural(f.min), n)
	}
	return fmt.Sprintf("%s takes at most %s, not %d", f.name, plural(f.max), n)
}

func (e *evaluator) call(c *Call) (any, error) {
	f := lookupFunc(c.Name)
	if f == nil {
		return nil, &EvalError{Offset: c.Offset, Msg: unknownFuncMsg(c.Name)}
	}
	if msg := arityMsg(f, len(c.Args)); msg != "" {
		return nil, &EvalError{Offset: c.Offset, Msg: msg}
	}
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		v, err := e.eval(a)
		if err != nil {
			return nil, err
		}
		// Arguments after an Unknown one are still evaluated: their errors
		// happen at run time whatever it turns out to be.
		args[i] = v
	}
	if !f.own && slices.Contains(args, any(Unknown)) {
		return Unknown, nil
	}
	return f.call(e, c, args)
}

// fnContains is contains(search, item): for a string, whether item is a
// substring of it; for an array, whether item equals (==) an element.
// Both ignore case.
func fnContains(_ *evaluator, _ *Call, args []any) (any, error) {
	search, item := args[0], args[1]
	if search == Unknown || item == Unknown {
		return Unknown, nil
	}
	ks, ki := kindOf(search), kindOf(item)
	switch {
	case ks.primitive():
		if !ki.primitive() {
			return false, nil
		}
		return strings.Contains(fold(ToString(search)), fold(ToString(item))), nil
	case ks == kArray:
		unknown := false
		for _, v := range arrayItems(search) {
			if v == Unknown {
				unknown = true
			} else if looseEqual(item, v) {
				return true, nil
			}
		}
		if unknown {
			return Unknown, nil
		}
	}
	return false, nil
}

func arrayItems(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case *filtered:
		return v.items
	}
	return nil
}

func fnStartsWith(_ *evaluator, _ *Call, args []any) (any, error) {
	if !kindOf(args[0]).primitive() || !kindOf(args[1]).primitive() {
		return false, nil
	}
	return foldHasPrefix(ToString(args[0]), ToString(args[1])), nil
}

func fnEndsWith(_ *evaluator, _ *Call, args []any) (any, error) {
	if !kindOf(args[0]).primitive() || !kindOf(args[1]).primitive() {
		return false, nil
	}
	return foldHasSuffix(ToString(args[0]), ToString(args[1])), nil
}

// fnFormat is format(string, values...): {N} is the N-th value as a
// string, {{ and }} are braces. Placeholders take no format specifiers. A
// placeholder with no value, or a brace that is neither, is an error.
// Values that are not referenced may be Unknown.
func fnFormat(e *evaluator, c *Call, args []any) (any, error) {
	if args[0] == Unknown {
		return Unknown, nil
	}
	f := ToString(args[0])
	values := args[1:]
	var b strings.Builder
	unknown := false
	for i := 0; i < len(f); {
		l, r := strings.IndexByte(f[i:], '{'), strings.IndexByte(f[i:], '}')
		if l >= 0 {
			l += i
		}
		if r >= 0 {
			r += i
		}
		switch {
		case l >= 0 && (r < 0 || r > l):
			if l+1 < len(f) && f[l+1] == '{' {
				b.WriteString(f[i : l+1])
				i = l + 2
				continue
			}
			j := l + 1
			for j < len(f) && isDigit(f[j]) {
				j++
			}
			if j == l+1 || j-l-1 > 3 || j == len(f) || f[j] != '}' && f[j] != ':' {
				return nil, formatError(c, f, "the '{' at index %d is neither '{{' nor the start of a placeholder like {0}", l)
			}
			n, _ := strconv.Atoi(f[l+1 : j])
			if n > 255 {
				return nil, formatError(c, f, "placeholder {%d} is past the largest, {255}", n)
			}
			if f[j] == ':' {
				return nil, formatError(c, f, "placeholder at index %d has a format specifier, which GitHub does not support", l)
			}
			if n >= len(values) {
				return nil, formatError(c, f, "placeholder {%d} needs %d values after the format string, and there are %d", n, n+1, len(values))
			}
			b.WriteString(f[i:l])
			if values[n] == Unknown {
				unknown = true
			} else {
				b.WriteString(ToString(values[n]))
			}
			i = j + 1
		case r >= 0:
			if r+1 < len(f) && f[r+1] == '}' {
				b.WriteString(f[i : r+1])
				i = r + 2
				continue
			}
			return nil, formatError(c, f, "the '}' at index %d is neither '}}' nor the end of a placeholder", r)
		default:
			b.WriteString(f[i:])
			i = len(f)
		}
		if e.built+b.Len() > maxBuilt {
			return nil, tooMuch(c)
		}
	}
	if unknown {
		return Unknown, nil
	}
	e.built += b.Len()
	return b.String(), nil
}

func formatError(c *Call, f, format string, args ...any) error {
	return &EvalError{Offset: c.Offset, Msg: fmt.Sprintf("%s: invalid format string %s: %s", c.Name, quoteShort(f), fmt.Sprintf(format, args...))}
}

// quoteShort quotes s for a message, shortened when long.
func quoteShort(s string) string {
	const max = 60
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// fnJoin is join(array, separator): the elements as strings, separated by
// separator (a primitive; "," when absent or not a primitive). A primitive
// in place of the array is converted to a string; an object gives "".
func fnJoin(e *evaluator, c *Call, args []any) (any, error) {
	a := args[0]
	switch k := kindOf(a); {
	case k == kUnknown:
		return Unknown, nil
	case k.primitive():
		return ToString(a), nil
	case k != kArray:
		return "", nil
	}
	sep := ","
	if len(args) > 1 {
		if args[1] == Unknown {
			return Unknown, nil
		}
		if kindOf(args[1]).primitive() {
			sep = ToString(args[1])
		}
	}
	items := arrayItems(a)
	var b strings.Builder
	for i, v := range items {
		if v == Unknown {
			return Unknown, nil
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(ToString(v))
		if e.built+b.Len() > maxBuilt {
			return nil, tooMuch(c)
		}
	}
	e.built += b.Len()
	return b.String(), nil
}

// fnToJSON is toJSON(value): value as JSON indented by two spaces, as
// GitHub prints it. Object keys come sorted.
func fnToJSON(e *evaluator, c *Call, args []any) (any, error) {
	if hasUnknown(args[0]) {
		return Unknown, nil
	}
	var b strings.Builder
	err := writeJSON(&b, args[0], 0, maxBuilt-e.built)
	if err == errTooMuch || err == nil && e.built+b.Len() > maxBuilt {
		return nil, tooMuch(c)
	}
	if err != nil {
		return nil, &EvalError{Offset: c.Offset, Msg: c.Name + ": " + err.Error()}
	}
	e.built += b.Len()
	return b.String(), nil
}

var errTooMuch = errors.New("too much text")

// writeJSON writes v at the given nesting depth, failing with errTooMuch
// past limit bytes.
func writeJSON(b *strings.Builder, v any, depth, limit int) error {
	if b.Len() > limit {
		return errTooMuch
	}
	if depth > 1000 {
		return fmt.Errorf("the value nests more than 1000 levels deep")
	}
	newline := func(d int) {
		b.WriteByte('\n')
		for range d {
			b.WriteString("  ")
		}
	}
	switch v := norm(v).(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		s := formatNumber(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			s = strconv.Quote(s) // JSON has no such numbers
		}
		b.WriteString(s)
	case string:
		writeJSONString(b, v)
	case []any, *filtered:
		items := arrayItems(v)
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(depth + 1)
			if err := writeJSON(b, item, depth+1, limit); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case map[string]any:
		if len(v) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(depth + 1)
			writeJSONString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, v[k], depth+1, limit); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("a value of Go type %T is not an expression value", v)
	}
	return nil
}

// writeJSONString writes s as a JSON string, escaping only what JSON
// requires (and invalid UTF-8, as U+FFFD), like GitHub's serializer.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 {
					fmt.Fprintf(b, `\u%04x`, c)
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\ufffd`)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// fnFromJSON is fromJSON(text): the JSON value text holds. Empty or
// invalid JSON is an error.
func fnFromJSON(_ *evaluator, c *Call, args []any) (any, error) {
	s := ToString(args[0])
	if strings.TrimSpace(s) == "" {
		return nil, &EvalError{Offset: c.Offset, Msg: c.Name + ": the input is empty, which is not JSON"}
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, &EvalError{Offset: c.Offset, Msg: fmt.Sprintf("%s: %s is not valid JSON: %v", c.Name, quoteShort(s), err), Err: err}
	}
	return v, nil
}

func fnHashFiles(e *evaluator, c *Call, args []any) (any, error) {
	if e.env.HashFiles == nil {
		return Unknown, nil
	}
	patterns := make([]string, len(args))
	for i, a := range args {
		patterns[i] = ToString(a)
	}
	h, err := e.env.HashFiles(patterns)
	if err != nil {
		return nil, &EvalError{Offset: c.Offset, Msg: fmt.Sprintf("%s: %v", c.Name, err), Err: err}
	}
	return h, nil
}

// fnCase is case(cond1, value1, cond2, value2, …, default): the value of
// the first condition that is true, or the default. Conditions must be
// booleans.
func fnCase(_ *evaluator, c *Call, args []any) (any, error) {
	for i := 0; i+1 < len(args); i += 2 {
		switch p := args[i].(type) {
		case Tri:
			if p == Unknown {
				return Unknown, nil
			}
		case bool:
			if p {
				return args[i+1], nil
			}
			continue
		}
		return nil, &EvalError{Offset: c.Offset, Msg: fmt.Sprintf("%s: condition %d is %s, not a boolean; compare it, as in x == 'value'", c.Name, i/2+1, describeValue(args[i]))}
	}
	return args[len(args)-1], nil
}

// describeValue names a value's kind for a message.
func describeValue(v any) string {
	switch kindOf(v) {
	case kNull:
		return "null"
	case kNumber:
		return "a number"
	case kString:
		return "a string"
	case kArray:
		return "an array"
	case kObject:
		return "an object"
	case kBool:
		return "a boolean"
	}
	return fmt.Sprintf("a %T", v)
}

func fnSuccess(e *evaluator, _ *Call, _ []any) (any, error) {
	if e.env.Status == nil {
		return Unknown, nil
	}
	return !e.env.Status.Failed && !e.env.Status.Cancelled && !e.env.Status.Unsucceeded, nil
}

func fnFailure(e *evaluator, _ *Call, _ []any) (any, error) {
	if e.env.Status == nil {
		return Unknown, nil
	}
	return e.env.Status.Failed, nil
}

func fnCancelled(e *evaluator, _ *Call, _ []any) (any, error) {
	if e.env.Status == nil {
		return Unknown, nil
	}
	return e.env.Status.Cancelled, nil
}

func fnAlways(*evaluator, *Call, []any) (any, error) { return true, nil }
