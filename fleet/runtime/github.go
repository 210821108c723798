package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// GitHub evaluates a job's ${{ }} expressions at run time, against the
// contexts GitHub Actions gives a job:
//
//   - github: the run (sha, ref, ref_name, ref_type, repository,
//     repository_owner, actor, triggering_actor, event_name, event — the
//     payload —, head_ref, base_ref, run_id, run_number, run_attempt,
//     job, workspace, server_url, api_url, graphql_url, event_path,
//     repositoryUrl, action_path, token);
//
//   - env: the job's env expanded, the variables earlier steps wrote to
//     GITHUB_ENV (AddEnv), and in a step's own values its env (StepEnv);
//
//   - matrix: the variant's values, objects and arrays as such
//     (JobSpec.MatrixJSON);
//
//   - needs.<job>.result and needs.<job>.outputs (JobContext.Needs), the
//     variants of a matrix job also together under its key;
//
//   - steps.<id>.outputs, outcome and conclusion (SetStep);
//
//   - inputs (JobContext.Inputs, booleans and numbers typed as
//     InputTypes says: RunContext.TypedInputs), vars (Params.Vars), secrets (empty
//     until the platform hands secrets to runners), job.status, runner
//     (name, os, arch, temp, tool_cache, environment).
//
//   - strategy: job-index, job-total, fail-fast and max-parallel of a
//     matrix variant (Spec.Strategy; max-parallel the number of variants
//     when the job does not set it), and for a job without matrix
//     GitHub's default: job-index 0, job-total 1, fail-fast true,
//     max-parallel 1.
//
// hashFiles is evaluated
// over the workspace. A GitHub is not safe for concurrent use: the
// executor runs one step at a time.
type GitHub struct {
	p        Params
	contexts map[string]any // github, matrix, needs, inputs, vars, secrets, runner
	jobEnv   map[string]string
	files    *fileEnv // shared with the contexts of composite actions
	env      map[string]string
	steps    map[string]any
	status   expr.Status
}

// fileEnv holds what steps wrote to GITHUB_ENV: one per job, shared by the
// contexts of the composite actions it runs, whose steps write to the
// job's environment as well.
type fileEnv struct{ vars map[string]string }

// NewGitHub builds the contexts of a job and expands its env (Spec.Env),
// which may read every context but env and steps. Its errors name the
// variable whose value does not evaluate.
func NewGitHub(p Params) (*GitHub, error) {
	if p.Spec == nil {
		return nil, fmt.Errorf("runtime: Params.Spec is required")
	}
	rc := p.rc()
	var runID string
	attempt := 1
	inputs := map[string]any{}
	needs := map[string]any{}
	if p.Context != nil {
		runID, attempt = p.Context.RunID, max(p.Context.Attempt, 1)
		maps.Copy(inputs, p.Context.TypedInputs())
		needs = expr.GitHubNeeds(p.Context.Needs)
	}
	var event any
	if err := json.Unmarshal(EventJSON(p.Context), &event); err != nil {
		event = map[string]any{}
	}
	server := serverURL(rc)
	r := p.runner()
	matrix := anyMap(p.Spec.Matrix)
	for k, raw := range p.Spec.MatrixJSON {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("matrix value %q is not JSON: %w", k, err)
		}
		matrix[k] = v
	}
	g := &GitHub{
		p: p,
		contexts: map[string]any{
			"github": map[string]any{
				"sha": rc.SHA, "ref": rc.Ref, "ref_name": rc.RefName, "ref_type": rc.RefType,
				"repository": rc.Repository, "repository_owner": owner(rc.Repository),
				"actor": rc.Actor, "triggering_actor": rc.Actor, "event_name": rc.Event, "event": event,
				"head_ref": rc.HeadRef, "base_ref": rc.BaseRef, "run_id": runID, "run_number": runNumber(p.Context), "run_attempt": strconv.Itoa(attempt),
				"job": jobKey(p.Spec), "workspace": p.Workspace, "server_url": server,
				"api_url": apiURL(server), "graphql_url": graphqlURL(server), "action_path": "", "token": "",
				"event_path": p.eventPath(), "repositoryUrl": repositoryGitURL(server, rc.Repository),
			},
			"matrix":   matrix,
			"strategy": strategyContext(p.Spec.Strategy),
			"needs":    needs,
			"inputs":   inputs,
			"vars":     anyMap(p.Vars),
			"secrets":  anyMap(p.Secrets),
			"runner": map[string]any{
				"name": r.Name, "os": r.OS, "arch": r.Arch, "temp": p.Temp, "tool_cache": r.ToolCache,
				"environment": "self-hosted",
			},
		},
		files: &fileEnv{vars: map[string]string{}},
		steps: map[string]any{},
	}
	g.env = map[string]string{}
	env, err := g.expandMap("env", p.Spec.Env)
	if err != nil {
		return nil, err
	}
	g.jobEnv = env
	g.env = g.baseEnv()
	return g, nil
}

