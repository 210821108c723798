package compiler

import (
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// RuleExpr is the rule of findings in expressions.
const RuleExpr = "expression"

// nativeContexts are the contexts a native if: may read. needs, job and
// steps are only known at run time; github, vars and inputs when the
// compiler is given the event.
var nativeContexts = map[string]bool{
	"github": true, "env": true, "matrix": true, "needs": true, "vars": true, "inputs": true, "job": true, "steps": true,
}

// nativeIf parses a job's if: condition, written with or without ${{ }},
// and reports what is certainly wrong with it. It returns nil when the
// condition is absent or reported.
func (c *checker) nativeIf(v *yaml.Node, own owner) *parsedIf {
	src, ok := c.scalar(v, "if", own)
	if !ok {
		return nil
	}
	body, shift := src, 0
	if t := strings.TrimSpace(src); strings.HasPrefix(t, "${{") && strings.HasSuffix(t, "}}") {
		shift = strings.Index(src, "${{") + 3
		body = src[shift:strings.LastIndex(src, "}}")]
	}
	n, err := expr.ParseGitHub(body)
	if err != nil {
		se, _ := err.(*expr.SyntaxError)
		off := 0
		msg := err.Error()
		if se != nil {
			off, msg = se.Offset, se.Msg
		}
		c.atOffset(v, shift+off, RuleExpr, "invalid condition%s: %s", own.of(), msg)
		return nil
	}
	reported := false
	for _, p := range expr.CheckGitHub(n, nativeContexts) {
		c.atOffset(v, shift+p.Offset, RuleExpr, "%s%s", p.Msg, own.in())
		reported = true
	}
	if reported {
		return nil
	}
	return &parsedIf{node: v, src: strings.TrimSpace(body), expr: n, shift: shift}
}

type parsedIf struct {
	node  *yaml.Node
	src   string
	expr  expr.Node
	shift int
}

// decideIf settles what the compiler can of a job's condition: matrix
// references must name the job's matrix; a condition that is constant
// with what is known at compile time becomes When (never, or nothing);
// always() and failure() alone become When always and on_failure; the
// rest stays in JobSpec.If for the scheduler.
func (c *checker) decideIf(j *jobDecl, p *parsedIf, own owner) {
	if p == nil {
		return
	}
	for _, r := range expr.References(p.expr) {
		if len(r.Path) < 2 || r.Path[0] != "matrix" || r.Path[1] == "*" {
			continue
		}
		if _, ok := j.spec.Matrix[r.Path[1]]; !ok {
			if j.spec.Matrix == nil {
				c.atOffset(p.node, p.shift+r.Offset, RuleExpr, "%s refers to the matrix, but job %q has none", r, j.spec.ID)
			} else {
				keys := slices.Sorted(maps.Keys(j.spec.Matrix))
				c.atOffset(p.node, p.shift+r.Offset, RuleExpr, "the matrix of job %q has no %q%s (names: %s)", *own.job, r.Path[1], didYouMean(c.suggest(r.Path[1], keys)), list(keys))
			}
			return
		}
	}
	switch strings.ReplaceAll(p.src, " ", "") {
	case "success()":
		return
	case "always()":
		j.spec.When = cikit.WhenAlways
		return
	case "failure()":
		j.spec.When = cikit.WhenOnFailure
		return
	}
	env := &expr.GitHubEnv{
		Contexts: map[string]any{"env": anyMap(j.spec.Env), "matrix": anyMap(j.spec.Matrix)},
		Unknown:  map[string]bool{"needs": true, "job": true, "steps": true},
	}
	if ev := c.opts.Event; ev != nil {
		env.Contexts["github"] = githubContext(ev)
		env.Contexts["vars"] = anyMap(ev.Variables)
		env.Contexts["inputs"] = maps.Clone(ev.Inputs)
	} else {
		env.Unknown["github"], env.Unknown["vars"], env.Unknown["inputs"] = true, true, true
	}
	v, err := expr.EvalGitHub(p.expr, env)
	if err != nil {
		c.atOffset(p.node, p.shift, RuleExpr, "condition%s cannot be evaluated: %v", own.of(), err)
		return
	}
	switch expr.Condition(v) {
	case expr.False:
		j.spec.When = cikit.WhenNever
	case expr.Unknown:
		j.spec.If = &cikit.Condition{Lang: cikit.LangGitHub, Expr: p.src}
	}
}

// githubContext is the github context of a native condition, from what
// the compiler knows of the event.
func githubContext(ev *Event) map[string]any {
	refName := ev.Branch
	if ev.Tag != "" {
		refName = ev.Tag
	}
	ctx := map[string]any{
		"event_name": ev.Name, "ref": ev.Ref, "ref_name": refName, "sha": ev.SHA,
		"base_ref": ev.BaseBranch, "actor": ev.Actor,
	}
	if ev.Payload != nil {
		ctx["event"] = ev.Payload
	}
	return ctx
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// atOffset reports at byte offset off of scalar n's value.
func (c *checker) atOffset(n *yaml.Node, off int, rule, format string, args ...any) {
	line, col := c.scalarPos(n, off)
	c.report(line, col, rule, format, args...)
}
