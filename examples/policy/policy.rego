# A platform team's own policy, in place of cikit's default: start the
# platform with this file as its policy (secrets/policy Config.Path).
#
# What it adds to the default:
#   - every deployment to production waits for a person's approval, and
#     only protected branches and tags deploy there at all;
#   - a fork's pull request by an organisation member may run on the
#     team's "fork-ci" runners; anyone else's is held for approval and
#     kept off them;
#   - a fork's job asking for a self-hosted runner is denied outright.
package cikit.policy

decision := object.union(restrictions, verdict)

members := {"OWNER", "MEMBER"}

member if input.author_association in members

production if lower(input.job.environment) in {"production", "prod"}

production if regex.match(`^(production|prod)/`, lower(input.job.environment))

# A fork's job gets no secrets, a cache of its own and a read-only
# token; the fork-ci runners are for members' forks only.
restrictions := {
	"secrets_scopes": [],
	"cache_scope": concat("", ["fork/pr-", format_int(input.pull_request, 10)]),
	"token_permissions": {"contents": "read", "metadata": "read"},
	"runner_labels_allowed": fork_runners,
} if {
	input.fork
} else := {
	"secrets_scopes": input.job.default_secrets_scopes,
	"cache_scope": input.job.default_cache_scope,
}

fork_runners := ["*", "!self-hosted"] if member
else := ["*", "!self-hosted", "!fork-ci"]

verdict := {
	"decision": "deny",
	"reason": "a fork's job may not ask for a self-hosted runner",
} if {
	input.fork
	"self-hosted" in input.job.runs_on
} else := {
	"decision": "deny",
	"reason": sprintf("only protected branches and tags may deploy to production; %q is not protected", [input.ref.name]),
} if {
	production
	not input.ref.protected
} else := {
	"decision": "require_approval",
	"reason": "deployment to production: a release manager must approve",
} if {
	production
} else := {
	"decision": "require_approval",
	"reason": "fork pull request by someone outside the organisation: a maintainer must approve before it runs",
} if {
	input.fork
	not member
} else := {"decision": "allow"}