// strategyContext is the strategy context of a job whose variant stands
// at s (nil without matrix).
func strategyContext(s *cikit.Strategy) map[string]any {
	if s == nil {
		s = &cikit.Strategy{Total: 1, FailFast: true, MaxParallel: 1}
	}
	return map[string]any{
		"job-index": float64(s.Index), "job-total": float64(s.Total), "fail-fast": s.FailFast,
		"max-parallel": float64(cmp.Or(s.MaxParallel, s.Total)),
	}
}

// repositoryGitURL is github.repositoryUrl: the repository's git://
// URL on its server.
func repositoryGitURL(server, repo string) string {
	host, ok := strings.CutPrefix(server, "https://")
	if !ok {
		host, ok = strings.CutPrefix(server, "http://")
	}
	if !ok || host == "" || repo == "" {
		return ""
	}
	return "git://" + host + "/" + repo + ".git"
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// exprEnv is the evaluation environment of the moment.
func (g *GitHub) exprEnv() *expr.GitHubEnv {
	ctx := make(map[string]any, len(g.contexts)+3)
	maps.Copy(ctx, g.contexts)
	ctx["env"] = anyMap(g.env)
	ctx["steps"] = g.steps
	ctx["job"] = map[string]any{"status": jobStatus(g.status), "container": map[string]any{}, "services": g.servicesContext()}
	st := g.status
	return &expr.GitHubEnv{Contexts: ctx, Status: &st, HashFiles: g.hashFiles}
}

// servicesContext is job.services: for each service, its ports as the
// job reaches them. A job shares its services' network and reaches a
// service on the port it listens on, so ports maps each port a service
// names (the container's side of "8080:80") to itself, where GitHub maps
// it to a port of the host.
func (g *GitHub) servicesContext() map[string]any {
	out := map[string]any{}
	if g.p.Spec == nil {
		return out
	}
	for _, svc := range g.p.Spec.Services {
		ports := map[string]any{}
		for _, pm := range svc.Ports {
			_, ctr, ok := strings.Cut(pm, ":")
			if !ok {
				ctr = pm
			}
			ctr, _, _ = strings.Cut(ctr, "/")
			ports[ctr] = ctr
		}
		out[svc.Name] = map[string]any{"id": svc.Name, "network": "", "ports": ports}
	}
	return out
}

func jobStatus(st expr.Status) string {
	switch {
	case st.Cancelled:
		return "cancelled"
	case st.Failed:
		return "failure"
	}
	return "success"
}

// Eval evaluates s as GitHub evaluates a YAML value: a value that is one
// ${{ }} alone has the expression's value, of any type (a with: input
// that is an object, say); otherwise the result is a string.
func (g *GitHub) Eval(s string) (any, error) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	v, err := expr.EvalTemplate(s, g.exprEnv())
	if err != nil {
		return nil, err
	}
	if v == expr.Unknown {
		return nil, fmt.Errorf("%q cannot be evaluated here", clip(s))
	}
	return v, nil
}

// Expand evaluates the expressions of s and returns it as a string, as
// GitHub does for run, shell, working-directory, env and with values.
func (g *GitHub) Expand(s string) (string, error) {
	v, err := g.Eval(s)
	if err != nil {
		return "", err
	}
	return expr.ToString(v), nil
}

