package platform

import (
	"context"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/web"
)

// buildHTTP assembles the platform's routes.
func (p *Platform) buildHTTP(context.Context) error {
	var err error
	p.api, err = api.New(api.Config{
		Runs: p.jobs, Logs: p.hub, Why: p.manager.Why, Dispatch: p.fleet.Dispatch,
		Manual: ingest.NewManualTrigger(p.ingester, p.provider), Ready: p.Ready,
		Now: p.now, Logger: p.log.With("component", "api"),
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", p.api)
	mux.Handle("GET /healthz", p.api)
	mux.Handle("GET /readyz", p.api)
	webhooks := p.metrics.webhooks(p.receiver)
	for _, provider := range []string{"github", "gitlab", "standard"} {
		mux.Handle("POST /webhooks/"+provider, webhooks(provider))
	}
	mux.Handle("/v1/", p.metrics.runnerAPI(p.fleet))
	mux.Handle("GET /metrics", p.metrics.handler())
	mux.Handle("/", web.Handler())
	p.gauges()
	p.handler = withCorrelation(p.log, mux)
	return nil
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
