package platform

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/policy"
)

// DefaultApprovalExpiry is how long a gated job waits for a decision
// when policy.approval-expiry says nothing.
const DefaultApprovalExpiry = 72 * time.Hour

// admitter decides, for every job of every run the platform creates,
// what the policy allows it (cikit.Admission) and which gates hold it:
// the policy's require_approval, the environments' protection rules and
// the pipeline's own approval:. It is the ingester's Admit hook, so a
// run is stored with its decisions in the transaction that creates it.
type admitter struct {
	engine *policy.Engine
	cfg    config.Policy
	expiry time.Duration
	log    *slog.Logger
	// evals and evalTime count the policy's evaluations and their time,
	// for PolicyEvaluations; observe, when set, receives each
	// evaluation's duration and decision (the metrics).
	evals, evalTime atomic.Int64
	observe         func(d time.Duration, decision cikit.Decision)
	// defaultBranch, when set, names a repository's default branch for
	// an event that does not say (a manual trigger), which the default
	// branch's protection needs.
	defaultBranch func(ctx context.Context, repo string) (string, error)
}

func newAdmitter(engine *policy.Engine, cfg config.Policy, log *slog.Logger) *admitter {
	a := &admitter{engine: engine, cfg: cfg, expiry: cfg.ApprovalExpiry, log: log}
	if a.expiry == 0 {
		a.expiry = DefaultApprovalExpiry
	}
	return a
}

// admit decides every job of run. A policy that fails for a job (an
// error, a nonsensical answer) denies that job, saying why: the platform
// fails closed, and the run shows it. Only the context's end is an error.
func (a *admitter) admit(ctx context.Context, ev *ingest.Event, run *dag.RunCreateParams, facts ingest.AdmitFacts) error {
	if ev.DefaultBranch == "" && a.defaultBranch != nil && ev.Kind != ingest.KindPullRequest {
		b, err := a.defaultBranch(ctx, ev.Org+"/"+ev.Repo)
		if err != nil {
			return fmt.Errorf("platform: the default branch of %s/%s, which the policy's protected refs need: %w", ev.Org, ev.Repo, err)
		}
		e := *ev
		e.DefaultBranch = b
		ev = &e
	}
	base := a.input(ev, run, facts)
	cacheScope, _ := artifacts.Scopes(run.Context)
	for _, spec := range run.Jobs {
		in := base
		in.Job = policy.JobOf(spec)
		in.Job.DefaultSecretsScopes = defaultScopes(run.Context, spec)
		in.Job.DefaultCacheScope = cacheScope
		adm, err := a.decide(ctx, &in)
		if err != nil {
			return err
		}
		a.protect(ev, spec, adm, &in)
		if adm.Decision == cikit.DecisionRequireApproval {
			spec.Gate = spec.Gate.Merge(&cikit.Gate{Reasons: []string{adm.Reason}})
		}
		if spec.Gate != nil && spec.Gate.Expires == 0 {
			spec.Gate.Expires = a.expiry
		}
		spec.Admission = adm
	}
	return nil
}

// decide asks the policy about one job.
func (a *admitter) decide(ctx context.Context, in *policy.Input) (*cikit.Admission, error) {
	t0 := time.Now()
	d, err := a.engine.Eval(ctx, in)
	took := time.Since(t0)
	a.evals.Add(1)
	a.evalTime.Add(int64(took))
	decision := cikit.DecisionDeny
	if err == nil {
		decision = d.Decision
	}
	if a.observe != nil {
		a.observe(took, decision)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		a.log.ErrorContext(ctx, "platform: the policy failed; the job is denied", "repository", in.Repository, "job", in.Job.ID, "err", err)
		return &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "the policy failed: " + err.Error(),
			SecretsScopes: []string{}, Policy: a.engine.Name()}, nil
	}
	return d.Admission(a.engine.Name()), nil
}

