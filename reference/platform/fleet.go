package platform

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/vcs/status"
)

// buildFleet makes the runner protocol's server, the reaper of expired
// leases and the Manager of the local runners' pool.
func (p *Platform) buildFleet(ctx context.Context) error {
	keys := make([][]byte, len(p.cfg.Runners.SigningKeys))
	for i, k := range p.cfg.Runners.SigningKeys {
		keys[i] = []byte(k)
	}
	p.sources = newSourceRevoker(p.attemptRuns, p.now, func(m *mintedSource, err error) {
		p.log.Warn("platform: revoking the checkout credential of an ended attempt; it works until it expires", "run", m.job.RunID, "job", m.job.JobID,
			"attempt", m.job.Attempt, "source", m.src.String(), "expires", m.src.ExpiresAt, "err", err)
	})
	runners := fleet.RunnerStore(fleet.NewMemoryRunnerStore())
	if p.pool != nil {
		rs, err := fleet.NewPostgresRunnerStore(p.pool)
		if err != nil {
			return err
		}
		runners = rs
	}
	sc := fleet.ServerConfig{
		Runners: runners,
		Jobs:    p.jobs, Leases: p.leases, Logs: p.hub, FailTruncatedLogs: p.cfg.Limits.FailTruncatedLogs,
		RegistrationTokens: p.cfg.Runners.RegistrationTokens, SigningKeys: keys,
		HeartbeatInterval: p.cfg.Runners.LeaseTTL / 3,
		// Logs are followed through the API, which checks the reader's
		// role; the runner API's follow stream is nobody's (the default).
		Tenant:      tenantOf,
		Source:      p.sourceMinter(),
		RunURL:      func(runID string) string { return p.targetURL(runID, "") },
		Artifacts:   p.artifacts,
		CacheScopes: artifacts.Scopes,
		Secrets:     p.jobSecrets(),
		Now:         p.now,
		Logger:      p.log.With("component", "fleet"),
	}
	if limit := p.cfg.Runners.TenantLimit; limit > 0 {
		sc.TenantLimit = func(string) int { return limit }
	}
	var err error
	if p.fleet, err = fleet.NewServer(sc); err != nil {
		return err
	}
	p.reaper, err = lease.NewReaper(lease.ReaperConfig{Manager: p.leases, Grace: p.cfg.Runners.ReaperGrace, OnTransition: p.reaped, Logger: p.log.With("component", "reaper")})
	if err != nil {
		return err
	}
	mc := fleet.ManagerConfig{Server: p.fleet, ServerURL: p.url, RegistrationToken: p.cfg.Runners.RegistrationTokens[0], Now: p.now,
		OnUnmatched: p.unmatched, Logger: p.log.With("component", "pools")}
	if n := p.cfg.LocalRunners(); n > 0 {
		// Jobs get nothing of the server's environment, where its
		// secrets are, but process.AllowedEnv and what pass-env names.
		// The runners fetch their jobs' commits through one cache of git
		// objects, outside the jobs' sandboxes.
		co, err := checkout.New(checkout.Config{CacheDir: filepath.Join(p.cfg.DataDir, "git-cache")})
		if err != nil {
			return fmt.Errorf("platform: local runners: %w", err)
		}
		lc := local.Config{Labels: p.cfg.RunnerLabels(), MaxRunners: n, Logger: p.log.With("component", "runner"),
			Process: process.Config{PassEnv: p.cfg.Runners.PassEnv, Checkout: co}}
		switch p.cfg.Runners.Sandbox {
		case "auto", "require":
			// Never unsandboxed unless runners.sandbox says off.
			lc.Process.Sandbox = &process.Sandbox{Mode: process.SandboxRequire, Network: p.cfg.Runners.Network,
				Limits: p.cfg.Runners.Limits.ProcessLimits()}
			// Jobs naming an image run in it, in the sandbox; the
			// runners share one executor and its image directory.
			lc.Process.Images = p.cfg.RunnerImages()
		case "off":
			lc.Unsandboxed = true
		}
		b, err := local.New(lc)
		if errors.Is(err, process.ErrSandboxUnavailable) {
			return fmt.Errorf("platform: local runners: %w; refusing to run jobs unsandboxed: to run them as plain processes of the server's user, for trusted code only, set -runners.sandbox off (or runners.local 0 and run `cikit runner` elsewhere)", err)
		}
		if err != nil {
			return fmt.Errorf("platform: local runners: %w", err)
		}
		p.runners = b
		p.onClose(func() { b.Close() })
		mc.Pools = []fleet.PoolConfig{{Name: "local", Labels: p.cfg.RunnerLabels(), Backend: b, Policy: autoscale.Policy{Min: n, Max: n, Warm: n}}}
	}
	p.manager, err = fleet.NewManager(ctx, mc)
	return err
}

