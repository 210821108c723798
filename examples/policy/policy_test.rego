# Rego tests of policy.rego (opa test policy.rego policy_test.rego, or
# go test in this directory).
package cikit.policy_test

import data.cikit.policy

push := {
	"event": "push",
	"repository": "acme/api",
	"ref": {"type": "branch", "name": "main", "protected": true, "default": true},
	"pull_request": 0,
	"fork": false,
	"author_association": "",
	"job": {
		"id": "build",
		"environment": "",
		"runs_on": ["self-hosted"],
		"default_secrets_scopes": ["repo:acme/api"],
		"default_cache_scope": "branch/main",
	},
}

fork(association, runs_on) := object.union(push, {
	"event": "pull_request",
	"ref": {"type": "branch", "name": "patch-1", "protected": false, "default": false},
	"pull_request": 9,
	"fork": true,
	"author_association": association,
	"job": object.union(push.job, {"runs_on": runs_on}),
})

deploy(env, protected) := object.union(push, {
	"ref": {"type": "branch", "name": "main", "protected": protected, "default": true},
	"job": object.union(push.job, {"environment": env}),
})

test_push_allowed if {
	policy.decision == {"decision": "allow", "secrets_scopes": ["repo:acme/api"], "cache_scope": "branch/main"} with input as push
}

test_production_held_even_from_main if {
	every env in ["production", "Prod", "production/eu"] {
		d := policy.decision with input as deploy(env, true)
		d.decision == "require_approval"
		d.secrets_scopes == ["repo:acme/api"]
	}
}

test_production_from_unprotected_ref_denied if {
	policy.decision.decision == "deny" with input as deploy("production", false)
}

test_staging_allowed if {
	policy.decision.decision == "allow" with input as deploy("staging", false)
}

test_member_fork_may_use_fork_ci if {
	d := policy.decision with input as fork("MEMBER", ["fork-ci"])
	d.decision == "allow"
	d.runner_labels_allowed == ["*", "!self-hosted"]
	d.secrets_scopes == []
	d.cache_scope == "fork/pr-9"
	d.token_permissions == {"contents": "read", "metadata": "read"}
}

test_other_fork_held_and_kept_off_fork_ci if {
	every a in ["CONTRIBUTOR", "COLLABORATOR", "FIRST_TIME_CONTRIBUTOR", ""] {
		d := policy.decision with input as fork(a, ["ubuntu-latest"])
		d.decision == "require_approval"
		"!fork-ci" in d.runner_labels_allowed
	}
}

test_fork_asking_for_self_hosted_denied if {
	every a in ["OWNER", "MEMBER", "CONTRIBUTOR"] {
		d := policy.decision with input as fork(a, ["self-hosted", "linux"])
		d.decision == "deny"
		d.reason == "a fork's job may not ask for a self-hosted runner"
		d.secrets_scopes == []
	}
}
