package policy_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets/policy"
)

// writePolicy writes src as a policy file named name in a new directory.
func writePolicy(t testing.TB, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// policyDeciding is a policy answering decision for every job.
func policyDeciding(decision string) string {
	return "package cikit.policy\n\ndecision := {\"decision\": \"" + decision + "\", \"reason\": \"the test says so\"}\n"
}

func decide(t *testing.T, e *policy.Engine) cikit.Decision {
	t.Helper()
	d, err := e.Eval(t.Context(), input(nil))
	require.NoError(t, err)
	return d.Decision
}

func TestReload(t *testing.T) {
	t.Parallel()
	p := writePolicy(t, "file.rego", policyDeciding("deny"))
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: p})
	require.NoError(t, err)
	require.Equal(t, cikit.DecisionDeny, decide(t, e))
	first := e.Name()
	require.Regexp(t, `^file\.rego sha256:[0-9a-f]{12}$`, first)

	require.NoError(t, os.WriteFile(p, []byte(policyDeciding("require_approval")), 0o644))
	require.NoError(t, e.Reload())
	require.Equal(t, cikit.DecisionRequireApproval, decide(t, e))
	second := e.Name()
	require.NotEqual(t, first, second)

	broken := "package cikit.policy\n\ndecision := {\"decision\": \"allow\"} if {\n    input.fork ==\n}\n"
	require.NoError(t, os.WriteFile(p, []byte(broken), 0o644))
	err = e.Reload()
	var le *policy.LoadError
	require.ErrorAs(t, err, &le)
	require.Contains(t, err.Error(), "file.rego:5:1: rego_parse_error")
	require.Equal(t, cikit.DecisionRequireApproval, decide(t, e), "the old policy stays in force")
	require.Equal(t, second, e.Name())

	require.NoError(t, os.Remove(p))
	require.ErrorIs(t, e.Reload(), os.ErrNotExist)
	require.Equal(t, cikit.DecisionRequireApproval, decide(t, e))
}

func TestReloadDefault(t *testing.T) {
	t.Parallel()
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	require.NoError(t, err)
	require.NoError(t, e.Reload())
	require.Equal(t, "default", e.Name())
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"parse error", "package cikit.policy\n\ndecision := {\n", []string{"p.rego:4:0: rego_parse_error: unexpected eof token"}},
		{"every compile error", "package cikit.policy\n\ndecision := x if {\n\tx := nosuch(1)\n\ty := alsonot(2)\n}\n",
			[]string{"2 problems", "p.rego:4:7: rego_type_error: undefined function nosuch", "p.rego:5:7: rego_type_error: undefined function alsonot"}},
		{"http.send", "package cikit.policy\n\ndecision := x if {\n\tx := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"})\n}\n",
			[]string{"p.rego:4:", "unsafe built-in function calls in expression: http.send"}},
		{"net.lookup_ip_addr", "package cikit.policy\n\ndecision := {\"decision\": \"allow\"} if net.lookup_ip_addr(\"example.com\")\n",
			[]string{"p.rego:3:", "net.lookup_ip_addr"}},
		{"opa.runtime", "package cikit.policy\n\ndecision := {\"decision\": \"allow\", \"reason\": opa.runtime().version}\n",
			[]string{"p.rego:3:", "opa.runtime"}},
		{"time.now_ns", "package cikit.policy\n\ndecision := {\"decision\": \"allow\"} if time.now_ns() > 0\n",
			[]string{"p.rego:3:", "time.now_ns"}},
		{"other package", "package acme\n\ndecision := {\"decision\": \"allow\"}\n", []string{"p.rego:1:1:", "the package is acme; a policy is package cikit.policy"}},
		{"no decision", "package cikit.policy\n\nallow := true\n", []string{"p.rego:1:1:", "defines no rule decision"}},
		{"Rego v0", "package cikit.policy\n\ndecision = {\"decision\": \"allow\"} { true }\n", []string{"p.rego:3:1: rego_parse_error: `if` keyword is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := policy.New(policy.Config{Path: writePolicy(t, "p.rego", tc.src)})
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNewRefusesLargeFile(t *testing.T) {
	t.Parallel()
	src := policyDeciding("allow") + "# " + strings.Repeat("x", policy.MaxPolicyBytes) + "\n"
	_, err := policy.New(policy.Config{Path: writePolicy(t, "big.rego", src)})
	require.ErrorContains(t, err, "larger than 1048576 bytes")

	_, err = policy.New(policy.Config{Path: t.TempDir()})
	require.ErrorContains(t, err, "not a regular file")
	_, err = policy.New(policy.Config{EvalTimeout: -time.Second})
	require.ErrorContains(t, err, "EvalTimeout")
}

func TestEvalUndefined(t *testing.T) {
	t.Parallel()
	p := writePolicy(t, "p.rego", "package cikit.policy\n\ndecision := {\"decision\": \"allow\"} if not input.fork\n")
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: p})
	require.NoError(t, err)
	_, err = e.Eval(t.Context(), input(forkPR("MEMBER")))
	require.ErrorContains(t, err, `defines no decision for job "build" of pull_request branch "patch-1" of acme/api`)
	require.Equal(t, cikit.DecisionAllow, decide(t, e))
}

