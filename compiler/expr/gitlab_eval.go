package expr

import (
	"fmt"
	"regexp"
	"strings"
)

// EvalGitLab evaluates a GitLab expression with every variable known:
// lookup returns a variable's value and whether it is defined. The result
// is True or False.
//
// As GitLab documents: a variable alone is true when it is defined and not
// empty; == and != compare values, where an undefined variable is null
// (equal to null, unequal to every string, "" included); =~ is true when
// the regular expression matches somewhere in the value (undefined counts
// as ""), !~ when it does not. The right operand of =~ and !~ may be a
// variable holding /pattern/flags; one that is undefined matches nothing,
// and one that holds other text makes the comparison true when the left
// value is a substring of it (GitLab's documented quirk). && and || are
// logical and and or, && binding tighter.
//
// A variable's regular expression that does not compile gives False and
// an *EvalError saying why; GitLab treats such a condition as false.
func EvalGitLab(n Node, lookup func(name string) (value string, defined bool)) (Tri, error) {
	return EvalGitLabPartial(n, func(name string) (string, bool, bool) {
		v, ok := lookup(name)
		return v, ok, true
	})
}

// EvalGitLabPartial is EvalGitLab when some variables are known only at
// run time: known reports, for each name, its value, whether it is
// defined, and whether that is known now. A comparison with an unknown
// variable is Unknown, and so are && and || unless the known side decides
// (Unknown && False is False, Unknown || True is True, in either order).
func EvalGitLabPartial(n Node, known func(name string) (value string, defined, isKnown bool)) (Tri, error) {
	e := &glEvaluator{known: known}
	return e.cond(n)
}

type glEvaluator struct {
	known func(name string) (string, bool, bool)
}

// glValue is an operand's value.
type glValue struct {
	s       string
	defined bool // false for null and undefined variables
	unknown bool
}

func (e *glEvaluator) value(n Node) (glValue, error) {
	switch n := n.(type) {
	case *GitLabVar:
		s, defined, isKnown := e.known(n.Name)
		if !isKnown {
			return glValue{unknown: true}, nil
		}
		return glValue{s: s, defined: defined}, nil
	case *GitLabString:
		return glValue{s: n.Value, defined: true}, nil
	case *GitLabNull:
		return glValue{}, nil
	}
	return glValue{}, glFail(n, "%s is not an operand", describeNode(n))
}

func glFail(n Node, format string, args ...any) error {
	off := 0
	if n != nil {
		off = n.Pos()
	}
	return &EvalError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func describeNode(n Node) string {
	if n == nil {
		return "a nil node"
	}
	return fmt.Sprintf("%T", n)
}

func (e *glEvaluator) cond(n Node) (Tri, error) {
	b, ok := n.(*GitLabBinary)
	if !ok {
		v, err := e.value(n)
		switch {
		case err != nil:
			return False, err
		case v.unknown:
			return Unknown, nil
		}
		return triOf(v.defined && v.s != ""), nil
	}
	switch b.Op {
	case OpAnd, OpOr:
		decisive := triOf(b.Op == OpOr) // False decides &&, True decides ||
		x, err := e.cond(b.X)
		if err != nil || x == decisive {
			return x, err
		}
		y, err := e.cond(b.Y)
		if err != nil || y == decisive {
			return y, err
		}
		if x == Unknown || y == Unknown {
			return Unknown, nil
		}
		return y, nil
	case OpEq, OpNe:
		x, err := e.value(b.X)
		if err != nil {
			return False, err
		}
		y, err := e.value(b.Y)
		if err != nil {
			return False, err
		}
		if x.unknown || y.unknown {
			return Unknown, nil
		}
		eq := x.defined == y.defined && x.s == y.s
		return triOf(eq == (b.Op == OpEq)), nil
	case OpMatch, OpNotMatch:
		m, err := e.match(b)
		if err != nil || m == Unknown {
			return m, err
		}
		return triOf((m == True) == (b.Op == OpMatch)), nil
	}
	return False, glFail(b, "operator %s is not GitLab's", b.Op)
}

// gitlabPatternSyntax is how GitLab recognises a variable holding a
// regular expression.
var gitlabPatternSyntax = regexp.MustCompile(`^/(.*)/([ismU]*)$`)

// match evaluates x =~ y.
func (e *glEvaluator) match(b *GitLabBinary) (Tri, error) {
	x, err := e.value(b.X)
	if err != nil {
		return False, err
	}
	var re *regexp.Regexp
	switch y := b.Y.(type) {
	case *GitLabRegexp:
		re = y.re
		if re == nil {
			if re, err = compileGitLabRegexp(y.Pattern, y.Flags); err != nil {
				return False, &EvalError{Offset: y.Offset, Msg: err.Error(), Err: err}
			}
		}
		if x.unknown {
			return Unknown, nil
		}
	default:
		v, err := e.value(b.Y)
		switch {
		case err != nil:
			return False, err
		case x.unknown || v.unknown:
			return Unknown, nil
		case !v.defined:
			return False, nil
		}
		sub := gitlabPatternSyntax.FindStringSubmatch(v.s)
		if sub == nil {
			return triOf(strings.Contains(v.s, x.s)), nil
		}
		if re, err = compileGitLabRegexp(sub[1], sub[2]); err != nil {
			return False, &EvalError{Offset: b.Y.Pos(), Msg: fmt.Sprintf("the value of %s: %v", b.Y, err), Err: err}
		}
	}
	return triOf(re.MatchString(x.s)), nil
}
