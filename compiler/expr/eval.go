package expr

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// GitHubEnv is what an expression is evaluated against.
//
// Context values are nil, bool, float64, string, []any and map[string]any
// (other Go integer and float types are read as float64), the shapes
// encoding/json decodes into; any of them may be or hold Unknown for a part
// known only at run time. Object keys and context names match ignoring
// case. The evaluator never modifies the values.
type GitHubEnv struct {
	// Contexts are the contexts known now, by name: github, inputs,
	// matrix, env, vars, …
	Contexts map[string]any
	// Unknown names contexts that exist but are known only at run time
	// (needs, steps, job, …); any access to them is Unknown. A name in
	// both Contexts and Unknown is taken from Contexts.
	Unknown map[string]bool
	// Status is the outcome so far, for success(), failure() and
	// cancelled(); nil when not known, which makes them Unknown.
	// always() is true regardless.
	Status *Status
	// HashFiles computes hashFiles(patterns...) once the workspace
	// exists; nil makes hashFiles Unknown. Its errors fail the
	// evaluation.
	HashFiles func(patterns []string) (string, error)
}

// Status is the outcome that GitHub's status functions report on: of the
// earlier steps for a step's condition, of the needed jobs (and theirs)
// for a job's.
type Status struct {
	Failed    bool // something failed: failure() is true
	Cancelled bool // the run was cancelled: cancelled() is true
	// Unsucceeded says, for a job's condition, that a needed job neither
	// succeeded nor failed (it was skipped or cancelled): success() is
	// false, failure() unchanged.
	Unsucceeded bool
}

// EvalError is an expression that fails to evaluate: a call of an unknown
// function, a wrong argument count, an invalid format string, invalid
// JSON, an unknown context, a HashFiles error (Err). Offset is the byte
// offset, in the parsed source, of the node that failed.
type EvalError struct {
	Offset int
	Msg    string
	Err    error // the underlying error, if any
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("at offset %d: %s", e.Offset, e.Msg)
}

func (e *EvalError) Unwrap() error { return e.Err }

// maxBuilt bounds the text that format, join and toJSON build in one
// evaluation, summed: nested calls multiply lengths, and an expression
// can hold thousands of calls. GitHub stops at about 1 MB as well.
const maxBuilt = 1 << 20

// EvalGitHub evaluates a GitHub expression. The result is nil, a bool, a
// float64, a string, a []any, a map[string]any, or Unknown when it depends
// on what env does not know yet. Arrays and objects taken from a context
// may hold Unknown where the context does.
//
// Unknown propagates through operators and function calls, except where
// the known part decides: false && x is false and true || x is true, as
// && and || return the deciding operand (GitHub's rule: a && b is a when
// a is falsy, else b). always() is true and contains() is true once a
// known element matches. With an Unknown left operand, && and || are
// Unknown, and errors in the right operand are not reported: at run time
// it may not be evaluated.
//
// Errors are *EvalError. Only what is evaluated is checked: false && f()
// does not call f, and so does not complain if f does not exist; use
// CheckGitHub for that.
func EvalGitHub(n Node, env *GitHubEnv) (any, error) {
	if env == nil {
		env = &GitHubEnv{}
	}
	e := &evaluator{env: env}
	v, err := e.eval(n)
	if err != nil {
		return nil, err
	}
	return v, nil
}

type evaluator struct {
	env   *GitHubEnv
	built int // bytes of text built so far, against maxBuilt
}

// tooMuch is the error for text past maxBuilt.
func tooMuch(c *Call) error {
	return &EvalError{Offset: c.Offset, Msg: fmt.Sprintf("%s: the expression builds more than %d bytes of text", c.Name, maxBuilt)}
}

func (e *evaluator) fail(n Node, format string, args ...any) error {
	return &EvalError{Offset: offsetOf(n), Msg: fmt.Sprintf(format, args...)}
}

func offsetOf(n Node) int {
	switch n := n.(type) {
	case *Binary:
		return n.Offset
	case *Property:
		return n.Offset
	case *Index:
		return n.Offset
	case nil:
		return 0
	}
	return n.Pos()
}

// eval evaluates n to a value a caller may see: object filters become
// plain arrays.
func (e *evaluator) eval(n Node) (any, error) {
	v, err := e.evalRaw(n)
	if f, ok := v.(*filtered); ok {
		if f.items == nil {
			return []any{}, err
		}
		return f.items, err
	}
	return v, err
}

