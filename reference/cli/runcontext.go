package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

// gitTimeout bounds each git command `cikit run` asks about the work tree.
const gitTimeout = 10 * time.Second

// gitInfo is what `cikit run` learns of the directory it runs from git:
// empty when the directory is not in a git work tree (or git is absent).
type gitInfo struct {
	// SHA is HEAD's commit; Ref the branch HEAD is on ("refs/heads/x"),
	// or a tag at HEAD when it is detached ("refs/tags/v1"), else "".
	SHA, Ref string
	// Repository is the full name of origin's repository ("acme/api"),
	// or the work tree's directory name without an origin.
	Repository string
	// DefaultBranch is origin's HEAD branch, when the clone knows it.
	DefaultBranch string
}

// readGit asks git about the work tree dir is in. Every answer is
// optional: a failing command leaves its fields empty.
func readGit(ctx context.Context, dir string) gitInfo {
	var g gitInfo
	g.SHA = git(ctx, dir, "rev-parse", "--verify", "-q", "HEAD")
	if g.SHA == "" {
		return g
	}
	g.Ref = git(ctx, dir, "symbolic-ref", "-q", "HEAD")
	if g.Ref == "" {
		if tags := git(ctx, dir, "tag", "--points-at", "HEAD"); tags != "" {
			g.Ref = "refs/tags/" + strings.Fields(tags)[0]
		}
	}
	g.Repository = repositoryName(git(ctx, dir, "config", "--get", "remote.origin.url"))
	if g.Repository == "" {
		if top := git(ctx, dir, "rev-parse", "--show-toplevel"); top != "" {
			g.Repository = filepath.Base(top)
		}
	}
	if head := git(ctx, dir, "symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"); head != "" {
		g.DefaultBranch = strings.TrimPrefix(head, "origin/")
	}
	return g
}

// git runs one git command in dir and returns its trimmed output, or ""
// when it fails.
func git(ctx context.Context, dir string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	var out bytes.Buffer
	cmd.Stdout = &out
	if cmd.Run() != nil {
		return ""
	}
	return strings.TrimSpace(out.String())
}

// repositoryName is the full name of the repository at a remote URL:
// "acme/api" for https://github.com/acme/api.git, git@github.com:acme/api
// and ssh://git@host:22/acme/api.git, the directory name for a local
// path. Credentials in the URL are never part of it.
func repositoryName(remote string) string {
	if remote == "" {
		return ""
	}
	p := remote
	switch {
	case strings.Contains(remote, "://"):
		u, err := url.Parse(remote)
		if err != nil {
			return ""
		}
		p = u.Path
		if u.Scheme == "file" {
			p = path.Base(p)
		}
	case !strings.HasPrefix(remote, "/") && strings.Contains(remote, ":") &&
		strings.Index(remote, ":") < strings.IndexByte(remote+"/", '/'):
		_, p, _ = strings.Cut(remote, ":") // scp-like: [user@]host:path
	default:
		p = filepath.Base(remote)
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	return strings.Trim(p, "/")
}

// localEvent is what a local run is told of its event by its flags and
// the work tree.
type localEvent struct {
	// name is the -event name; payload the -event-path object (nil
	// without one) and raw its bytes.
	name    string
	payload map[string]any
	raw     json.RawMessage
	git     gitInfo
	// inputs are the validated inputs, defaults included, as strings
	// (RunContext.Inputs) and typed (the inputs context).
	inputs      map[string]string
	typedInputs map[string]any
	// vars and secrets are the -var and -secret values (files included).
	vars, secrets map[string]string
}

// runContext is the RunContext of a local run: the event as named, the
// commit, ref and repository of the work tree, and what the payload says
// of a pull request.
func (e *localEvent) runContext() cikit.RunContext {
	rc := cikit.RunContext{
		Provider: "local", Repository: e.git.Repository, Event: e.name, Ref: e.git.Ref, SHA: e.git.SHA,
		DefaultBranch: e.git.DefaultBranch, Actor: localActor(e.payload), Inputs: e.inputs, Payload: e.raw,
	}
	if ref, ok := e.payload["ref"].(string); ok && ref != "" {
		rc.Ref = ref
	}
	if pr, ok := e.payload["pull_request"].(map[string]any); ok {
		if n, ok := pr["number"].(float64); ok {
			rc.PRNumber = int(n)
		}
		rc.BaseRef = nestedString(pr, "base", "ref")
		rc.HeadRef = nestedString(pr, "head", "ref")
	}
	switch {
	case strings.HasPrefix(rc.Ref, "refs/heads/"):
		rc.RefName, rc.RefType = strings.TrimPrefix(rc.Ref, "refs/heads/"), "branch"
	case strings.HasPrefix(rc.Ref, "refs/tags/"):
		rc.RefName, rc.RefType = strings.TrimPrefix(rc.Ref, "refs/tags/"), "tag"
	default:
		rc.RefName = rc.Ref
	}
	return rc
}

// compilerEvent is what the compiler decides triggers, rules and
// conditions with. vars are the variables the pipeline's conditions see:
// the -var values, and for GitLab the -secret values too (GitLab's
// secrets are variables).
func (e *localEvent) compilerEvent(format compiler.Format) *compiler.Event {
	rc := e.runContext()
	ev := &compiler.Event{Name: e.name, Ref: rc.Ref, SHA: rc.SHA, BaseBranch: rc.BaseRef,
		DefaultBranch: rc.DefaultBranch, Inputs: e.typedInputs, Payload: e.payload, Actor: rc.Actor}
	switch rc.RefType {
	case "branch":
		ev.Branch = rc.RefName
	case "tag":
		ev.Tag = rc.RefName
	}
	ev.Variables = maps.Clone(e.vars)
	if format == compiler.FormatGitLab && len(e.secrets) > 0 {
		if ev.Variables == nil {
			ev.Variables = map[string]string{}
		}
		maps.Copy(ev.Variables, e.secrets)
	}
	return ev
}

func nestedString(m map[string]any, keys ...string) string {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return ""
		}
		m = next
	}
	s, _ := m[keys[len(keys)-1]].(string)
	return s
}

