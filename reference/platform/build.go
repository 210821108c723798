package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/local"
	"github.com/cikit/cikit/vcs/status"
)

// The dead-letter topics of the platform's own consumers: records of the
// dispatch topics and of the pipeline events that could not be handled.
const (
	topicDispatchDLQ       = "cikit.dispatch.dlq"
	topicPipelineEventsDLQ = "cikit.pipeline-events.dlq"
)

// topics are the Kafka topics the platform uses, created at start when
// missing.
var topics = []string{
	ingest.TopicVCSEvents, ingest.TopicVCSEventsDLQ, ingest.TopicPipelineEvents, topicPipelineEventsDLQ,
	ingest.TopicDispatchP0, ingest.TopicDispatchP1, ingest.TopicDispatchP2, topicDispatchDLQ,
}

// services are the in-process stand-ins of the embedded platform.
type services struct {
	kafka *kfake.Cluster
	redis *miniredis.Miniredis
}

// brokers returns the Kafka seed brokers: the configured ones or the
// in-process cluster's.
func (p *Platform) brokers() []string {
	if p.services != nil && p.services.kafka != nil {
		return p.services.kafka.ListenAddrs()
	}
	return p.cfg.Kafka.Brokers
}

// startServices connects to PostgreSQL, Redis and Kafka, starting the
// in-process ones the config leaves out.
func (p *Platform) startServices(ctx context.Context) error {
	p.services = &services{}
	if len(p.cfg.Kafka.Brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(p.cfg.Kafka.Partitions), topics...))
		if err != nil {
			return fmt.Errorf("platform: start in-process kafka: %w", err)
		}
		p.services.kafka = c
		p.onClose(c.Close)
	}
	if p.cfg.Redis.URL == "" {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("platform: start in-process redis: %w", err)
		}
		p.services.redis = m
		p.onClose(m.Close)
		p.redis = redis.NewClient(&redis.Options{Addr: m.Addr()})
	} else {
		opt, err := redis.ParseURL(p.cfg.Redis.URL)
		if err != nil {
			return fmt.Errorf("platform: redis.url: %w", err)
		}
		p.redis = redis.NewClient(opt)
	}
	p.onClose(func() { p.redis.Close() })
	if err := p.redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("platform: redis: %w", err)
	}
	if !p.cfg.Embedded() {
		if len(p.cfg.Kafka.Brokers) == 0 || p.cfg.Redis.URL == "" {
			p.log.Warn("PostgreSQL with an in-process Kafka or Redis: deliveries accepted and not yet taken in are lost with this process, and other servers cannot share its work; set kafka.brokers and redis.url")
		}
		pc, err := pgxpool.ParseConfig(p.cfg.Postgres.URL)
		if err != nil {
			return fmt.Errorf("platform: postgres.url: %w", err)
		}
		if p.cfg.Postgres.MaxConns > 0 {
			pc.MaxConns = int32(p.cfg.Postgres.MaxConns)
		}
		p.pool, err = pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return fmt.Errorf("platform: postgresql: %w", err)
		}
		p.onClose(p.pool.Close)
		if err := p.pool.Ping(ctx); err != nil {
			return fmt.Errorf("platform: postgresql: %w", err)
		}
		if p.cfg.Postgres.Migrate {
			if err := Migrate(ctx, p.pool); err != nil {
				return err
			}
		}
	}
	var err error
	p.producer, err = kgo.NewClient(kgo.SeedBrokers(p.brokers()...), kgo.ProducerLinger(0))
	if err != nil {
		return fmt.Errorf("platform: kafka: %w", err)
	}
	p.onClose(p.producer.Close)
	return p.createTopics(ctx)
}

