# Rego unit tests of the default policy (default.rego), run by the Go
# test TestDefaultPolicyRegoTests with OPA's tester.
package cikit.policy_test

import data.cikit.policy

push_main := {
	"event": "push",
	"repository": "acme/api",
	"ref": {"type": "branch", "name": "main", "protected": true, "default": true},
	"actor": "ada",
	"pull_request": 0,
	"fork": false,
	"author_association": "",
	"first_time_contributor": false,
	"job": {
		"id": "build",
		"environment": "",
		"secrets": ["NPM_TOKEN"],
		"permissions": {"contents": "write"},
		"runs_on": ["self-hosted"],
		"default_secrets_scopes": ["org:acme", "repo:acme/api"],
		"default_cache_scope": "branch/main",
	},
}

fork_pr(association) := object.union(push_main, {
	"event": "pull_request",
	"ref": {"type": "branch", "name": "patch-1", "protected": false, "default": false, "base": "main"},
	"pull_request": 42,
	"fork": true,
	"author_association": association,
	"first_time_contributor": association in {"FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER"},
	"job": object.union(push_main.job, {"default_cache_scope": "pr/42"}),
})

deploy(env, protected) := object.union(push_main, {
	"ref": {"type": "branch", "name": "feature/x", "protected": protected, "default": false},
	"job": object.union(push_main.job, {"environment": env}),
})

fork_restrictions := {
	"secrets_scopes": [],
	"cache_scope": "fork/pr-42",
	"token_permissions": {"contents": "read", "metadata": "read"},
	"runner_labels_allowed": ["*", "!self-hosted"],
}

test_push_allowed_with_defaults if {
	policy.decision == {
		"decision": "allow",
		"secrets_scopes": ["org:acme", "repo:acme/api"],
		"cache_scope": "branch/main",
	} with input as push_main
}

test_same_repo_pull_request_allowed_with_defaults if {
	d := policy.decision with input as object.union(push_main, {"event": "pull_request", "pull_request": 3})
	d.decision == "allow"
	d.secrets_scopes == ["org:acme", "repo:acme/api"]
	not d.token_permissions
	not d.runner_labels_allowed
}

test_fork_by_contributor_allowed_restricted if {
	policy.decision == object.union(fork_restrictions, {"decision": "allow"}) with input as fork_pr("CONTRIBUTOR")
}

test_fork_by_known_associations_allowed if {
	every a in ["OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR"] {
		policy.decision.decision == "allow" with input as fork_pr(a)
	}
}

test_fork_by_first_time_contributor_held if {
	every a in ["FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "NONE"] {
		d := policy.decision with input as fork_pr(a)
		d.decision == "require_approval"
		d.reason == "fork pull request by a first-time contributor: a maintainer must approve before it runs"
		object.subset(d, fork_restrictions)
	}
}

test_first_time_flag_holds_even_a_contributor if {
	d := policy.decision with input as object.union(fork_pr("CONTRIBUTOR"), {"first_time_contributor": true})
	d.decision == "require_approval"
}

test_gitlab_fork_merge_request_held if {
	d := policy.decision with input as fork_pr("")
	d.decision == "require_approval"
	object.subset(d, fork_restrictions)
}

test_production_from_unprotected_branch_denied if {
	every env in ["production", "prod", "Production", "PROD", "production/eu", "prod/us-east"] {
		d := policy.decision with input as deploy(env, false)
		d.decision == "deny"
		d.reason == `only protected branches and tags may deploy to production; branch "feature/x" is not protected`
	}
}

test_production_from_protected_ref_allowed if {
	tag := object.union(deploy("production", true), {"ref": {"type": "tag", "name": "v1.2.0", "protected": true, "default": false}})
	policy.decision.decision == "allow" with input as tag
	policy.decision.decision == "allow" with input as deploy("prod", true)
}

test_other_environments_not_production if {
	every env in ["staging", "preproduction", "production-like", "prodx", "review/prod"] {
		policy.decision.decision == "allow" with input as deploy(env, false)
	}
}

test_fork_to_production_denied_with_fork_restrictions if {
	fork := fork_pr("MEMBER")
	d := policy.decision with input as object.union(fork, {"job": object.union(fork.job, {"environment": "production"})})
	d.decision == "deny"
	object.subset(d, fork_restrictions)
}

test_deny_wins_over_hold if {
	fork := fork_pr("FIRST_TIME_CONTRIBUTOR")
	d := policy.decision with input as object.union(fork, {"job": object.union(fork.job, {"environment": "prod"})})
	d.decision == "deny"
}

test_ref_without_type_named if {
	unnamed := object.union(deploy("production", false), {"ref": {"type": "", "name": "x", "protected": false}})
	policy.decision.reason == `only protected branches and tags may deploy to production; "x" is not protected` with input as unnamed
}
