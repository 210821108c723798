// Package platform wires the packages of cikit into the reference
// platform that `cikit serve` runs: webhooks in, runs scheduled, jobs
// handed to runners, logs kept, commit statuses out, an HTTP API, a web UI
// and metrics.
//
// The same code runs in both of its modes; only the services differ. The
// embedded default (a zero config.Config) starts an in-process Kafka
// (franz-go's kfake) and Redis (miniredis) and reaches them over loopback
// with the production clients, keeps runs in memory and logs in the data
// directory, reads pipelines from local git repositories, and runs local
// sandboxed runners. Production points the same process at PostgreSQL,
// Kafka, Redis and S3; several processes share the work (Kafka consumer
// groups, SKIP LOCKED relays and reapers) and runners are `cikit runner`
// processes.
//
// Each claimed job is told where to fetch its commit: local repositories
// from the platform's own git server at /git/, with the job's token,
// which reads only its run's repository and only while the attempt runs;
// on GitHub (as an App) with an installation token narrowed to the
// repository with contents: read, and on GitLab with a read_repository
// deploy token of the project. The forge's credentials are revoked when
// their attempts end, beside the completion, which never waits for it;
// every minute the server also revokes those whose attempts it did not
// see end (another server took the event).
package platform

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/secrets/policy"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

// Platform is one `cikit serve` process.
type Platform struct {
	cfg *config.Config
	log *slog.Logger
	now func() time.Time

	// Secrets the embedded platform made up, for Banner.
	webhookSecret, registrationToken, adminToken string

	services *services
	pool     *pgxpool.Pool
	redis    redis.UniversalClient
	producer *kgo.Client

	jobs     dag.Store
	runs     ingest.RunStore
	leases   *lease.Manager
	reaper   *lease.Reaper
	hub      *logs.Hub
	provider vcs.Provider
	reporter *status.Reporter
	receiver *ingest.Receiver
	ingester *ingest.Ingester
	// policy decides what each job may have; admit applies it to the
	// runs the ingester creates.
	policy    *policy.Engine
	admit     *admitter
	relay     *ingest.Relay
	relayWake chan struct{}
	pruner    *ingest.Pruner
	fleet     *fleet.Server
	// s3 is the bucket of logs, artifacts and caches, if configured;
	// blobs serves the data directory's blobs without one.
	s3        *artifacts.S3Store
	blobs     http.Handler
	artifacts *artifacts.Service
	sources   *sourceRevoker // the forge credentials of running attempts
	// secretsParts are the runtime secrets flow's; nil without secrets.
	secretsParts *platformSecrets
	manager      *fleet.Manager
	runners      *local.Backend // the runners this process runs itself, if any
	metrics      *metrics
	api          *api.API

	ln      net.Listener
	url     string
	handler http.Handler
	// webhookLn and webhookHandler are http.webhook-listen's, when set.
	webhookLn      net.Listener
	webhookHandler http.Handler

	readyMu sync.Mutex
	ready   error

	closers []func()
}