// protect applies the protection rules of the job's environment: a ref
// the rule does not let deploy denies the job; reviewers gate it; a wait
// timer without reviewers delays it.
func (a *admitter) protect(ev *ingest.Event, spec *cikit.JobSpec, adm *cikit.Admission, in *policy.Input) {
	env := in.Job.Environment
	if env == "" || strings.Contains(env, "$") {
		return
	}
	for _, rule := range a.cfg.Environments {
		if rule.Name != env || !matchAny(rule.Repos, in.Repository, true) {
			continue
		}
		if len(rule.Refs) > 0 && (ev.Kind == ingest.KindPullRequest || !matchAny(rule.Refs, in.Ref.Name, false)) {
			what := in.Ref.Type + " " + in.Ref.Name
			if ev.Kind == ingest.KindPullRequest {
				what = "a pull request"
			}
			adm.Decision = cikit.DecisionDeny
			adm.Reason = fmt.Sprintf("%s may not deploy to %s: its protection rule lets only %s deploy", what, env, strings.Join(rule.Refs, ", "))
			return
		}
		switch {
		case len(rule.Reviewers) > 0:
			spec.Gate = spec.Gate.Merge(&cikit.Gate{Reasons: []string{"deployment to " + env}, Reviewers: rule.Reviewers, WaitTimer: rule.WaitTimer})
		case rule.WaitTimer > 0 && spec.Gate != nil:
			spec.Gate.WaitTimer = max(spec.Gate.WaitTimer, rule.WaitTimer)
		case rule.WaitTimer > 0 && (spec.When == "" || spec.When == cikit.WhenOnSuccess):
			spec.When, spec.StartIn = cikit.WhenDelayed, rule.WaitTimer
		case rule.WaitTimer > 0 && spec.When == cikit.WhenDelayed:
			spec.StartIn = max(spec.StartIn, rule.WaitTimer)
		}
	}
}

// input is the part of the policy's input every job of a run shares.
func (a *admitter) input(ev *ingest.Event, run *dag.RunCreateParams, facts ingest.AdmitFacts) policy.Input {
	in := policy.Input{
		Event: string(ev.Kind), Repository: ev.Org + "/" + ev.Repo, Actor: ev.Actor, Fork: ev.Fork,
		AuthorAssociation: ev.AuthorAssociation, PullRequest: ev.PRNumber,
		Ref:                 policy.Ref{Type: string(ev.RefType), Name: ev.RefName, Base: ev.BaseRef},
		PipelineFileChanged: facts.PipelineFileChanged, Pipeline: facts.Pipeline,
	}
	if ev.Org == "" {
		in.Repository = ev.Repo
	}
	switch ev.AuthorAssociation {
	case "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER":
		in.FirstTimeContributor = true
	}
	in.ChangedFiles = facts.ChangedFiles
	if in.ChangedFiles == nil {
		in.ChangedFiles = []string{}
	}
	if len(in.ChangedFiles) > policy.MaxChangedFiles {
		in.ChangedFiles, in.ChangedFilesTruncated = in.ChangedFiles[:policy.MaxChangedFiles], true
	}
	if ev.Kind != ingest.KindPullRequest {
		in.Ref.Default = ev.RefType == ingest.RefBranch && ev.RefName != "" && ev.RefName == ev.DefaultBranch
		in.Ref.Protected = a.protected(ev)
	}
	return in
}

// protected reports whether the ref ev builds is protected: the default
// branch, or a branch or tag the configuration's patterns name. A pull
// request's head never is: its code is not what the branch holds.
func (a *admitter) protected(ev *ingest.Event) bool {
	switch ev.RefType {
	case ingest.RefBranch:
		return ev.RefName != "" && ev.RefName == ev.DefaultBranch || matchAny(a.cfg.ProtectedBranches, ev.RefName, false)
	case ingest.RefTag:
		return matchAny(a.cfg.ProtectedTags, ev.RefName, false)
	}
	return false
}

// matchAny reports whether name matches one of patterns (path.Match);
// none matches empty unless emptyMatches.
func matchAny(patterns []string, name string, emptyMatches bool) bool {
	if len(patterns) == 0 {
		return emptyMatches
	}
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, err := path.Match(p, name)
		return err == nil && ok
	})
}

// defaultScopes are the secret scopes a job of rc reads without a policy:
// secrets.ScopesFor of its identity.
func defaultScopes(rc *cikit.RunContext, spec *cikit.JobSpec) []string {
	id := secrets.IdentityFor(&cikit.JobContext{RunContext: *rcOrEmpty(rc)}, spec, "")
	c := &secrets.Claims{Repository: id.Repository, Environment: id.Environment, Fork: id.Fork}
	scopes := secrets.ScopesFor(c)
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = s.String()
	}
	return out
}

func rcOrEmpty(rc *cikit.RunContext) *cikit.RunContext {
	if rc == nil {
		return &cikit.RunContext{}
	}
	return rc
}

// PolicyEvaluations returns how many times the platform asked its policy
// about a job since it started, and the time those evaluations took: the
// policy's share of creating runs (cikit bench reports it).
func (p *Platform) PolicyEvaluations() (n int64, total time.Duration) {
	return p.admit.evals.Load(), time.Duration(p.admit.evalTime.Load())
}