// unmatched says in the commit status of each job of offers that no
// runner has its labels, instead of leaving it "queued for a runner" with
// nothing to take it. The status is ordered just after the job's own
// "queued" one, so that whatever happens to the job next replaces it: a
// runner that registers with the labels later takes it.
//
// Only the embedded platform says so: with PostgreSQL, runners register
// with any of the servers, and a server does not know the others'.
func (p *Platform) unmatched(offers []fleet.Offer, labels []string) {
	if p.reporter == nil || !p.cfg.Embedded() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, o := range offers {
		run, err := p.jobs.RunGet(ctx, o.RunID)
		if err != nil {
			p.log.Warn("platform: the run of a job no runner matches", "run", o.RunID, "job", o.JobID, "err", err)
			continue
		}
		j, err := p.jobs.JobGet(ctx, o.RunID, o.JobID)
		if err != nil || j.Attempt != o.Attempt || j.State != cikit.JobQueued {
			continue // it moved on
		}
		// The job's queued event has the time of its queueing, and an
		// ID that sorts before "~".
		ev := &dag.OutboxEvent{ID: "~unmatched", Type: dag.EventJobQueued,
			RunID: o.RunID, JobID: o.JobID, Attempt: o.Attempt, Pipeline: run.Pipeline, SHA: run.SHA,
			State: string(cikit.JobQueued), CreatedAt: j.QueuedAt}
		c, ok := status.FromEvent(ev, p.targetURL)
		if !ok {
			continue
		}
		c.Status.Description = truncate(fmt.Sprintf("no runner matches labels [%s]; it waits for one", strings.Join(labels, " ")), 140)
		_ = p.reporter.ReportOrdered(c.Repo, c.SHA, c.Status, status.EventOrder(ev))
	}
}

// tenantOf names whom a run's jobs run for: the owner of its repository
// (the pipeline is "org/repo:file").
func tenantOf(run *dag.Run) string {
	owner, _, ok := strings.Cut(run.Pipeline, "/")
	if !ok {
		return ""
	}
	return owner
}

// reaped passes on what the reaper did: jobs its transitions made ready are
// offered to runners, and the logs of attempts it ended are closed.
func (p *Platform) reaped(res *dag.TransitionResult) {
	ctx := context.Background()
	p.fleet.Dispatch(ctx, res)
	if len(res.Changed) > 0 && res.Changed[0].State == cikit.JobReady && res.Changed[0].Attempt == 1 {
		return // a delayed job released, not an attempt reaped
	}
	p.metrics.leaseExpiries.Inc()
	for _, j := range res.Changed {
		attempt := j.Attempt
		switch {
		case j.State == cikit.JobReady && j.Attempt > 1:
			attempt = j.Attempt - 1 // retried: the reaped attempt is the one before
		case j.State.Terminal() && !j.StartedAt.IsZero():
		default:
			continue
		}
		// Its dynamic secrets are revoked: its runner is gone.
		p.fleet.EndSecrets(ctx, j.RunID, j.ID(), attempt)
		_, err := p.hub.Abandon(ctx, logs.Key{RunID: j.RunID, JobID: j.ID(), Attempt: attempt})
		if err != nil && !errors.Is(err, cikit.ErrNotFound) {
			p.log.Warn("close the log of a reaped attempt", "run", j.RunID, "job", j.ID(), "attempt", attempt, "err", err)
		}
	}
}
