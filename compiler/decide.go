package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/dag"
)

// DecideJob decides the run-time condition of a job (JobSpec.If, which
// Compile writes when it cannot decide a job's if: or rules:if itself),
// given the run's context and how the jobs it needs ended. It satisfies
// dag.DeciderFunc:
//
//	store := dag.NewMemoryStore(dag.MemoryConfig{Decider: dag.DeciderFunc(compiler.DecideJob)})
//
// A GitHub condition (cikit.LangGitHub) reads the github context made
// from the run's context (event name, ref, sha, repository, actor, the
// event's payload as github.event), the inputs, and needs: each needed
// job's result and outputs, as ExpandJob sees them. Its status functions
// report on the needed jobs, as GitHub's do for a job: success() when
// each succeeded, failure() when one failed, always() always;
// cancelled() is false, the store cancelling the jobs of a cancelled
// run itself. The rest of the reaction to the needs is the job's When,
// which the store has applied already. A native pipeline's condition
// also reads the job's env and matrix. A GitLab condition
// (cikit.LangGitLab, a rules:if) reads the run's variables (its context's
// inputs), the job's variables and the variables GitLab predefines from
// what the run's context tells; any other variable is undefined, as in
// GitLab.
//
// A condition that does not parse, fails to evaluate, reads what is not
// known when a job is decided (vars, secrets, steps, github.run_id…),
// or is in another language is an error: the job's configuration
// failure, never a silent decision.
func DecideJob(ctx context.Context, req *dag.ExpandRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if req == nil || req.Job == nil {
		return false, errors.New("compiler: DecideJob needs a job to decide")
	}
	c := req.Job.If
	if c == nil || strings.TrimSpace(c.Expr) == "" {
		return true, nil
	}
	ev, err := runEvent(req.Run)
	if err != nil {
		return false, err
	}
	switch c.Lang {
	case cikit.LangGitHub, "":
		return decideGitHub(req, ev)
	case cikit.LangGitLab:
		return decideGitLab(req, ev)
	}
	return false, fmt.Errorf("compiler: job %q has a condition in language %q, which the compiler does not decide", req.Job.ID, c.Lang)
}

// runEvent is the Event of a run, from its context: what the compiler
// would have been given to decide at compile time. A run without a
// context is an Event that tells nothing.
func runEvent(rc *cikit.RunContext) (*Event, error) {
	ev := &Event{}
	if rc == nil {
		return ev, nil
	}
	ev.Name, ev.Ref, ev.SHA, ev.Actor = rc.Event, rc.Ref, rc.SHA, rc.Actor
	ev.BaseBranch, ev.DefaultBranch = rc.BaseRef, rc.DefaultBranch
	switch {
	case rc.RefType == "tag":
		ev.Tag = rc.RefName
	case rc.HeadRef != "":
		ev.Branch = rc.HeadRef
	case rc.RefType == "branch":
		ev.Branch = rc.RefName
	}
	if len(rc.Inputs) > 0 {
		ev.Variables = rc.Inputs
		ev.Inputs = rc.TypedInputs() // booleans and numbers as declared
	}
	if len(rc.Payload) > 0 {
		if err := json.Unmarshal(rc.Payload, &ev.Payload); err != nil {
			return nil, fmt.Errorf("compiler: the run's event payload is not a JSON object: %w", err)
		}
	}
	return ev, nil
}

// decideGitHub evaluates a GitHub (or native) job condition.
func decideGitHub(req *dag.ExpandRequest, ev *Event) (bool, error) {
	job := req.Job
	src := strings.TrimSpace(job.If.Expr)
	if inner, ok := strings.CutPrefix(src, "${{"); ok {
		if inner, ok = strings.CutSuffix(inner, "}}"); ok && !strings.Contains(inner, "${{") {
			src = strings.TrimSpace(inner)
		}
	}
	n, err := expr.ParseGitHub(src)
	if err != nil {
		return false, fmt.Errorf("compiler: the condition of job %q does not parse: %w", job.ID, err)
	}
	env := &expr.GitHubEnv{
		Contexts: map[string]any{"needs": expr.GitHubNeeds(req.Needs), "inputs": map[string]any{}},
		Unknown:  map[string]bool{"steps": true, "job": true, "jobs": true, "runner": true, "secrets": true, "strategy": true, "vars": true},
		Status:   needsStatus(req.Needs),
	}
	if ev.Inputs != nil {
		env.Contexts["inputs"] = ev.Inputs
	}
	if job.Format == string(FormatNative) {
		env.Contexts["github"] = githubContext(ev)
		env.Contexts["env"], env.Contexts["matrix"] = anyMap(job.Env), anyMap(job.Matrix)
	} else {
		gh := ghGithubContext(ev)
		if rc := req.Run; rc != nil {
			set := func(k, v string) {
				if v != "" {
					gh[k] = v
				}
			}
			set("repository", rc.Repository)
			if owner, _, ok := strings.Cut(rc.Repository, "/"); ok {
				set("repository_owner", owner)
			}
			set("ref_name", rc.RefName)
			set("ref_type", rc.RefType)
			set("base_ref", rc.BaseRef)
			set("head_ref", rc.HeadRef)
		}
		env.Contexts["github"] = gh
		env.Unknown["env"], env.Unknown["matrix"] = true, true
	}
	truth, err := condTruth(n, env)
	if err != nil {
		return false, fmt.Errorf("compiler: the condition of job %q: %w", job.ID, err)
	}
	switch truth {
	case expr.True:
		return true, nil
	case expr.False:
		return false, nil
	}
	return false, fmt.Errorf("compiler: the condition of job %q reads what is not known when a job is decided (only github, inputs and needs are)", job.ID)
}

// needsStatus is what GitHub's status functions report on for a job
// whose needs ended so.
func needsStatus(needs map[string]cikit.NeedResult) *expr.Status {
	st := &expr.Status{}
	for _, n := range needs {
		switch n.Result {
		case cikit.JobSucceeded:
		case cikit.JobFailed:
			st.Failed = true
		default:
			st.Unsucceeded = true
		}
	}
	return st
}

// decideGitLab evaluates a GitLab rules:if left for the run.
func decideGitLab(req *dag.ExpandRequest, ev *Event) (bool, error) {
	job := req.Job
	n, err := expr.ParseGitLab(strings.TrimSpace(job.If.Expr))
	if err != nil {
		return false, fmt.Errorf("compiler: the rules:if of job %q does not parse: %w", job.ID, err)
	}
	vars := newGLVars(ev).with(job.Env)
	t, err := expr.EvalGitLab(n, func(name string) (string, bool) {
		v, ok, _ := vars.lookup(name) // unknown now is undefined: GitLab has not defined it
		return v, ok
	})
	if err != nil {
		if ee := (*expr.EvalError)(nil); errors.As(err, &ee) && ee.Err != nil {
			return false, nil // a regular expression that does not compile: false, as in GitLab
		}
		return false, fmt.Errorf("compiler: the rules:if of job %q: %w", job.ID, err)
	}
	return t == expr.True, nil
}
