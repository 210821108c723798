package expr

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tri is a three-valued truth: what a condition is known to be at compile
// time. Unknown means it depends on something known only at run time.
//
// Unknown is also the value EvalGitHub gives an expression it cannot
// evaluate yet; compare with v == Unknown. EvalGitHub never returns True or
// False as values: known results are ordinary values (bool, string, …).
type Tri int8

// The three truth values.
const (
	False Tri = iota
	True
	Unknown
)

func (t Tri) String() string {
	switch t {
	case False:
		return "false"
	case True:
		return "true"
	case Unknown:
		return "unknown"
	}
	return "Tri(" + strconv.Itoa(int(t)) + ")"
}

// triOf converts a known truth to a Tri.
func triOf(b bool) Tri {
	if b {
		return True
	}
	return False
}

// Condition is v read as an if: condition: Unknown for Unknown, otherwise
// True or False by Truthy.
func Condition(v any) Tri {
	if v == Unknown {
		return Unknown
	}
	return triOf(Truthy(v))
}

// kind is the type of a value in GitHub's expression language.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
	kUnknown
	kInvalid // a Go value outside the documented set
)

func kindOf(v any) kind {
	switch v := v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32:
		return kNumber
	case string:
		return kString
	case []any, *filtered:
		return kArray
	case map[string]any:
		return kObject
	case Tri:
		if v == Unknown {
			return kUnknown
		}
	}
	return kInvalid
}

func (k kind) primitive() bool { return k <= kString }

// norm converts the Go numeric types a caller may put in a context to
// float64, so that results only hold the documented types.
func norm(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	}
	return v
}

// filtered is the result of an object filter (x.* or x[*]): an array whose
// further property and index accesses apply to each element, as in
// github.event.commits.*.author.name. It never leaves the evaluator, which
// hands out its items as a []any.
type filtered struct {
	items []any
}

// Truthy reports whether v counts as true in a condition: false, null, 0,
// -0, NaN and "" are false; everything else, arrays and objects included,
// is true. It is false for Unknown: use Condition to keep the third value.
func Truthy(v any) bool {
	switch v := norm(v).(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0 && !math.IsNaN(v)
	case string:
		return v != ""
	case Tri:
		return v == True
	}
	return true
}

// ToString converts v to a string the way GitHub does when it formats a
// value into text: null is "", booleans are "true" and "false", numbers
// have at most 15 significant digits and no ".0" (1e+21 style past that),
// arrays are "Array" and objects "Object". Unknown gives "": check for it
// first.
func ToString(v any) string {
	switch v := norm(v).(type) {
	case nil:
		return ""
	case bool:
		if v {
			return "true"
		}
		return "false"
	case float64:
		return formatNumber(v)
	case string:
		return v
	case []any, *filtered:
		return "Array"
	case map[string]any:
		return "Object"
	}
	return ""
}

// formatNumber formats like .NET's "G15", which GitHub uses: 15 significant
// digits, trailing zeros dropped, exponent form outside [1e-5, 1e15).
func formatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0" // and not "-0"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'g', 15, 64)
	return strings.Replace(s, "e", "E", 1)
}

// toNumber converts a primitive to a number for comparison: null is 0,
// booleans 1 and 0, strings are parsed (NaN when they are not numbers).
// Arrays and objects are NaN.
func toNumber(v any) float64 {
	switch v := norm(v).(type) {
	case nil:
		return 0
	case bool:
		if v {
			return 1
		}
		return 0
	case float64:
		return v
	case string:
		return parseNumber(v)
	}
	return math.NaN()
}

