package policy_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets/policy"
)

// echoPolicy answers with what the input says, so that hostile input
// reaches the checks of a policy's answer.
const echoPolicy = `package cikit.policy

decision := {
	"decision": input.event,
	"reason": input.actor,
	"secrets_scopes": input.job.secrets,
	"cache_scope": input.ref.name,
	"token_permissions": input.job.permissions,
	"runner_labels_allowed": input.job.runs_on,
}
`

// FuzzEval feeds hostile input documents (JSON, as a platform would
// decode them from a forge's event) to the default policy and to one that
// echoes its input. Invariant: no panic; an input is refused or decided,
// and every decision is valid (Decision.Validate); under the default
// policy a fork's job never gets a secret, a token above read, or a
// self-hosted runner, and a production deployment from an unprotected
// ref is denied.
func FuzzEval(f *testing.F) {
	for _, in := range []*policy.Input{
		input(nil), input(forkPR("FIRST_TIME_CONTRIBUTOR")), input(forkPR("CONTRIBUTOR")), input(forkPR("")),
		input(func(in *policy.Input) { in.Job.Environment, in.Ref.Protected = "prod/eu", false }),
		input(func(in *policy.Input) { in.Event, in.Actor, in.Ref.Name = "deny", "", "../x" }),
		input(func(in *policy.Input) { in.Event, in.Job.Secrets = "allow", []string{"repo:acme/api"} }),
	} {
		b, err := json.Marshal(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"job": {"permissions": {"contents": 1}, "runs_on": null}, "pull_request": 1e99}`))
	def, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	if err != nil {
		f.Fatal(err)
	}
	echo, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout, Path: writePolicy(f, "echo.rego", echoPolicy)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 1<<16 {
			return
		}
		var in policy.Input
		if err := json.NewDecoder(bytes.NewReader(doc)).Decode(&in); err != nil {
			return
		}
		for _, e := range []*policy.Engine{def, echo} {
			d, err := e.Eval(t.Context(), &in)
			if err != nil {
				continue
			}
			if err := d.Validate(); err != nil {
				t.Fatalf("%s decided an invalid decision %+v: %v", e.Name(), d, err)
			}
			_ = d.Admission(e.Name())
			if e != def {
				continue
			}
			if in.Fork && (len(d.SecretsScopes) != 0 || !readOnly(d.TokenPermissions) || !slices.Contains(d.RunnerLabelsAllowed, "!self-hosted")) {
				t.Fatalf("a fork's job was given %+v", d)
			}
			env := strings.ToLower(in.Job.Environment)
			if (env == "production" || env == "prod") && !in.Ref.Protected && d.Decision != cikit.DecisionDeny {
				t.Fatalf("a production deployment from an unprotected ref was decided %+v", d)
			}
		}
	})
}

// readOnly says a token cap is present and grants at most read.
func readOnly(cap map[string]string) bool {
	if cap == nil {
		return false
	}
	for _, level := range cap {
		if level == "write" {
			return false
		}
	}
	return true
}