func (g *GitHub) expandMap(what string, m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := g.Expand(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// JobEnv returns the job's env (Spec.Env) expanded, for the environment
// of its processes.
func (g *GitHub) JobEnv() map[string]string { return maps.Clone(g.jobEnv) }

// baseEnv is the env context between steps: the job's env overlaid by
// what steps wrote to GITHUB_ENV.
func (g *GitHub) baseEnv() map[string]string {
	env := maps.Clone(g.jobEnv)
	maps.Copy(env, g.files.vars)
	return env
}

// AddEnv records variables a step wrote to GITHUB_ENV: the later steps
// see them in their environment and in env.*, above the job's env and
// below their own. As on GitHub, NODE_OPTIONS (in any case) cannot be
// set so, since it would run code in every later Node.js process: it is
// left out, and the error names it; the other variables are recorded.
func (g *GitHub) AddEnv(kvs []KV) error {
	var refused []string
	for _, kv := range kvs {
		if strings.EqualFold(kv.Name, "NODE_OPTIONS") {
			refused = append(refused, kv.Name)
			continue
		}
		g.files.vars[kv.Name] = kv.Value
	}
	g.env = g.baseEnv()
	if len(refused) > 0 {
		return fmt.Errorf("%s cannot be set through GITHUB_ENV, as on GitHub: set it in the env of the steps that need it", strings.Join(slices.Compact(refused), ", "))
	}
	return nil
}

// FileEnv returns what steps wrote to GITHUB_ENV so far.
func (g *GitHub) FileEnv() map[string]string { return maps.Clone(g.files.vars) }

// StepEnv expands a step's env and returns the step's env context: the
// job's env, overlaid by GITHUB_ENV's variables, overlaid by the step's.
// Each of the step's values reads env.* as it was before the step. From
// this call on, Expand reads env.* as the step's, for its run, with,
// shell and working-directory.
func (g *GitHub) StepEnv(step *cikit.Step) (map[string]string, error) {
	g.env = g.baseEnv()
	own, err := g.expandMap("env", step.Env)
	if err != nil {
		return nil, err
	}
	env := g.baseEnv()
	maps.Copy(env, own)
	g.env = env
	return maps.Clone(env), nil
}

// StepRuns evaluates a step's if: given how the job stands (st: whether
// an earlier step failed, whether the job is being cancelled). A step
// without if:, or whose condition calls none of success(), failure(),
// always() and cancelled(), runs only while nothing failed or was
// cancelled, as on GitHub. The condition may be bare or wrapped in
// ${{ }}; it reads env.* as it stands between steps, and job.status from
// st, which Expand then also reports.
func (g *GitHub) StepRuns(step *cikit.Step, st expr.Status) (bool, error) {
	g.status = st
	g.env = g.baseEnv()
	ok := !st.Failed && !st.Cancelled
	if step.If == nil || strings.TrimSpace(step.If.Expr) == "" {
		return ok, nil
	}
	if step.If.Lang != "" && step.If.Lang != cikit.LangGitHub {
		return false, fmt.Errorf("if: a %s condition in a GitHub job", step.If.Lang)
	}
	src := strings.TrimSpace(step.If.Expr)
	if inner, ok := strings.CutPrefix(src, "${{"); ok {
		if inner, ok = strings.CutSuffix(inner, "}}"); ok && !strings.Contains(inner, "${{") {
			src = strings.TrimSpace(inner)
		}
	}
	if strings.Contains(src, "${{") {
		// Text around an expression: GitHub reads the whole as a string.
		v, err := g.Eval(src)
		if err != nil {
			return false, fmt.Errorf("if: %w", err)
		}
		return ok && expr.Truthy(v), nil
	}
	n, err := expr.ParseGitHub(src)
	if err != nil {
		return false, fmt.Errorf("if: %w", err)
	}
	if !expr.UsesStatus(n) && !ok {
		return false, nil
	}
	v, err := expr.EvalGitHub(n, g.exprEnv())
	if err != nil {
		return false, fmt.Errorf("if: %w", err)
	}
	if v == expr.Unknown {
		return false, fmt.Errorf("if: %q cannot be evaluated here", clip(src))
	}
	return expr.Truthy(v), nil
}

// Step outcomes and conclusions, for SetStep: a step's outcome is how it
// ended, its conclusion the same except that a failure of a step with
// continue-on-error concludes as a success.
const (
	Success   = "success"
	Failure   = "failure"
	Cancelled = "cancelled"
	Skipped   = "skipped"
)

// SetStep records how a step ended, for steps.<id>.* in the later steps'
// expressions and the job's outputs. A step without an id is not
// addressable, and recording it does nothing.
func (g *GitHub) SetStep(id, outcome, conclusion string, outputs map[string]string) {
	if id == "" {
		return
	}
	g.steps[id] = map[string]any{"outcome": outcome, "conclusion": conclusion, "outputs": anyMap(outputs)}
}

// JobOutputs evaluates the job's outputs (Spec.Outputs) when its steps
// have ended. An output (its name and value) holds at most
// cikit.MaxOutputValueBytes and all of them together at most
// cikit.MaxOutputsBytes; past either the error names the output and the
// sizes.
func (g *GitHub) JobOutputs() (map[string]string, error) {
	g.env = g.baseEnv()
	out := make(map[string]string, len(g.p.Spec.Outputs))
	total := 0
	for _, name := range slices.Sorted(maps.Keys(g.p.Spec.Outputs)) {
		v, err := g.Expand(g.p.Spec.Outputs[name])
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		n := len(name) + len(v)
		if n > cikit.MaxOutputValueBytes {
			return nil, fmt.Errorf("output %q of job %q is %d bytes, more than the %s an output may hold", name, g.p.Spec.ID, n, cikit.FormatBytes(cikit.MaxOutputValueBytes))
		}
		total += n
		if total > cikit.MaxOutputsBytes {
			return nil, fmt.Errorf("the outputs of job %q are more than the %s the outputs of a job may hold (%d bytes up to output %q)", g.p.Spec.ID, cikit.FormatBytes(cikit.MaxOutputsBytes), total, name)
		}
		out[name] = v
	}
	return out, nil
}

// Composite returns the contexts of the steps of the composite action in
// actionDir that the current step uses, with inputs its inputs context
// (Action.InputsContext): the same github (with action_path set), matrix,
// needs, vars, secrets and runner; env as the using step's (StepEnv);
// steps of their own, for the action's steps and outputs. Variables its
// steps write to GITHUB_ENV (AddEnv on it) reach the job's later steps
// too, as on GitHub.
func (g *GitHub) Composite(actionDir string, inputs map[string]string) *GitHub {
	c := &GitHub{p: g.p, contexts: maps.Clone(g.contexts), jobEnv: maps.Clone(g.env), files: g.files, steps: map[string]any{}, status: g.status}
	gh := maps.Clone(g.contexts["github"].(map[string]any))
	gh["action_path"] = actionDir
	c.contexts["github"] = gh
	c.contexts["inputs"] = anyMap(inputs)
	c.env = c.baseEnv()
	return c
}
