package api

import (
	"errors"
	"net/http"

	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
)

// Rules of the routes, by what they need.
var (
	open        = Rule{Open: true}
	anyUser     = Rule{AnyUser: true}
	readRun     = Rule{Role: auth.RoleRead, Scope: OnRun}
	platformAdm = Rule{Role: auth.RoleAdmin, Scope: OnPlatform}
)

// approveRun is a decision on a gated job, which needs approve; decide
// audits what it decides, with the reviewer's comment.
func approveRun(action string) Rule {
	return Rule{Role: auth.RoleApprove, Scope: OnRun, Action: action, Target: "run/{run}/job/{job}", HandlerAudits: true}
}

// triggerRun is a run's transition a person with trigger asks for.
func triggerRun(action, target string) Rule {
	return Rule{Role: auth.RoleTrigger, Scope: OnRun, Action: action, Target: target}
}

// register registers every route with its rule. A route is one line
// here: its pattern, its rule, its handler; the authorization test walks
// Routes() and checks each rule against real principals.
func (a *API) register(manual http.Handler) error {
	type route struct {
		pattern string
		rule    Rule
		h       http.HandlerFunc
	}
	routes := []route{
		{"GET /healthz", open, a.healthz},
		{"GET /readyz", open, a.readyz},

		// Lists only the runs of repositories the caller may read.
		{"GET " + Prefix + "/runs", anyUser, a.listRuns},
		{"GET " + Prefix + "/runs/{run}", readRun, a.getRun},
		{"POST " + Prefix + "/runs/{run}/cancel", triggerRun("run.cancel", "run/{run}"), a.cancelRun},
		{"POST " + Prefix + "/runs/{run}/retry", triggerRun("run.retry", "run/{run}"), a.retryRun},
		{"GET " + Prefix + "/runs/{run}/artifacts", readRun, a.listArtifacts},
		{"GET " + Prefix + "/runs/{run}/artifacts/{artifact}/download", readRun, a.downloadArtifact},
		{"GET " + Prefix + "/runs/{run}/jobs/{job}", readRun, a.getJob},
		{"GET " + Prefix + "/runs/{run}/jobs/{job}/log", readRun, a.getLog},
		{"GET " + Prefix + "/runs/{run}/jobs/{job}/log/follow", readRun, a.followLog},
		{"GET " + Prefix + "/runs/{run}/jobs/{job}/why", readRun, a.getWhy},
		// A manual job with an environment needs approve: startJob checks.
		{"POST " + Prefix + "/runs/{run}/jobs/{job}/start", triggerRun("job.start", "run/{run}/job/{job}"), a.startJob},
		// A gate's reviewers, when it names them, are checked by decide,
		// which writes the audit entry with the reviewer's comment.
		{"POST " + Prefix + "/runs/{run}/jobs/{job}/approve", approveRun("job.approve"), a.decideRoute(approvals.Approve)},
		{"POST " + Prefix + "/runs/{run}/jobs/{job}/reject", approveRun("job.reject"), a.decideRoute(approvals.Reject)},

		{"GET " + Prefix + "/secrets", Rule{Role: auth.RoleAdmin, Scope: OnSecretScope}, a.listSecrets},
		{"PUT " + Prefix + "/secrets/{name}", Rule{Role: auth.RoleAdmin, Scope: OnSecretScope, Action: "secret.set", Target: "secret/{name}"}, a.setSecret},
		{"DELETE " + Prefix + "/secrets/{name}", Rule{Role: auth.RoleAdmin, Scope: OnSecretScope, Action: "secret.delete", Target: "secret/{name}"}, a.deleteSecret},

		{"GET " + Prefix + "/me", anyUser, a.me},
		{"POST " + Prefix + "/tokens", Rule{AnyUser: true, Action: "token.create", Target: "token"}, a.createToken},
		{"GET " + Prefix + "/tokens", anyUser, a.listTokens},
		{"DELETE " + Prefix + "/tokens/{id}", Rule{AnyUser: true, Action: "token.revoke", Target: "token/{id}"}, a.revokeToken},
		{"POST " + Prefix + "/service-accounts", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "service_account.create", Target: "user"}, a.createServiceAccount},
		{"GET " + Prefix + "/roles", anyUser, a.listRoles},
		{"POST " + Prefix + "/roles", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "role.grant", Target: "role"}, a.grantRole},
		{"DELETE " + Prefix + "/roles", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "role.revoke", Target: "role"}, a.revokeRole},
		{"GET " + Prefix + "/users", platformAdm, a.listUsers},
		{"POST " + Prefix + "/users/{login}/disable", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "user.disable", Target: "user/{login}"}, a.disableUser(true)},
		{"POST " + Prefix + "/users/{login}/enable", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "user.enable", Target: "user/{login}"}, a.disableUser(false)},
		{"GET " + Prefix + "/audit", platformAdm, a.listAudit},
		{"GET " + Prefix + "/runners", platformAdm, a.listRunners},
		{"POST " + Prefix + "/runners/{id}/revoke", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "runner.revoke", Target: "runner/{id}"}, a.revokeRunner},
		{"GET " + Prefix + "/policy", platformAdm, a.getPolicy},
		{"POST " + Prefix + "/policy/reload", Rule{Role: auth.RoleAdmin, Scope: OnPlatform, Action: "policy.reload", Target: "policy"}, a.reloadPolicy},
	}
	var errs []error
	for _, r := range routes {
		errs = append(errs, a.handle(r.pattern, r.rule, r.h))
	}
	if manual != nil {
		errs = append(errs, a.handle("POST "+Prefix+"/repos/{org}/{repo}/pipelines",
			Rule{Role: auth.RoleTrigger, Scope: OnRepo, Action: "run.trigger", Target: "repo/{org}/{repo}"}, manual))
	}
	return errors.Join(errs...)
}
