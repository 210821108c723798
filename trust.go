package cikit

import (
	"cmp"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// Gate holds a job, once its needs are satisfied, until a person with the
// right to approve it does (an approval gate). A gated job waits MANUAL;
// approving it makes it READY, or DELAYED for WaitTimer first; rejecting
// it fails it, and so does an approval that does not come within Expires.
// Gates come from the pipeline (a native job's approval:), from the
// platform's environment protection rules (GitHub's required reviewers
// and wait timer) and from its policy (a first-time contributor's pull
// request). A GitLab when: manual job is no gate: it waits for anyone who
// may start it (When manual).
type Gate struct {
	// Reasons say why the job is held, one sentence each:
	// "deployment to production", "first-time contributor's pull
	// request". At least one.
	Reasons []string `json:"reasons"`
	// Reviewers are who may approve: user names, or "role:approve" (the
	// default when empty: anyone with the approve role on the job's
	// repository). A person must also hold the approve role.
	Reviewers []string `json:"reviewers,omitempty"`
	// WaitTimer delays the job after its approval (GitHub's wait timer).
	WaitTimer time.Duration `json:"wait_timer,omitempty"`
	// Expires is how long the gate waits for a decision before the job
	// fails as unapproved; zero means the platform's default.
	Expires time.Duration `json:"expires,omitempty"`
}

// MaxGateReasons, MaxGateReviewers and MaxGateTextBytes bound a Gate.
const (
	MaxGateReasons   = 16
	MaxGateReviewers = 64
	MaxGateTextBytes = 512
)

// Merge returns a gate that holds the job for both g's and o's reasons;
// either may be nil. Reviewers are those of both (empty on one side
// means anyone who holds the approve role, which the other's list
// narrows); WaitTimer is the longer; Expires the shorter non-zero.
func (g *Gate) Merge(o *Gate) *Gate {
	switch {
	case g == nil && o == nil:
		return nil
	case g == nil:
		return o.clone()
	case o == nil:
		return g.clone()
	}
	m := g.clone()
	for _, r := range o.Reasons {
		if !slices.Contains(m.Reasons, r) {
			m.Reasons = append(m.Reasons, r)
		}
	}
	for _, r := range o.Reviewers {
		if !slices.Contains(m.Reviewers, r) {
			m.Reviewers = append(m.Reviewers, r)
		}
	}
	m.WaitTimer = max(m.WaitTimer, o.WaitTimer)
	if m.Expires == 0 || o.Expires != 0 && o.Expires < m.Expires {
		m.Expires = o.Expires
	}
	return m
}

func (g *Gate) clone() *Gate {
	if g == nil {
		return nil
	}
	c := *g
	c.Reasons, c.Reviewers = slices.Clone(g.Reasons), slices.Clone(g.Reviewers)
	return &c
}

// Decision is what a platform's policy decided for a job.
type Decision string

// The decisions of a policy.
const (
	DecisionAllow           Decision = "allow"
	DecisionRequireApproval Decision = "require_approval"
	DecisionDeny            Decision = "deny"
)

// Admission is what the platform's policy decided for a job when its run
// was created, stored with the job (and so shown with it) and enforced
// where the job's world is made: a DENY job fails at once without
// running, a REQUIRE_APPROVAL one is gated (Gate), and the other fields
// bound what a job that runs may have.
type Admission struct {
	Decision Decision `json:"decision"`
	// Reason says why, in a sentence a person reads ("fork pull request
	// by a first-time contributor").
	Reason string `json:"reason,omitempty"`
	// SecretsScopes are the secret scopes the job may read from, as
	// secrets.Scope strings ("repo:acme/api", "env:acme/api:production");
	// empty: none.
	SecretsScopes []string `json:"secrets_scopes"`
	// CacheScope is the cache scope the job writes (artifacts cache
	// scopes: "branch/main", "fork/pr-7"); empty: the default.
	CacheScope string `json:"cache_scope,omitempty"`
	// TokenPermissions cap the permissions of the job's token (GitHub's
	// permissions: scope → "read", "write" or "none"): a scope the job
	// asks more of is lowered to the cap; a scope the cap does not name
	// is "none". Nil: no cap.
	TokenPermissions map[string]string `json:"token_permissions,omitempty"`
	// RunnerLabelsAllowed are patterns (path.Match) of the runner labels
	// a runner taking the job may have, in order, the last match
	// deciding and a leading "!" excluding: {"*", "!self-hosted"} lets
	// any runner but one labelled self-hosted take it. Nil: any runner.
	// See LabelsAllowed.
	RunnerLabelsAllowed []string `json:"runner_labels_allowed,omitempty"`
	// Policy names the policy that decided (its file and digest).
	Policy string `json:"policy,omitempty"`
}

// FailurePolicy is the failure of a job that the platform's policy or a
// person kept from running: denied by the policy, rejected by a
// reviewer, or not approved in time. Never retried.
const FailurePolicy FailureClass = "policy"

// LabelsAllowed reports whether a runner with labels may take a job
// whose Admission allows patterns: each label must be allowed, by the
// last pattern of patterns that matches it, not excluded by a leading
// "!" (see Admission.RunnerLabelsAllowed). Nil patterns allow any
// labels; a malformed pattern matches nothing.
func LabelsAllowed(patterns, labels []string) bool {
	if patterns == nil {
		return true
	}
	for _, l := range labels {
		if !labelAllowed(patterns, l) {
			return false
		}
	}
	return true
}

func labelAllowed(patterns []string, label string) bool {
	ok := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if m, err := path.Match(strings.TrimPrefix(p, "!"), label); err == nil && m {
			ok = !neg
		}
	}
	return ok
}

// EffectivePermissions returns the permissions of the job's token: those
// the spec asks for, each capped by its Admission's TokenPermissions
// ("write" > "read" > "none"; a scope the cap does not name is "none").
// Without a cap they are the spec's. The result is a new map.
func EffectivePermissions(spec *JobSpec) map[string]string {
	if spec.Admission == nil || spec.Admission.TokenPermissions == nil {
		return maps.Clone(spec.Permissions)
	}
	out := make(map[string]string, len(spec.Permissions))
	for scope, level := range spec.Permissions {
		cap := cmp.Or(spec.Admission.TokenPermissions[scope], "none")
		if permissionRank(level) > permissionRank(cap) {
			level = cap
		}
		out[scope] = level
	}
	return out
}

func permissionRank(level string) int {
	switch level {
	case "write":
		return 2
	case "read":
		return 1
	}
	return 0
}
