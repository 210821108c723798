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
	// inputs are the validated inputs, defaults included
	// (RunContext.Inputs and InputTypes).
	inputs compiler.InputValues
	// vars and secrets are the -var and -secret values (files included).
	vars, secrets map[string]string
}

// runContext is the RunContext of a local run: the event as named, the
// commit, ref and repository of the work tree, and what the payload says
// of a pull request.
func (e *localEvent) runContext() cikit.RunContext {
	rc := cikit.RunContext{
		Provider: "local", Repository: e.git.Repository, Event: e.name, Ref: e.git.Ref, SHA: e.git.SHA,
		DefaultBranch: e.git.DefaultBranch, Actor: localActor(e.payload), Inputs: e.inputs.Values, InputTypes: e.inputs.Types,
		Payload: e.raw,
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
		DefaultBranch: rc.DefaultBranch, Inputs: e.inputs.Typed(), Payload: e.payload, Actor: rc.Actor}
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

// checkInputs validates the -input values against the inputs the plan
// declares, as the platform's manual trigger does (Plan.CheckInputs),
// and returns them with the defaults of those not given. -input is for a
// manual run only, and a GitLab pipeline takes variables (-var), not
// inputs.
func checkInputs(plan *compiler.Plan, event string, given *pairs) (compiler.InputValues, error) {
	if len(given.keys) > 0 && !isManualEvent(event) {
		return compiler.InputValues{}, fmt.Errorf("-input is for a manual run, and -event is %s: use -event workflow_dispatch, or leave -event out", event)
	}
	if plan.Format == compiler.FormatGitLab && len(given.keys) > 0 {
		k := given.keys[0]
		return compiler.InputValues{}, fmt.Errorf("-input %s: %s declares no inputs; GitLab pipelines take variables: use -var %s=…", k, plan.File, k)
	}
	if !isManualEvent(event) {
		return compiler.InputValues{}, nil
	}
	in, err := plan.CheckInputs(given.values)
	if err != nil {
		return compiler.InputValues{}, fmt.Errorf("-%w", err)
	}
	return in, nil
}
