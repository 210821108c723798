package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// githubExpander evaluates GitHub's ${{ }} expressions for a local run:
// in scripts, env values and working directories, and in steps' if:. The
// contexts are what a local run knows: the job's matrix and env, a local
// runner, and the github context of a push to the checked-out tree.
// Step outputs, needs' outputs, secrets and variables are empty, as in a
// run where none were set.
type githubExpander struct {
	github map[string]any
}

func newGitHubExpander(dir string) *githubExpander {
	return &githubExpander{github: map[string]any{
		"event_name": "push", "workspace": dir, "server_url": "", "repository": "", "ref": "", "sha": "",
		"actor": "local", "run_id": "0", "run_number": "1", "run_attempt": "1", "event": map[string]any{},
	}}
}

func (g *githubExpander) env(spec *cikit.JobSpec, status *expr.Status) *expr.GitHubEnv {
	ctx := map[string]any{
		"github":   g.github,
		"env":      stringsToAny(spec.Env),
		"matrix":   stringsToAny(spec.Matrix),
		"runner":   map[string]any{"os": runnerOS(), "arch": runnerArch(), "name": "cikit-local", "temp": "", "tool_cache": ""},
		"job":      map[string]any{"status": "success"},
		"steps":    map[string]any{},
		"needs":    map[string]any{},
		"secrets":  map[string]any{},
		"vars":     map[string]any{},
		"inputs":   map[string]any{},
		"strategy": map[string]any{"fail-fast": true, "job-index": 0, "job-total": 1},
	}
	return &expr.GitHubEnv{Contexts: ctx, Status: status}
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