// parseNumber follows GitHub's string-to-number conversion (itself modelled
// on JavaScript's Number()): surrounding space is ignored, "" is 0, decimal
// and exponent forms, 0x hexadecimal and 0o octal (as 32-bit two's
// complement, like GitHub), Infinity; anything else is NaN.
func parseNumber(s string) float64 {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	if f, ok := parseDecimal(s); ok {
		return f
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o') {
		base := 16
		if s[1] == 'o' {
			base = 8
		}
		for i := 2; i < len(s); i++ {
			if digitValue(s[i]) >= base {
				return math.NaN()
			}
		}
		u, err := strconv.ParseUint(s[2:], base, 32)
		if err != nil {
			return math.NaN()
		}
		return float64(int32(uint32(u)))
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	return math.NaN()
}

func digitValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// parseDecimal accepts [+-]digits[.digits][(e|E)[+-]digits] with at least
// one digit before the exponent. strconv.ParseFloat alone would also take
// "inf", "0x1p3" and underscores, which GitHub does not.
func parseDecimal(s string) (float64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	// Out of range gives ±Inf or 0 with an error; GitHub gives the same
	// values without one.
	f, _ := strconv.ParseFloat(s, 64)
	return f, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// upperRune is the case folding of GitHub's string comparisons: ordinal,
// ignoring case by upper-casing, except that the dotless ı stays itself
// (so it does not equal I, nor İ equal i).
func upperRune(r rune) rune {
	if r == 'ı' {
		return r
	}
	return unicode.ToUpper(r)
}

// fold returns s in the form compared by foldEqual and foldCompare.
func fold(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return strings.Map(upperRune, s)
}

// foldEqual reports whether a and b are equal ignoring case.
func foldEqual(a, b string) bool {
	// The common case, ASCII, without allocating.
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca >= utf8.RuneSelf || cb >= utf8.RuneSelf {
			return fold(a[i:]) == fold(b[i:])
		}
		if ca != cb && upperASCII(ca) != upperASCII(cb) {
			return false
		}
	}
	return len(a) == len(b)
}

// foldHasPrefix is strings.HasPrefix ignoring case.
func foldHasPrefix(s, prefix string) bool {
	if isASCII(s) && isASCII(prefix) {
		return len(s) >= len(prefix) && foldEqual(s[:len(prefix)], prefix)
	}
	return strings.HasPrefix(fold(s), fold(prefix))
}

// foldHasSuffix is strings.HasSuffix ignoring case.
func foldHasSuffix(s, suffix string) bool {
	if isASCII(s) && isASCII(suffix) {
		return len(s) >= len(suffix) && foldEqual(s[len(s)-len(suffix):], suffix)
	}
	return strings.HasSuffix(fold(s), fold(suffix))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// lookupKey finds key in m ignoring case. An exact match wins; among keys
// that differ only in case, the smallest wins, so the result does not
// depend on map order.
func lookupKey(m map[string]any, key string) (any, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	found, best := false, ""
	for k := range m {
		if foldEqual(k, key) && (!found || k < best) {
			found, best = true, k
		}
	}
	if !found {
		return nil, false
	}
	return m[best], true
}

// sortedValues lists the values of m in key order: Go maps keep no order,
// and results must not change from run to run.
func sortedValues(m map[string]any) []any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// sameInstance reports whether two arrays or two objects are the same
// instance, which is GitHub's equality for them.
func sameInstance(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer()
	case *filtered:
		y, ok := b.(*filtered)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer()
	}
	return false
}

// coerce brings two known values to a common kind the way GitHub's loose
// comparisons do: a number and a string compare as numbers, null and
// booleans become numbers when the other side differs in kind. Arrays and
// objects are never converted. The kinds returned may still differ, and
// then the values are neither equal nor ordered.
func coerce(a, b any) (ka kind, va any, kb kind, vb any) {
	ka, kb = kindOf(a), kindOf(b)
	va, vb = norm(a), norm(b)
	for ka != kb {
		switch {
		case ka == kNumber && kb == kString:
			vb, kb = parseNumber(vb.(string)), kNumber
		case ka == kString && kb == kNumber:
			va, ka = parseNumber(va.(string)), kNumber
		case ka == kNull || ka == kBool:
			va, ka = toNumber(va), kNumber
		case kb == kNull || kb == kBool:
			vb, kb = toNumber(vb), kNumber
		default:
			return
		}
	}
	return
}

// looseEqual is GitHub's ==: after coercion, numbers compare numerically
// (NaN equals nothing), strings ignoring case, arrays and objects by
// instance.
func looseEqual(a, b any) bool {
	ka, va, kb, vb := coerce(a, b)
	if ka != kb {
		return false
	}
	switch ka {
	case kNull:
		return true
	case kBool:
		return va.(bool) == vb.(bool)
	case kNumber:
		return va.(float64) == vb.(float64) // false for NaN
	case kString:
		return foldEqual(va.(string), vb.(string))
	case kArray, kObject:
		return sameInstance(va, vb)
	}
	return false
}

// order is GitHub's < and >: -1, 0 or +1 when a and b are ordered after
// coercion, ok false when they are not (NaN, arrays, objects, mixed
// kinds). Booleans order false before true; strings ignoring case.
func order(a, b any) (c int, ok bool) {
	ka, va, kb, vb := coerce(a, b)
	if ka != kb {
		return 0, false
	}
	switch ka {
	case kNumber:
		x, y := va.(float64), vb.(float64)
		if math.IsNaN(x) || math.IsNaN(y) {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	case kString:
		return strings.Compare(fold(va.(string)), fold(vb.(string))), true
	case kBool:
		x, y := va.(bool), vb.(bool)
		switch {
		case x == y:
			return 0, true
		case y:
			return -1, true
		}
		return 1, true
	case kNull:
		return 0, true
	}
	return 0, false
}

// hasUnknown reports whether v is Unknown or holds Unknown at any depth. A
// context may be partly known: {"os": "linux", "version": Unknown}.
func hasUnknown(v any) bool {
	switch v := v.(type) {
	case Tri:
		return v == Unknown
	case []any:
		return slices.ContainsFunc(v, hasUnknown)
	case *filtered:
		return slices.ContainsFunc(v.items, hasUnknown)
	case map[string]any:
		for _, e := range v {
			if hasUnknown(e) {
				return true
			}
		}
	}
	return false
}

// Equal is GitHub's == operator: values of different kinds are compared
// as numbers (null is 0, booleans 1 and 0, strings parsed, NaN equal to
// nothing), strings ignoring case, arrays and objects by instance.
func Equal(a, b any) bool { return looseEqual(a, b) }