// Options are what a Platform needs beyond its configuration.
type Options struct {
	// Logger receives the platform's structured log. Default: one built
	// from config.Log on stderr.
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// New builds a platform from cfg: it connects to (or starts) the services,
// applies migrations when cfg asks, and listens on cfg.Listen. Run serves.
// When New fails it releases what it had started.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *Platform, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Platform{cfg: cfg, log: opts.Logger, now: opts.Now, relayWake: make(chan struct{}, 1)}
	if p.log == nil {
		p.log = NewLogger(os.Stderr, cfg.Log)
	}
	if p.now == nil {
		p.now = time.Now
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	p.secrets()
	p.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("platform: listen: %w", err)
	}
	if cfg.HTTP.WebhookListen != "" {
		if p.webhookLn, err = net.Listen("tcp", cfg.HTTP.WebhookListen); err != nil {
			return nil, fmt.Errorf("platform: listen for webhooks: %w", err)
		}
	}
	p.url = strings.TrimSuffix(cfg.PublicURL, "/")
	if p.url == "" {
		p.url = "http://" + p.ln.Addr().String()
	}
	p.metrics = newMetrics()
	steps := []func(context.Context) error{p.startServices, p.buildStores, p.buildArtifacts, p.buildVCS, p.buildPolicy, p.buildIngest, p.buildSecrets, p.buildFleet, p.buildHTTP}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// WebhookAddr is the address of http.webhook-listen's listener, "" when
// webhooks come to the main one.
func (p *Platform) WebhookAddr() string {
	if p.webhookLn == nil {
		return ""
	}
	return p.webhookLn.Addr().String()
}

// URL is the platform's base URL.
func (p *Platform) URL() string { return p.url }

// Jobs is the store of runs and jobs.
func (p *Platform) Jobs() dag.Store { return p.jobs }

// Runs is the store of deliveries: which runs each delivery created.
func (p *Platform) Runs() ingest.RunStore { return p.runs }

// Isolation says what separates the jobs of the local runners from each
// other and from the host: "bubblewrap" or "process"; "" when the
// platform runs no local runners.
func (p *Platform) Isolation() string {
	if p.runners == nil {
		return ""
	}
	info, err := p.runners.Info(context.Background())
	if err != nil {
		return ""
	}
	return info.Isolation
}

// secrets fills in what the embedded platform may make up: a webhook
// secret, a registration token, a signing key and a secrets admin token. Production configs must
// give them (config.Validate says so).
func (p *Platform) secrets() {
	c := &p.cfg.Webhooks
	if len(c.GitHubSecrets)+len(c.GitLabTokens)+len(c.StandardSecrets) == 0 {
		p.webhookSecret = rand.Text()
		c.GitHubSecrets = []string{p.webhookSecret}
		c.GitLabTokens = []string{p.webhookSecret}
	}
	r := &p.cfg.Runners
	if len(r.RegistrationTokens) == 0 {
		p.registrationToken = rand.Text()
		r.RegistrationTokens = []string{p.registrationToken}
	}
	if len(r.SigningKeys) == 0 {
		r.SigningKeys = []string{rand.Text() + rand.Text()}
	}
}

// Banner is what `cikit serve` prints at start: where the platform is and
// how to trigger a run.
func (p *Platform) Banner() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cikit is serving at %s\n", p.url)
	if p.cfg.Embedded() {
		fmt.Fprintf(&b, "  mode:      embedded (memory stores, in-process Kafka and Redis; state is lost at exit)\n")
	} else {
		fmt.Fprintf(&b, "  mode:      production (PostgreSQL, Kafka %s)\n", strings.Join(p.cfg.Kafka.Brokers, ","))
	}
	if p.cfg.VCS.Provider == "local" {
		fmt.Fprintf(&b, "  repos:     %s/<org>/<repo> (git repositories with a .cikit.yml)\n", p.localRoot())
	}
	if p.webhookSecret != "" {
		fmt.Fprintf(&b, "  webhooks:  %s/webhooks/github (secret %s)\n", p.url, p.webhookSecret)
	}
	if p.registrationToken != "" {
		fmt.Fprintf(&b, "  runners:   cikit runner -server %s -registration-token %s\n", p.url, p.registrationToken)
	}
	if p.adminToken != "" {
		fmt.Fprintf(&b, "  admin:     token %s (shown once; send it as Authorization: Bearer, or cikit -token)\n", p.adminToken)
	}
	if p.adminToken != "" && p.secretsParts != nil {
		fmt.Fprintf(&b, "  secrets:   cikit secret set -server %s -token %s -scope repo:<org>/<repo> NAME < value-file\n", p.url, p.adminToken)
	}
	fmt.Fprintf(&b, "  trigger:   curl -X POST -H 'Authorization: Bearer <token>' -H 'Idempotency-Key: '$(date +%%s%%N) %s/api/v1/repos/<org>/<repo>/pipelines -d '{\"ref\":\"main\"}'\n", p.url)
	return b.String()
}

// setReady records whether the platform can take work, for /readyz.
func (p *Platform) setReady(err error) {
	p.readyMu.Lock()
	p.ready = err
	p.readyMu.Unlock()
}

// Ready reports whether the platform takes work: it has started, is not
// shutting down, and its PostgreSQL and Redis answer. /readyz answers it.
func (p *Platform) Ready(ctx context.Context) error {
	p.readyMu.Lock()
	err := p.ready
	p.readyMu.Unlock()
	if err != nil {
		return err
	}
	if p.pool != nil {
		if err := p.pool.Ping(ctx); err != nil {
			return fmt.Errorf("postgresql: %w", err)
		}
	}
	if err := p.redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Close releases what New started, in reverse order. Run calls it; call
// it yourself only for a Platform that never ran.
func (p *Platform) Close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
	p.closers = nil
	if p.webhookLn != nil {
		p.webhookLn.Close()
	}
	if p.ln != nil {
		p.ln.Close()
	}
}

func (p *Platform) onClose(f func()) { p.closers = append(p.closers, f) }

// errStarting is /readyz's answer until Run has started everything.
var errStarting = errors.New("starting")