func TestEvalTimeout(t *testing.T) {
	t.Parallel()
	// Ten billion iterations: no evaluation finishes within a millisecond.
	p := writePolicy(t, "slow.rego", `package cikit.policy

decision := {"decision": "allow"} if {
	r := numbers.range(1, 100000)
	count([1 | some i in r; some j in r; i == j + 200000]) == 0
}
`)
	e, err := policy.New(policy.Config{Path: p, EvalTimeout: time.Millisecond})
	require.NoError(t, err)
	_, err = e.Eval(t.Context(), input(nil))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "stopped after 1ms (EvalTimeout)")

	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("the run was abandoned"))
	_, err = e.Eval(ctx, input(nil))
	require.ErrorContains(t, err, "canceled: the run was abandoned")
}

func TestEvalNonsense(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"not an object", `"allow"`, "decision is a string, not an object"},
		{"unknown decision", `{"decision": "maybe"}`, `decision is "maybe"`},
		{"no decision field", `{"reason": "x"}`, `no field "decision"`},
		{"decision not a string", `{"decision": true}`, "decision is a boolean, not a string"},
		{"unknown field", `{"decision": "allow", "secret_scopes": []}`, `unknown field "secret_scopes"`},
		{"deny without a reason", `{"decision": "deny"}`, "reason is empty"},
		{"reason too long", `{"decision": "deny", "reason": concat("", array.concat(["x"], [y | some _ in numbers.range(1, 512); y := "y"]))}`, "reason is 513 bytes"},
		{"reason with a newline", `{"decision": "deny", "reason": "a\nb"}`, "not printable"},
		{"scopes not an array", `{"decision": "allow", "secrets_scopes": "repo:acme/api"}`, "secrets_scopes is a string, not an array"},
		{"scope not a string", `{"decision": "allow", "secrets_scopes": [1]}`, "secrets_scopes[0] is a number"},
		{"bad scope", `{"decision": "allow", "secrets_scopes": ["repo:../x"]}`, "secrets_scopes[0]"},
		{"too many scopes", `{"decision": "allow", "secrets_scopes": [sprintf("repo:acme/r%d", [i]) | some i in numbers.range(0, 64)]}`, "secrets_scopes has 65 entries"},
		{"bad cache scope", `{"decision": "allow", "cache_scope": "../branch/main"}`, "cache_scope"},
		{"permissions not an object", `{"decision": "allow", "token_permissions": ["read"]}`, "token_permissions is an array"},
		{"bad permission level", `{"decision": "allow", "token_permissions": {"contents": "admin"}}`, `token_permissions["contents"] is "admin"`},
		{"permission level not a string", `{"decision": "allow", "token_permissions": {"contents": null}}`, `token_permissions["contents"] is null`},
		{"bad permission scope", `{"decision": "allow", "token_permissions": {"con tents": "read"}}`, "not a permission scope"},
		{"too many labels", `{"decision": "allow", "runner_labels_allowed": [sprintf("l%d", [i]) | some i in numbers.range(0, 64)]}`, "runner_labels_allowed has 65 entries"},
		{"malformed label pattern", `{"decision": "allow", "runner_labels_allowed": ["[a"]}`, "runner_labels_allowed[0]"},
		{"empty label pattern", `{"decision": "allow", "runner_labels_allowed": ["!"]}`, "runner_labels_allowed[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: writePolicy(t, "p.rego", "package cikit.policy\n\ndecision := "+tc.value+"\n")})
			require.NoError(t, err)
			_, err = e.Eval(t.Context(), input(nil))
			require.ErrorContains(t, err, "answered nonsense")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestEvalRefusesHostileInput(t *testing.T) {
	t.Parallel()
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	require.NoError(t, err)
	long := strings.Repeat("x", policy.MaxInputTextBytes+1)
	for _, tc := range []struct {
		name string
		with func(*policy.Input)
		want string
	}{
		{"long ref", func(in *policy.Input) { in.Ref.Name = long }, "ref.name is 4097 bytes"},
		{"negative pull request", func(in *policy.Input) { in.PullRequest = -1 }, "pull_request is -1"},
		{"too many changed files", func(in *policy.Input) { in.ChangedFiles = make([]string, policy.MaxChangedFiles+1) }, "changed_files has 3001 files"},
		{"long changed file", func(in *policy.Input) { in.ChangedFiles = []string{"a", long} }, "changed_files[1] is 4097 bytes"},
		{"too many secrets", func(in *policy.Input) { in.Job.Secrets = make([]string, policy.MaxJobListLen+1) }, "job.secrets has 257 entries"},
		{"long permission", func(in *policy.Input) { in.Job.Permissions = map[string]string{long: "read"} }, "job.permissions"},
	} {
		_, err := e.Eval(t.Context(), input(tc.with))
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err = e.Eval(t.Context(), nil)
	require.ErrorContains(t, err, "nil")
	// Scopes the platform got wrong make the default policy's answer
	// nonsense, not a grant.
	_, err = e.Eval(t.Context(), input(func(in *policy.Input) { in.Job.DefaultSecretsScopes = []string{"everything"} }))
	require.ErrorContains(t, err, "secrets_scopes[0]")
}

// syncBuffer is a log sink the watcher writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond, each poll after the watcher has had time to look
// again, until it holds or the test's deadline nears.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d.Add(-time.Second)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		<-tick.C
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	p := writePolicy(t, "watched.rego", policyDeciding("allow"))
	var logs syncBuffer
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: p, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.Watch(ctx, time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	require.NoError(t, os.WriteFile(p, []byte(policyDeciding("deny")), 0o644))
	waitFor(t, "the watcher to load the denying policy", func() bool { return decide(t, e) == cikit.DecisionDeny })
	require.Contains(t, logs.String(), "policy reloaded")

	// A broken file is refused and logged; the denying policy stays.
	require.NoError(t, os.WriteFile(p, []byte("package cikit.policy\n\ndecision :=\n"), 0o644))
	waitFor(t, "the watcher to refuse the broken file", func() bool { return strings.Contains(logs.String(), "level=ERROR") })
	require.Contains(t, logs.String(), "watched.rego:")
	require.Equal(t, cikit.DecisionDeny, decide(t, e))

	require.NoError(t, os.WriteFile(p, []byte(policyDeciding("require_approval")), 0o644))
	waitFor(t, "the watcher to load the holding policy", func() bool { return decide(t, e) == cikit.DecisionRequireApproval })

	// A rewrite the stamp cannot tell apart (same size, same
	// modification time, as within one tick of a coarse file-system
	// clock) is seen by its digest.
	mtime := time.Now().Add(time.Hour)
	for _, reason := range []string{"first write", "other write"} {
		src := "package cikit.policy\n\ndecision := {\"decision\": \"deny\", \"reason\": \"" + reason + "\"}\n"
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		require.NoError(t, os.Chtimes(p, mtime, mtime))
		waitFor(t, "the watcher to load the "+reason, func() bool {
			d, err := e.Eval(t.Context(), input(nil))
			require.NoError(t, err)
			return d.Reason == reason
		})
	}

	cancel()
	<-done
}

func TestWatchDefault(t *testing.T) {
	t.Parallel()
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e.Watch(ctx, time.Millisecond) // returns: ctx has ended
}

// TestEvalConcurrentReload evaluates while the policy is replaced: every
// decision is one of the two policies', never an error.
func TestEvalConcurrentReload(t *testing.T) {
	t.Parallel()
	p := writePolicy(t, "p.rego", policyDeciding("allow"))
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: p})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 200 {
				d, err := e.Eval(context.Background(), input(nil))
				if err == nil && d.Decision != cikit.DecisionAllow && d.Decision != cikit.DecisionDeny {
					err = errors.New("unexpected decision " + string(d.Decision))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 20 {
		require.NoError(t, os.WriteFile(p, []byte(policyDeciding([]string{"deny", "allow"}[i%2])), 0o644))
		require.NoError(t, e.Reload())
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