// createTopics creates the platform's topics that do not exist.
func (p *Platform) createTopics(ctx context.Context) error {
	adm := kadm.NewClient(p.producer)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := adm.CreateTopics(ctx, int32(p.cfg.Kafka.Partitions), int16(p.cfg.Kafka.ReplicationFactor), nil, topics...)
	if err != nil {
		return fmt.Errorf("platform: kafka: create topics: %w", err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("platform: kafka: create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// Migrate applies the schema migrations of every store the platform uses
// on PostgreSQL, in the order of their dependencies. It is idempotent.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	jobs, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: pool})
	if err != nil {
		return err
	}
	runs, err := ingest.NewPostgresRunStore(pool, jobs, nil)
	if err != nil {
		return err
	}
	leases, err := lease.NewPostgresStore(pool)
	if err != nil {
		return err
	}
	segs, err := logs.NewPostgresSegmentStore(pool)
	if err != nil {
		return err
	}
	manifest, err := artifacts.NewPostgresManifest(pool)
	if err != nil {
		return err
	}
	secretLeases, err := secrets.NewPostgresLeaseStore(pool)
	if err != nil {
		return err
	}
	users, err := auth.NewPostgresStore(pool)
	if err != nil {
		return err
	}
	decisions, err := approvals.NewPostgresStore(pool)
	if err != nil {
		return err
	}
	runners, err := fleet.NewPostgresRunnerStore(pool)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		name string
		f    func(context.Context) error
	}{{"dag", jobs.Migrate}, {"ingest", runs.Migrate}, {"lease", leases.Migrate}, {"logs", segs.Migrate}, {"artifacts", manifest.Migrate},
		{"secrets", secretLeases.Migrate}, {"auth", users.Migrate}, {"approvals", decisions.Migrate}, {"fleet runners", runners.Migrate}} {
		if err := m.f(ctx); err != nil {
			return fmt.Errorf("platform: migrate %s: %w", m.name, err)
		}
	}
	return nil
}

// buildStores makes the stores of runs, deliveries, leases and logs.
func (p *Platform) buildStores(ctx context.Context) error {
	prefix := p.cfg.Redis.KeyPrefix
	var (
		leaseStore lease.Store
		segments   logs.SegmentStore
		// The runs' run-time matrices expand, and their jobs' run-time
		// conditions are decided, as the compiler that wrote them says.
		expander = dag.ExpanderFunc(compiler.ExpandJob)
		decider  = dag.DeciderFunc(compiler.DecideJob)
	)
	if p.pool == nil {
		mem := dag.NewMemoryStore(dag.MemoryConfig{Now: p.now, Expander: expander, MaxJobs: p.cfg.Limits.JobsPerRun,
			Decider: decider})
		p.jobs = mem
		p.runs = ingest.NewMemoryRunStore(mem, p.now)
		leaseStore = lease.NewMemoryStore()
		segments = &logs.MemorySegmentStore{}
	} else {
		pg, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: p.pool, Redis: p.redis, KeyPrefix: prefix + "dag:", Now: p.now, Expander: expander, MaxJobs: p.cfg.Limits.JobsPerRun,
			Decider: decider})
		if err != nil {
			return err
		}
		p.jobs = pg
		if p.runs, err = ingest.NewPostgresRunStore(p.pool, pg, p.now); err != nil {
			return err
		}
		if leaseStore, err = lease.NewPostgresStore(p.pool); err != nil {
			return err
		}
		if segments, err = logs.NewPostgresSegmentStore(p.pool); err != nil {
			return err
		}
	}
	var err error
	p.leases, err = lease.NewManager(lease.Config{
		Store: leaseStore, Jobs: p.jobs, Redis: p.redis, KeyPrefix: prefix + "lease:",
		TTL: p.cfg.Runners.LeaseTTL, Now: p.now, Logger: p.log.With("component", "lease"),
	})
	if err != nil {
		return err
	}
	sink, err := p.logSink(ctx)
	if err != nil {
		return err
	}
	p.hub, err = logs.NewHub(logs.Config{Sink: sink, Segments: segments, MaxLogBytes: p.cfg.Limits.LogBytes,
		Now: p.now, Logger: p.log.With("component", "logs")})
	return err
}

// logSink is where finished logs go: the S3 bucket, or files under the
// data directory.
func (p *Platform) logSink(ctx context.Context) (logs.Sink, error) {
	store, err := p.blobStore(ctx)
	if err != nil {
		return nil, err
	}
	if store != nil {
		return logs.NewBlobSink(store, "logs"), nil
	}
	dir := filepath.Join(p.cfg.DataDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("platform: data directory: %w", err)
	}
	return &logs.FileSink{Dir: dir}, nil
}

func (p *Platform) localRoot() string {
	if p.cfg.VCS.Local.Root != "" {
		return p.cfg.VCS.Local.Root
	}
	return filepath.Join(p.cfg.DataDir, "repos")
}

