package platform

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"
	"golang.org/x/time/rate"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/web"
)

// buildHTTP assembles the platform's routes.
func (p *Platform) buildHTTP(ctx context.Context) error {
	access, err := p.buildAuth(ctx)
	if err != nil {
		return err
	}
	ac := api.Config{
		Runs: p.jobs, Logs: p.hub, Why: p.manager.Why, Dispatch: p.fleet.Dispatch,
		Manual: ingest.NewManualTrigger(p.ingester, p.provider), Ready: p.Ready, Artifacts: p.artifacts,
		Access: access, Now: p.now, Logger: p.log.With("component", "api"), Approvals: &approvals.MemoryStore{},
		Runners: p.fleet, Policy: p,
	}
	if p.pool != nil {
		if ac.Approvals, err = approvals.NewPostgresStore(p.pool); err != nil {
			return err
		}
	}
	if ps := p.secretsParts; ps != nil {
		ac.Secrets = ps.store
	}
	p.api, err = api.New(ac)
	if err != nil {
		return err
	}
	bodies, err := httpguard.NewBodies(httpguard.BodiesConfig{
		MaxBytesInFlight: p.cfg.HTTP.MaxBodyBytesInFlight,
		MinRate:          p.cfg.HTTP.MinBodyRate,
		Timeout:          p.cfg.HTTP.BodyReadTimeout,
	})
	if err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	// Webhooks and manual triggers are what anyone may send: each has a
	// limit per source of its own.
	limitWebhooks, err := p.sourceLimit()
	if err != nil {
		return err
	}
	limitTriggers, err := p.sourceLimit()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", p.api)
	mux.Handle(triggerPattern, limitTriggers(p.api))
	mux.Handle("GET /healthz", p.api)
	mux.Handle("GET /readyz", p.api)
	// Inside the metrics: a 429 is counted as a webhook answer.
	webhooks := p.metrics.webhooks(limitWebhooks(p.receiver))
	hooks := mux
	if p.webhookLn != nil {
		// Webhooks on a listener of their own, and nothing else there.
		hooks = http.NewServeMux()
		hooks.Handle("GET /healthz", p.api)
		p.webhookHandler = bodies.Handler(withCorrelation(p.log, hooks))
	}
	for _, provider := range []string{"github", "gitlab", "standard"} {
		hooks.Handle("POST /webhooks/"+provider, webhooks(provider))
	}
	mux.Handle("/v1/", p.metrics.runnerAPI(p.fleet))
	git, err := p.gitHandler()
	if err != nil {
		return err
	}
	mux.Handle("GET "+gitPrefix, git)
	mux.Handle("POST "+gitPrefix, git)
	mux.Handle("GET /metrics", p.metrics.handler())
	// Sign-in to the web UI (answers 404 until an OIDC issuer is
	// configured) and logout.
	mux.Handle("/auth/", access.Handler())
	if h := p.oidcHandler(); h != nil {
		// The OIDC issuer's discovery document and keys, which clouds
		// verify the jobs' ID tokens with.
		mux.Handle("/.well-known/", h)
	}
	mux.Handle("/", web.Handler())
	p.gauges()
	p.bodyGauge(bodies)
	// The body guard is outermost: its read deadlines reach the
	// connection only through the server's own ResponseWriter.
	p.handler = bodies.Handler(withCorrelation(p.log, mux))
	if p.blobs != nil {
		// Blob bodies stream to disk, bounded by the size their URL
		// signs: they are not held in memory, so they stay out of the
		// body budget, but not out of its rate and deadlines.
		top := http.NewServeMux()
		top.Handle(blobPrefix, bodies.Streaming(withCorrelation(p.log, p.blobs)))
		top.Handle("/", p.handler)
		p.handler = top
	}
	return nil
}

// triggerPattern is the API's manual trigger, limited per source.
const triggerPattern = "POST " + api.Prefix + "/repos/{org}/{repo}/pipelines"

// sourceLimit returns a per-source limit of http.source-requests-per-minute,
// or no limit when that is 0.
func (p *Platform) sourceLimit() (func(http.Handler) http.Handler, error) {
	h := p.cfg.HTTP
	if h.SourceRequestsPerMinute == 0 {
		return func(next http.Handler) http.Handler { return next }, nil
	}
	proxies, err := httpguard.ParseProxies(h.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("platform: http.trusted-proxies: %w", err)
	}
	l, err := httpguard.NewLimiter(httpguard.LimiterConfig{
		Rate: rate.Limit(float64(h.SourceRequestsPerMinute) / 60), Burst: h.SourceBurst,
		MaxSources: h.MaxSources, TrustedProxies: proxies, Now: p.now,
	})
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	return l.Handler, nil
}

// newHTTPServer is the server of the platform's listener, with the
// http settings' timeouts. It has no ReadTimeout or WriteTimeout: long
// polls and log follows outlive any, and the body guard bounds the
// reading of bodies instead.
func (p *Platform) newHTTPServer(base context.Context) *http.Server {
	return &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: p.cfg.HTTP.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    p.cfg.HTTP.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
}

// tickMiniredis moves the in-process Redis's clock with the real one:
// miniredis expires keys only when told time has passed.
func tickMiniredis(ctx context.Context, m *miniredis.Miniredis) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			m.FastForward(now.Sub(last))
			last = now
		}
	}
}
