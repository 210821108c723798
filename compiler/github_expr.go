package compiler

import (
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// ghEval evaluates the expressions of one job variant: the job, its
// matrix values and the call its workflow is compiled for.
type ghEval struct {
	g       *ghCompiler
	wf      *ghWorkflow
	job     *ghJob
	variant *ghVariant
	call    *ghCall
}

// render returns the text of t with its expressions evaluated, or as
// written when one of them can only be evaluated at run time.
func (x *ghEval) render(t ghText) string {
	return t.s
}

// renderName renders a job's name for a variant. A name without
// expressions gets the variant's values appended, as GitHub does.
func (x *ghEval) renderName(t ghText) string {
	if x.variant != nil && !hasExpr(t.s) {
		return variantName(t.s, *x.variant)
	}
	return x.render(t)
}

// value evaluates t to a value; known is false when it depends on the
// run.
func (x *ghEval) value(t ghText) (any, bool) {
	if !hasExpr(t.s) {
		return t.s, true
	}
	return nil, false
}

// bool evaluates a boolean that may be an expression.
func (x *ghEval) bool(t ghText) (b, known bool) {
	v, known := x.value(t)
	if !known {
		return false, false
	}
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		return strings.EqualFold(v, "true"), true
	}
	return false, false
}

// minutes evaluates timeout-minutes.
func (x *ghEval) minutes(t ghText) time.Duration {
	v, known := x.value(t)
	if !known {
		return 0
	}
	switch v := v.(type) {
	case float64:
		return minutesDuration(renderValue(v))
	case string:
		return minutesDuration(v)
	}
	return 0
}

// jobCondition reads a job's if: into when it runs and what is left to
// decide at run time.
func (x *ghEval) jobCondition(t ghText) (cikit.When, *cikit.Condition) {
	if !t.set() {
		return "", nil
	}
	if v, isConst := x.g.constantCondition(t); isConst {
		if !v {
			return cikit.WhenNever, nil
		}
		return "", nil
	}
	s := strings.TrimSpace(t.s)
	if isExprTemplate(s) {
		s = strings.TrimSpace(s[3 : len(s)-2])
	}
	switch s {
	case "success()":
		return "", nil
	case "always()":
		return cikit.WhenAlways, nil
	case "failure()":
		return cikit.WhenOnFailure, nil
	}
	return "", &cikit.Condition{Lang: cikit.LangGitHub, Expr: s}
}

// evalValue evaluates t for job j and variant v.
func (g *ghCompiler) evalValue(t ghText, j *ghJob, v *ghVariant) (any, bool) {
	x := &ghEval{g: g, wf: j.wf, job: j, variant: v}
	return x.value(t)
}

// stepCondition reads a step's if:.
func (g *ghCompiler) stepCondition(t ghText, where string) *cikit.Condition {
	g.constantCondition(t)
	s := strings.TrimSpace(t.s)
	if isExprTemplate(s) {
		s = strings.TrimSpace(s[3 : len(s)-2])
	}
	if s == "success()" {
		return nil
	}
	return &cikit.Condition{Lang: cikit.LangGitHub, Expr: s}
}

// snapshotIf checks the condition of a snapshot.
func (g *ghCompiler) snapshotIf(t ghText) {
	if t.set() {
		g.constantCondition(t)
	}
}

// constantCondition reports a condition that is always true or always
// false, which is a mistake or a leftover: the if: does nothing, or its
// job or step never runs.
func (g *ghCompiler) constantCondition(t ghText) (value, isConst bool) {
	s := strings.TrimSpace(t.s)
	switch s {
	case "true":
		g.c.at(t.node, RuleIfCond, "condition %q is always true; remove the if:", t.s)
		return true, true
	case "false":
		g.c.at(t.node, RuleIfCond, "condition %q is always false, so this never runs; remove it, or the if:", t.s)
		return false, true
	}
	return false, false
}