// evalRaw evaluates n, keeping object filters as *filtered for the
// accesses that follow them.
func (e *evaluator) evalRaw(n Node) (any, error) {
	switch n := n.(type) {
	case *Literal:
		return norm(n.Value), nil
	case *Context:
		return e.context(n)
	case *Property:
		x, err := e.evalRaw(n.X)
		if err != nil {
			return nil, err
		}
		if n.Name == "*" {
			return access(x, accessKey{star: true}), nil
		}
		return access(x, accessKey{str: n.Name, hasStr: true, num: -1}), nil
	case *Index:
		x, err := e.evalRaw(n.X)
		if err != nil {
			return nil, err
		}
		if n.Index == nil {
			return access(x, accessKey{star: true}), nil
		}
		i, err := e.eval(n.Index)
		if err != nil {
			return nil, err
		}
		if i == Unknown {
			return Unknown, nil
		}
		return access(x, keyOf(i)), nil
	case *Not:
		x, err := e.eval(n.X)
		if err != nil || x == Unknown {
			return x, err
		}
		return !Truthy(x), nil
	case *Binary:
		return e.binary(n)
	case *Call:
		return e.call(n)
	case nil:
		return nil, &EvalError{Msg: "nil expression"}
	}
	return nil, e.fail(n, "%T is not a GitHub expression node", n)
}

func (e *evaluator) context(n *Context) (any, error) {
	v, ok := e.env.Contexts[n.Name]
	lower := strings.ToLower(n.Name)
	if !ok {
		v, ok = lookupKey(e.env.Contexts, lower)
	}
	if ok {
		// A map[string]string, say, would read as null everywhere; better
		// to tell the caller at once.
		if kindOf(v) == kInvalid {
			return nil, &EvalError{Offset: n.Offset, Msg: fmt.Sprintf("context %q holds a Go %T; contexts hold nil, bool, float64, string, []any or map[string]any", n.Name, v)}
		}
		return norm(v), nil
	}
	if e.env.Unknown[lower] {
		return Unknown, nil
	}
	for name, ok := range e.env.Unknown {
		if ok && foldEqual(name, lower) {
			return Unknown, nil
		}
	}
	names := slices.Collect(maps.Keys(e.env.Contexts))
	for name, ok := range e.env.Unknown {
		if ok {
			names = append(names, name)
		}
	}
	return nil, &EvalError{Offset: n.Offset, Msg: unknownContextMsg(n.Name, names)}
}

// accessKey is a property name or an index value, in the forms GitHub
// looks it up with: as an object key and as an array index.
type accessKey struct {
	star   bool
	str    string // the key as an object key
	hasStr bool   // whether the value can be an object key (primitives)
	num    int    // the key as an array index; -1 when it is not one
}

func keyOf(v any) accessKey {
	k := accessKey{num: -1}
	if kindOf(v).primitive() {
		k.str, k.hasStr = ToString(v), true
		f := toNumber(v)
		if !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 {
			k.num = int(min(math.Floor(f), math.MaxInt32))
		}
	}
	return k
}

// access looks k up in x; out of range and missing keys are null, and
// accesses on primitives are null (an object filter on one is []).
func access(x any, k accessKey) any {
	switch x := x.(type) {
	case Tri:
		if x == Unknown {
			return Unknown
		}
	case *filtered:
		// Applied to each element; elements that lack the key drop out.
		out := &filtered{}
		for _, item := range x.items {
			switch item := norm(item).(type) {
			case Tri:
				if item == Unknown {
					return Unknown
				}
			case map[string]any:
				if k.star {
					out.items = append(out.items, sortedValues(item)...)
				} else if k.hasStr {
					if v, ok := lookupKey(item, k.str); ok {
						out.items = append(out.items, norm(v))
					}
				}
			case []any:
				if k.star {
					out.items = append(out.items, item...)
				} else if k.num >= 0 && k.num < len(item) {
					out.items = append(out.items, norm(item[k.num]))
				}
			}
		}
		return out
	case []any:
		if k.star {
			return &filtered{items: slices.Clone(x)}
		}
		if k.num >= 0 && k.num < len(x) {
			return norm(x[k.num])
		}
		return nil
	case map[string]any:
		if k.star {
			return &filtered{items: sortedValues(x)}
		}
		if k.hasStr {
			if v, ok := lookupKey(x, k.str); ok {
				return norm(v)
			}
		}
		return nil
	}
	if k.star {
		return &filtered{}
	}
	return nil
}

func (e *evaluator) binary(n *Binary) (any, error) {
	x, err := e.eval(n.X)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case OpAnd, OpOr:
		if x == Unknown {
			// Which operand is the result is not known, so neither is the
			// result. The right operand is not evaluated: at run time it
			// may not be, so its errors may never happen.
			return Unknown, nil
		}
		if Truthy(x) == (n.Op == OpOr) {
			return x, nil
		}
		return e.eval(n.Y)
	}
	y, err := e.eval(n.Y)
	if err != nil {
		return nil, err
	}
	if x == Unknown || y == Unknown {
		return Unknown, nil
	}
	switch n.Op {
	case OpEq:
		return looseEqual(x, y), nil
	case OpNe:
		return !looseEqual(x, y), nil
	case OpLt:
		c, ok := order(x, y)
		return ok && c < 0, nil
	case OpGt:
		c, ok := order(x, y)
		return ok && c > 0, nil
	case OpLe:
		c, ok := order(x, y)
		return ok && c < 0 || looseEqual(x, y), nil
	case OpGe:
		c, ok := order(x, y)
		return ok && c > 0 || looseEqual(x, y), nil
	}
	return nil, e.fail(n, "operator %s is not GitHub's", n.Op)
}
