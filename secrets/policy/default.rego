# The default policy of a cikit platform: what a job may have, decided
# for each job of each run as the run is created. Replace it with your
# own (a file of package cikit.policy defining decision); see the
# package documentation of secrets/policy.
package cikit.policy

# decision is the answer: the job's restrictions, then the verdict.
decision := object.union(restrictions, verdict)

# A job of a fork's pull request runs code nobody has reviewed: no
# secrets, a cache scope nothing trusted restores from, a read-only
# token (every other scope, id-token included, is "none"), and never
# on a self-hosted runner. Any other job has what it would have without
# a policy.
restrictions := {
	"secrets_scopes": [],
	"cache_scope": concat("", ["fork/pr-", format_int(input.pull_request, 10)]),
	"token_permissions": {"contents": "read", "metadata": "read"},
	"runner_labels_allowed": ["*", "!self-hosted"],
} if {
	input.fork
} else := {
	"secrets_scopes": input.job.default_secrets_scopes,
	"cache_scope": input.job.default_cache_scope,
}

verdict := {
	"decision": "deny",
	"reason": sprintf("only protected branches and tags may deploy to production; %s is not protected", [ref_name]),
} if {
	production
	not input.ref.protected
} else := {
	"decision": "require_approval",
	"reason": "fork pull request by a first-time contributor: a maintainer must approve before it runs",
} if {
	input.fork
	first_time_contributor
} else := {"decision": "allow"}

# production says the job deploys to a production environment:
# "production" or "prod", in any case, or one below them
# ("production/eu").
production if lower(input.job.environment) in {"production", "prod"}

production if {
	some prefix in ["production/", "prod/"]
	startswith(lower(input.job.environment), prefix)
}

# The authors GitHub knows to have contributed. GitLab says nothing of
# an author, so a fork merge request of anyone is held.
known_associations := {"OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR"}

first_time_contributor if input.first_time_contributor

first_time_contributor if not input.author_association in known_associations

ref_name := sprintf("%s %q", [input.ref.type, input.ref.name]) if {
	input.ref.type != ""
} else := sprintf("%q", [input.ref.name])
