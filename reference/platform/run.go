package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

// Run serves until ctx ends, then shuts down gracefully within the
// config's shutdown timeout: it stops taking work (/readyz fails), hands
// the local runners' jobs back, drains HTTP requests (ending long polls
// and log follows), stops the consumers with their offsets committed and
// flushes pending commit statuses. It returns the first error of a part
// that failed, which also shuts the rest down. Run closes the Platform.
func (p *Platform) Run(ctx context.Context) error {
	defer p.Close()
	p.setReady(errStarting)
	consumers, err := p.consumers()
	if err != nil {
		return err
	}
	reqCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv := p.newHTTPServer(reqCtx)
	httpDone := make(chan error, 2) // the main listener's and the webhooks'
	go func() { httpDone <- srv.Serve(p.ln) }()
	var hookSrv *http.Server
	if p.webhookLn != nil {
		hookSrv = p.newHTTPServer(reqCtx)
		hookSrv.Handler = p.webhookHandler
		go func() { httpDone <- hookSrv.Serve(p.webhookLn) }()
	}

	// The work runs until shutdown reaches it, or until a part fails.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	g, gctx := errgroup.WithContext(work)
	run := func(name string, f func(context.Context) error) {
		g.Go(func() error {
			if err := f(gctx); err != nil && gctx.Err() == nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	for name, c := range consumers {
		run(name, c.Run)
	}
	run("relay", p.relay.Run)
	run("reaper", p.reaper.Run)
	run("pruner", p.pruner.Run)
	run("artifacts pruner", p.pruneArtifacts)
	run("logs", p.hub.Run)
	run("revoker", p.sources.Run)
	for name, f := range p.secretsTasks() {
		run(name, f)
	}
	for name, f := range p.policyTasks() {
		run(name, f)
	}
	// The reporter outlives the consumers: Flush at shutdown needs it
	// running, and the events consumer feeds it until it stops.
	reporterCtx, stopReporter := context.WithCancel(context.WithoutCancel(ctx))
	reporterDone := make(chan struct{})
	go func() {
		defer close(reporterDone)
		if p.reporter != nil {
			_ = p.reporter.Run(reporterCtx)
		}
	}()
	defer func() { stopReporter(); <-reporterDone }()
	if m := p.services.redis; m != nil {
		run("redis clock", func(ctx context.Context) error { return tickMiniredis(ctx, m) })
	}
	managerCtx, stopManager := context.WithCancel(gctx)
	defer stopManager()
	managerDone := make(chan error, 1)
	go func() { managerDone <- p.manager.Run(managerCtx) }()

	if err := p.redispatch(ctx); err != nil {
		p.log.Warn("offer the waiting jobs of unfinished runs", "err", err)
	}
	run("redispatch", p.redispatchEvery)
	p.setReady(nil)
	p.log.Info("serving", "url", p.url, "embedded", p.cfg.Embedded(), "instance", p.instance())

	var failed error
	select {
	case <-ctx.Done():
	case <-gctx.Done():
		failed = g.Wait()
	case err := <-httpDone:
		failed = fmt.Errorf("http: %w", err)
	}
	p.log.Info("shutting down", "err", failed)
	p.setReady(errors.New("shutting down"))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
	defer cancel()

	// Local runners hand their jobs back while the server still answers.
	stopManager()
	if err := <-managerDone; err != nil {
		p.log.Warn("runner pools", "err", err)
	}
	if p.runners != nil {
		if err := p.runners.Close(); err != nil {
			p.log.Warn("stop local runners", "err", err)
		}
	}
	// Drain HTTP: new connections are refused, requests in flight finish;
	// long polls and log follows end at once.
	drained := make(chan struct{})
	endedPolls := make(chan struct{})
	go func() {
		defer close(endedPolls)
		select {
		case <-time.After(time.Second):
		case <-drained:
		case <-sctx.Done():
		}
		p.fleet.Dispatcher().Close()
		p.api.CloseFollowers()
		endRequests()
	}()
	if hookSrv != nil {
		if err := hookSrv.Shutdown(sctx); err != nil {
			p.log.Warn("drain the webhook listener", "err", err)
			hookSrv.Close()
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		p.log.Warn("drain http", "err", err)
		srv.Close()
	}
	close(drained)
	<-endedPolls
	// Consumers commit what they finished and leave their groups.
	stopWork(errors.New("shutting down"))
	if err := g.Wait(); err != nil && failed == nil {
		failed = err
	}
	if p.reporter != nil {
		if err := p.reporter.Flush(sctx); err != nil {
			p.log.Warn("flush commit statuses", "err", err)
		}
	}
	stopReporter()
	<-reporterDone
	p.log.Info("stopped")
	return failed
}

// instance names this process.
func (p *Platform) instance() string {
	if p.cfg.Instance != "" {
		return p.cfg.Instance
	}
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}

// consumers makes the Kafka consumers: events into runs (one group for all
// servers), ready jobs to this server's runners (a group per server and
// lane: every server offers every job, and a claim decides who runs it;
// servers must have distinct instance names) and commit statuses (one
// group).
func (p *Platform) consumers() (map[string]*ingest.Consumer, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(p.brokers()...)}
	out := map[string]*ingest.Consumer{}
	add := func(name string, cc ingest.ConsumerConfig) error {
		cc.Brokers = nil
		cc.ClientOptions = append(cc.ClientOptions, opts...)
		cc.Logger = p.log.With("component", "consumer", "consumer", name)
		c, err := ingest.NewConsumer(cc)
		if err != nil {
			return fmt.Errorf("platform: consumer %s: %w", name, err)
		}
		out[name] = c
		return nil
	}
	group := p.cfg.Kafka.Group
	if err := add("ingest", ingest.ConsumerConfig{Group: group + "-ingest", Handler: p.handleVCSEvent}); err != nil {
		return nil, err
	}
	// A server's dispatch group is new when the server is: it starts
	// with the records of the minute before the server did (offers are
	// idempotent), so that a job that became ready while the group was
	// joining is not skipped; the jobs of older runs are offered by
	// redispatch.
	fromStart := kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(p.now().Add(-time.Minute).UnixMilli()))
	for _, topic := range []string{ingest.TopicDispatchP0, ingest.TopicDispatchP1, ingest.TopicDispatchP2} {
		err := add(topic, ingest.ConsumerConfig{
			Group: group + "-" + topic + "-" + p.instance(), Topic: topic, DLQTopic: topicDispatchDLQ,
			ClientOptions: []kgo.Opt{fromStart}, Handler: p.handleDispatch,
		})
		if err != nil {
			return nil, err
		}
	}
	err := add("events", ingest.ConsumerConfig{
		Group: group + "-events", Topic: ingest.TopicPipelineEvents, DLQTopic: topicPipelineEventsDLQ,
		Handler: p.handleEvent,
	})
	return out, err
}

// handleDispatch offers a ready job to this server's runners.
func (p *Platform) handleDispatch(ctx context.Context, rec *kgo.Record) error {
	var env ingest.DispatchEnvelope
	if err := json.Unmarshal(rec.Value, &env); err != nil {
		return ingest.Permanent(fmt.Errorf("dispatch record: %w", err))
	}
	err := p.fleet.DispatchJob(ctx, env.RunID, env.JobID, env.Attempt)
	if errors.Is(err, cikit.ErrNotFound) {
		return ingest.Permanent(err) // not in this platform's store
	}
	return err
}

// handleEvent reports commit statuses, measures queue waits and marks
// the forge credentials of ended attempts for revocation from the
// pipeline events.
func (p *Platform) handleEvent(ctx context.Context, rec *kgo.Record) error {
	var pe ingest.PipelineEvent
	if err := json.Unmarshal(rec.Value, &pe); err != nil {
		return ingest.Permanent(fmt.Errorf("pipeline event: %w", err))
	}
	ev := &dag.OutboxEvent{
		ID: pe.EventID, Type: pe.Type, RunID: pe.RunID, Pipeline: pe.Pipeline, SHA: pe.SHA,
		JobID: pe.JobID, Attempt: pe.Attempt, State: pe.State, Reason: pe.Reason, CreatedAt: pe.CreatedAt,
	}
	p.metrics.observeEvent(ev)
	p.sources.observe(ev)
	reported := p.report(ctx, ev)
	if ev.JobID == "" {
		// A run's events: logged with the trace id of its delivery.
		if run, err := p.jobs.RunGet(ctx, ev.RunID); err == nil {
			if id := runTraceID(run.IdempotencyKey); id != "" {
				ctx = withTrace(ctx, id)
			}
		}
		p.log.InfoContext(ctx, "run "+strings.TrimPrefix(ev.Type, "pipeline."), "run", ev.RunID, "pipeline", ev.Pipeline, "state", ev.State, "status_reported", reported)
	}
	return nil
}

// handleVCSEvent turns a delivery into runs, in the context of its trace
// id.
func (p *Platform) handleVCSEvent(ctx context.Context, rec *kgo.Record) error {
	var ev struct {
		Provider   string `json:"provider"`
		HookID     string `json:"hook_id"`
		DeliveryID string `json:"delivery_id"`
	}
	if json.Unmarshal(rec.Value, &ev) == nil {
		ctx = withTrace(ctx, traceID(ev.Provider, ev.HookID, ev.DeliveryID))
	}
	return p.ingester.HandleRecord(ctx, rec)
}

// targetURL is the page of a run or job, where a commit status links.
func (p *Platform) targetURL(runID, jobID string) string {
	if jobID == "" {
		return p.url + "/runs/" + runID
	}
	return p.url + "/runs/" + runID + "/jobs/" + jobID
}

// report posts the commit status ev means. A job allowed to fail that
// failed is reported a success that says so, as its pipeline is: a red
// check would fail the commit's combined status.
func (p *Platform) report(ctx context.Context, ev *dag.OutboxEvent) bool {
	if p.reporter == nil {
		return false
	}
	c, ok := status.FromEvent(ev, p.targetURL)
	if !ok {
		return false
	}
	if ev.Type == dag.EventJobCompleted && ev.State == string(cikit.JobFailed) {
		if j, err := p.jobs.JobGet(ctx, ev.RunID, ev.JobID); err == nil && j.FailureAllowed {
			c.Status.State = vcs.StateSuccess
			c.Status.Description = "failed (allowed to fail)"
			if ev.Reason != "" {
				c.Status.Description = truncate("failed (allowed to fail): "+ev.Reason, 140)
			}
		}
	}
	return p.reporter.ReportOrdered(c.Repo, c.SHA, c.Status, status.EventOrder(ev)) == nil
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// redispatchWindow is how far back redispatch looks for unfinished runs,
// redispatchInterval how often it looks again, and redispatchPage how
// many waiting jobs it reads at a time.
const (
	redispatchWindow   = 24 * time.Hour
	redispatchInterval = time.Minute
	redispatchPage     = 500
)

// redispatchEvery redispatches every redispatchInterval: a safety net for
// a dispatch record this server missed.
func (p *Platform) redispatchEvery(ctx context.Context) error {
	t := time.NewTicker(redispatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := p.redispatch(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("offer the waiting jobs of unfinished runs", "err", err)
			}
		}
	}
}

// redispatch offers this server's runners the waiting jobs of the
// unfinished runs of the last day: offers live in memory, so a server
// that starts (or restarts after a crash) learns of the jobs that were
// ready before it ran. Jobs whose runners vanished come back through the
// reaper. It reads only the waiting jobs (dag.Store.JobListWaiting), a
// page at a time, never whole runs: a sweep costs what waits, however
// large its runs are.
func (p *Platform) redispatch(ctx context.Context) error {
	params := &dag.WaitingListParams{CreatedSince: p.now().Add(-redispatchWindow), Limit: redispatchPage}
	offered := 0
	for {
		jobs, err := p.jobs.JobListWaiting(ctx, params)
		if err != nil {
			return err
		}
		if err := p.fleet.DispatchJobs(ctx, jobs); err != nil {
			return err
		}
		offered += len(jobs)
		if len(jobs) < params.Limit {
			break
		}
		last := jobs[len(jobs)-1].Key()
		params.After = &last
	}
	if offered > 0 {
		p.log.Debug("offered the waiting jobs of unfinished runs", "jobs", offered)
	}
	return nil
}