// buildVCS makes the provider pipelines are read from and the reporter of
// commit statuses.
func (p *Platform) buildVCS(ctx context.Context) error {
	providers := map[string]vcs.Provider{}
	get := func(name string) (vcs.Provider, error) {
		if pr, ok := providers[name]; ok {
			return pr, nil
		}
		var (
			pr  vcs.Provider
			err error
		)
		switch name {
		case "local":
			root := p.localRoot()
			if err := os.MkdirAll(root, 0o755); err != nil {
				return nil, fmt.Errorf("platform: local repositories: %w", err)
			}
			pr, err = local.New(local.Config{Root: root})
		case "github":
			gh := p.cfg.VCS.GitHub
			c := github.Config{BaseURL: gh.BaseURL, Token: gh.Token, AppID: gh.AppID, CheckRuns: gh.CheckRuns, Now: p.now}
			if gh.PrivateKeyFile != "" {
				if c.PrivateKey, err = os.ReadFile(gh.PrivateKeyFile); err != nil {
					return nil, fmt.Errorf("platform: vcs.github.private-key-file: %w", err)
				}
			}
			pr, err = github.New(c)
		case "gitlab":
			pr, err = gitlab.New(gitlab.Config{BaseURL: p.cfg.VCS.GitLab.BaseURL, Token: p.cfg.VCS.GitLab.Token, Now: p.now})
		}
		if err != nil {
			return nil, fmt.Errorf("platform: vcs %s: %w", name, err)
		}
		providers[name] = pr
		return pr, nil
	}
	var err error
	if p.provider, err = get(p.cfg.VCS.Provider); err != nil {
		return err
	}
	if sp := p.cfg.StatusProvider(); sp != "none" {
		target, err := get(sp)
		if err != nil {
			return err
		}
		p.reporter, err = status.New(status.Config{Provider: target, Logger: p.log.With("component", "status")})
		if err != nil {
			return err
		}
	}
	return nil
}

// buildIngest makes the webhook receiver, the ingester that turns events
// into runs, the outbox relay and the pruner of delivery records.
func (p *Platform) buildIngest(context.Context) error {
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: p.producer})
	if err != nil {
		return err
	}
	w := p.cfg.Webhooks
	p.receiver, err = ingest.NewReceiver(ingest.ReceiverConfig{
		GitHubSecrets: w.GitHubSecrets, GitLabTokens: w.GitLabTokens, StandardSecrets: w.StandardSecrets,
		Publisher: traced(p.metrics.publisher(pub)), Now: p.now, Logger: p.log.With("component", "receiver"),
	})
	if err != nil {
		return err
	}
	ic := ingest.IngesterConfig{Runs: &createdRuns{RunStore: p.runs, p: p}, VCS: p.provider, Logger: p.log.With("component", "ingest"),
		MaxJobs: p.cfg.Limits.JobsPerRun, MaxFileBytes: p.cfg.Limits.PipelineFileBytes, Admit: p.admit.admit}
	if p.reporter != nil {
		ic.Statuses = p.reporter
	}
	if p.ingester, err = ingest.NewIngester(ic); err != nil {
		return err
	}
	p.relay, err = ingest.NewRelay(ingest.RelayConfig{Source: p.jobs, Client: p.producer, Notify: p.relayWake, Logger: p.log.With("component", "relay")})
	if err != nil {
		return err
	}
	p.pruner, err = ingest.NewPruner(ingest.PrunerConfig{Runs: p.runs, Now: p.now, Logger: p.log.With("component", "pruner")})
	return err
}

// wakeRelay tells the relay that events wait, without blocking.
func (p *Platform) wakeRelay() {
	select {
	case p.relayWake <- struct{}{}:
	default:
	}
}

// createdRuns is the ingester's RunStore: after a delivery's runs commit it
// wakes the relay, whose events carry them to the other servers, and
// offers their ready jobs to this server's runners at once.
type createdRuns struct {
	ingest.RunStore
	p *Platform
}

func (c *createdRuns) CreateRuns(ctx context.Context, params *ingest.CreateRunsParams) (*ingest.Delivery, bool, error) {
	d, created, err := c.RunStore.CreateRuns(ctx, params)
	if err != nil || !created {
		return d, created, err
	}
	c.p.wakeRelay()
	c.p.metrics.runsCreated.Add(float64(len(d.RunIDs)))
	c.p.log.InfoContext(ctx, "runs created", "delivery", d.DeliveryID, "runs", d.RunIDs)
	for _, id := range d.RunIDs {
		if err := c.p.fleet.DispatchRun(ctx, id); err != nil {
			c.p.log.WarnContext(ctx, "dispatch new run", "run", id, "err", err)
		}
	}
	return d, created, nil
}