// localActor is who causes a local run: the payload's sender, else the
// user running cikit.
func localActor(payload map[string]any) string {
	if login := nestedString(payload, "sender", "login"); login != "" {
		return login
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "local"
}

// isManualEvent reports whether an event name is a manual run, which
// takes inputs: GitHub's workflow_dispatch, GitLab's web and api
// pipelines, cikit's manual.
func isManualEvent(name string) bool {
	switch name {
	case "workflow_dispatch", "manual", "web", "api":
		return true
	}
	return false
}

// declaredInputs are the inputs of the plan's manual trigger.
func declaredInputs(plan *compiler.Plan) []compiler.Input {
	var out []compiler.Input
	for _, t := range plan.Triggers {
		if t.Event == "manual" || t.Event == "workflow_dispatch" {
			out = append(out, t.Inputs...)
		}
	}
	return out
}

// checkInputs validates given inputs against those the plan declares, as
// the platform does at a manual trigger: an unknown name, a value that is
// not of the input's type or not one of its choices, and a required input
// missing are errors naming the input. It returns the inputs with the
// defaults of those not given, as strings and typed (booleans and numbers
// as such), as GitHub's inputs context has them.
func checkInputs(plan *compiler.Plan, event string, given *pairs) (map[string]string, map[string]any, error) {
	declared := declaredInputs(plan)
	if len(given.keys) > 0 && !isManualEvent(event) {
		return nil, nil, fmt.Errorf("-input is for a manual run, and -event is %s: use -event workflow_dispatch, or leave -event out", event)
	}
	names := make([]string, len(declared))
	for i, in := range declared {
		names[i] = in.Name
	}
	for _, k := range given.keys {
		if slices.Contains(names, k) {
			continue
		}
		if len(declared) == 0 {
			hint := ""
			if plan.Format == compiler.FormatGitLab {
				hint = "; GitLab pipelines take variables: use -var " + k + "=…"
			}
			return nil, nil, fmt.Errorf("-input %s: %s declares no inputs%s", k, plan.File, hint)
		}
		return nil, nil, fmt.Errorf("-input %s: %s declares no input %s (its inputs: %s)", k, plan.File, k, strings.Join(names, ", "))
	}
	if !isManualEvent(event) {
		return nil, nil, nil
	}
	str, typed := map[string]string{}, map[string]any{}
	for _, in := range declared {
		v, ok := given.values[in.Name]
		if !ok {
			if in.Default == nil {
				if in.Required {
					return nil, nil, fmt.Errorf("-input %s is required by %s and has no default", in.Name, plan.File)
				}
				continue
			}
			v = *in.Default
		}
		t, err := typedValue(in, v)
		if err != nil {
			return nil, nil, fmt.Errorf("-input %s: %w", in.Name, err)
		}
		str[in.Name], typed[in.Name] = v, t
	}
	if len(str) == 0 {
		return nil, nil, nil
	}
	return str, typed, nil
}

// typedValue is an input's value in its declared type.
func typedValue(in compiler.Input, v string) (any, error) {
	switch in.Type {
	case "boolean":
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("a boolean input is true or false, got %q", v)
	case "number":
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, fmt.Errorf("a number input takes a number, got %q", v)
		}
		return f, nil
	case "choice":
		if !slices.Contains(in.Options, v) {
			return nil, fmt.Errorf("%q is not one of the choices %s", v, strings.Join(in.Options, ", "))
		}
	}
	return v, nil
}
