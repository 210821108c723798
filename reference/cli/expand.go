package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// githubExpander evaluates GitHub's ${{ }} expressions for a local run:
// in scripts, env values and working directories, and in steps' if:. The
// contexts are what a local run knows: the run's context (the event, its
// payload and inputs, the work tree's commit, ref and repository), the
// job's matrix and env, the results and outputs of the jobs it needs that
// ran before it, the -var and -secret values, and a local runner. Step
// outputs are empty.
type githubExpander struct {
	workspace             string
	vars, secrets, inputs map[string]any
	// keys are the job keys of the run's jobs by ID: a matrix variant's
	// is its job's.
	keys map[string]string

	mu   sync.Mutex
	jobs map[string]*cikit.JobContext
}

// newGitHubExpander returns the expander of a local run of jobs from dir,
// with the -var and -secret values and the typed inputs.
func newGitHubExpander(dir string, jobs []*cikit.JobSpec, vars, secrets map[string]string, inputs map[string]any) *githubExpander {
	g := &githubExpander{workspace: dir, vars: stringsToAny(vars), secrets: stringsToAny(secrets), inputs: maps.Clone(inputs),
		keys: map[string]string{}, jobs: map[string]*cikit.JobContext{}}
	if g.inputs == nil {
		g.inputs = map[string]any{}
	}
	for _, j := range jobs {
		g.keys[j.ID] = cmp.Or(j.MatrixOf, j.ID)
	}
	return g
}

// set records the context of the job of ID id, before it runs.
func (g *githubExpander) set(id string, jc *cikit.JobContext) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.jobs[id] = jc
}

func (g *githubExpander) env(spec *cikit.JobSpec, status *expr.Status) *expr.GitHubEnv {
	g.mu.Lock()
	jc := g.jobs[spec.ID]
	g.mu.Unlock()
	if jc == nil {
		jc = &cikit.JobContext{Attempt: 1}
	}
	ctx := map[string]any{
		"github":   g.github(spec, jc),
		"env":      stringsToAny(spec.Env),
		"matrix":   matrixContext(spec),
		"runner":   map[string]any{"os": runnerOS(), "arch": runnerArch(), "name": "cikit-local", "temp": "", "tool_cache": ""},
		"job":      map[string]any{"status": "success"},
		"steps":    map[string]any{},
		"needs":    needsContext(jc, g.keys),
		"secrets":  g.secrets,
		"vars":     g.vars,
		"inputs":   g.inputs,
		"strategy": map[string]any{"fail-fast": true, "job-index": 0, "job-total": 1},
	}
	return &expr.GitHubEnv{Contexts: ctx, Status: status}
}

// github is the github context of a job of a local run.
func (g *githubExpander) github(spec *cikit.JobSpec, jc *cikit.JobContext) map[string]any {
	event := map[string]any{}
	if len(jc.Payload) > 0 {
		_ = json.Unmarshal(jc.Payload, &event) // validated when read
	}
	owner, _, _ := strings.Cut(jc.Repository, "/")
	return map[string]any{
		"event_name": jc.Event, "workspace": g.workspace, "server_url": "", "repository": jc.Repository,
		"repository_owner": owner, "ref": jc.Ref, "ref_name": jc.RefName, "ref_type": jc.RefType, "sha": jc.SHA,
		"head_ref": jc.HeadRef, "base_ref": jc.BaseRef, "actor": jc.Actor, "triggering_actor": jc.Actor,
		"run_id": jc.RunID, "run_number": "1", "run_attempt": strconv.Itoa(jc.Attempt),
		"job": cmp.Or(spec.MatrixOf, spec.ID), "event": event,
	}
}

// matrixContext is the job's matrix, objects and arrays as such.
func matrixContext(spec *cikit.JobSpec) map[string]any {
	m := stringsToAny(spec.Matrix)
	for k, raw := range spec.MatrixJSON {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			m[k] = v
		}
	}
	return m
}

// needsContext is GitHub's needs context: by job (a matrix job once, its
// outputs those of its variants, its result failure when one failed),
// its result in GitHub's words and its outputs.
func needsContext(jc *cikit.JobContext, keys map[string]string) map[string]any {
	type need struct {
		results []cikit.JobState
		outputs map[string]any
	}
	byJob := map[string]*need{}
	for id, r := range jc.Needs {
		key := cmp.Or(keys[id], id)
		n := byJob[key]
		if n == nil {
			n = &need{outputs: map[string]any{}}
			byJob[key] = n
		}
		n.results = append(n.results, r.Result)
		for k, v := range r.Outputs {
			n.outputs[k] = v
		}
	}
	out := make(map[string]any, len(byJob))
	for key, n := range byJob {
		out[key] = map[string]any{"result": githubResult(n.results), "outputs": n.outputs}
	}
	return out
}

// githubResult is the result GitHub gives a job whose variants ended so.
func githubResult(states []cikit.JobState) string {
	switch {
	case slices.Contains(states, cikit.JobFailed):
		return "failure"
	case slices.Contains(states, cikit.JobCancelled):
		return "cancelled"
	case !slices.ContainsFunc(states, func(s cikit.JobState) bool { return s != cikit.JobSkipped }):
		return "skipped"
	}
	return "success"
}

func (g *githubExpander) Expand(spec *cikit.JobSpec, s string) (string, error) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	v, err := expr.EvalTemplate(s, g.env(spec, &expr.Status{}))
	if err != nil {
		return "", err
	}
	return expr.ToString(v), nil
}

func (g *githubExpander) StepRuns(spec *cikit.JobSpec, step *cikit.Step, failed bool) (bool, error) {
	if step.If == nil {
		return !failed, nil
	}
	src := strings.TrimSpace(step.If.Expr)
	if t, ok := strings.CutPrefix(src, "${{"); ok {
		src = strings.TrimSuffix(strings.TrimSpace(t), "}}")
	}
	n, err := expr.ParseGitHub(src)
	if err != nil {
		return false, fmt.Errorf("if: %w", err)
	}
	if !expr.UsesStatus(n) && failed {
		return false, nil // GitHub's implicit success() &&
	}
	v, err := expr.EvalGitHub(n, g.env(spec, &expr.Status{Failed: failed}))
	if err != nil {
		return false, fmt.Errorf("if: %w", err)
	}
	return expr.Truthy(v), nil
}

func stringsToAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// runnerOS and runnerArch name this machine as GitHub's runner context
// does.
func runnerOS() string {
	switch runtime.GOOS {
	case "darwin":
		return "macOS"
	case "windows":
		return "Windows"
	}
	return "Linux"
}

func runnerArch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "ARM64"
	case "arm":
		return "ARM"
	case "386":
		return "X86"
	}
	return "X64"
}
