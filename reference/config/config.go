// Package config is the configuration of `cikit serve`: one struct, read
// from a YAML file, CIKIT_* environment variables and flags, in that order
// of precedence (a flag wins over the environment, which wins over the
// file, which wins over the defaults).
//
// Every setting has one dotted name, its path in the YAML file, such as
// postgres.url. The same setting is the environment variable
// CIKIT_POSTGRES_URL (upper case, dots and dashes as underscores) and the
// flag -postgres.url. Lists are YAML sequences, or comma-separated in the
// environment and in flags (so a secret with a comma in it must come from
// the file). Unknown keys in the file and unknown flags are
// errors, so a typo never goes unnoticed; unknown CIKIT_* variables are
// warnings, since runners and jobs set some of their own.
//
// The zero Config is the embedded platform: every service whose address is
// empty runs in the process (memory stores, an in-process Kafka and Redis,
// logs in the data directory, pipelines from local git repositories, local
// sandboxed runners). Setting postgres.url, kafka.brokers, redis.url and
// s3.bucket moves each to a real service: production.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/secrets"
)

// Config is the whole configuration of `cikit serve`. The `usage` tag of
// each setting is its help text in `cikit serve -h`.
type Config struct {
	// Listen is the address the HTTP server listens on.
	Listen string `yaml:"listen" usage:"the address the HTTP server listens on (host:port)"`
	// PublicURL is the URL runners, webhooks and people reach the server
	// at. Default: http:// and the listen address.
	PublicURL string `yaml:"public-url" usage:"the URL runners and webhooks reach this server at (default: from -listen)"`
	// DataDir holds what the embedded services keep: finished logs and,
	// by default, the local git repositories.
	DataDir string `yaml:"data-dir" usage:"the directory for logs and local repositories of the embedded platform"`
	// Instance names this process among several sharing the work. Each
	// server's must be its own; a name kept across restarts (a pod's
	// name) lets a restarted server reuse its Kafka consumer groups.
	// Default: the host name and process id.
	Instance string `yaml:"instance" usage:"this process's name among the servers sharing the work (default: host name and pid)"`
	// ShutdownTimeout bounds a graceful shutdown: draining HTTP requests,
	// handing back leases, committing consumed offsets.
	ShutdownTimeout time.Duration `yaml:"shutdown-timeout" usage:"how long a graceful shutdown may take"`

	HTTP      HTTP      `yaml:"http"`
	Postgres  Postgres  `yaml:"postgres"`
	Kafka     Kafka     `yaml:"kafka"`
	Redis     Redis     `yaml:"redis"`
	S3        S3        `yaml:"s3"`
	VCS       VCS       `yaml:"vcs"`
	Webhooks  Webhooks  `yaml:"webhooks"`
	Runners   Runners   `yaml:"runners"`
	Secrets   Secrets   `yaml:"secrets"`
	Auth      Auth      `yaml:"auth"`
	Policy    Policy    `yaml:"policy"`
	Artifacts Artifacts `yaml:"artifacts"`
	Limits    Limits    `yaml:"limits"`
	Log       Log       `yaml:"log"`
}

// HTTP bounds what clients may hold of the HTTP server: its connections,
// the memory of request bodies, the requests of one address. It applies
// to every listener and route; docs/serve.md says what each limit costs.
type HTTP struct {
	// ReadHeaderTimeout is how long a client may take to send a
	// request's headers; IdleTimeout how long a keep-alive connection
	// may wait for its next request; MaxHeaderBytes how large the
	// headers may be.
	ReadHeaderTimeout time.Duration `yaml:"read-header-timeout" usage:"how long a client may take to send a request's headers"`
	IdleTimeout       time.Duration `yaml:"idle-timeout" usage:"how long an idle keep-alive connection stays open"`
	MaxHeaderBytes    int           `yaml:"max-header-bytes" usage:"the largest request headers read, in bytes"`
	// MaxBodyBytesInFlight is the budget of request-body bytes held at
	// once across all requests: a request past it is answered 503 with
	// Retry-After, one larger than it 413.
	MaxBodyBytesInFlight int64 `yaml:"max-body-bytes-in-flight" usage:"the most request-body bytes read at once across all requests (past it: 503 + Retry-After)"`
	// MinBodyRate (bytes per second) and BodyReadTimeout: every
	// BodyReadTimeout of reading a body must bring MinBodyRate ×
	// BodyReadTimeout bytes or the rest of the body, else the request
	// is cut (408).
	MinBodyRate     int64         `yaml:"min-body-rate" usage:"the slowest a request body may arrive, in bytes per second averaged over body-read-timeout"`
	BodyReadTimeout time.Duration `yaml:"body-read-timeout" usage:"the window over which a request body's rate is measured; a body idle this long is cut"`
	// SourceRequestsPerMinute and SourceBurst limit the webhook and
	// manual trigger requests of one client address (a token bucket
	// each; past it 429 with Retry-After); 0 requests per minute turns
	// the limit off. MaxSources bounds the addresses remembered.
	SourceRequestsPerMinute int `yaml:"source-requests-per-minute" usage:"webhook and trigger requests per minute from one address (0: no limit)"`
	SourceBurst             int `yaml:"source-burst" usage:"webhook and trigger requests one address may send at once"`
	MaxSources              int `yaml:"max-sources" usage:"how many client addresses the rate limits remember"`
	// TrustedProxies are the addresses or CIDR prefixes of the proxies
	// whose X-Forwarded-For names the client; without them a client is
	// the connection's address.
	TrustedProxies []string `yaml:"trusted-proxies" usage:"proxies (addresses or CIDR prefixes) whose X-Forwarded-For names the client (empty: the connection's address)"`
	// WebhookListen, when set, is an address of its own for the webhooks
	// (/webhooks/), which keep their own signed credentials: the network
	// forges reach need not expose the API and the UI. The main listener
	// then serves no webhook.
	WebhookListen string `yaml:"webhook-listen" usage:"a listener of its own for webhooks, host:port (empty: the main listener)"`
}

// Postgres is the system of record. Without a URL, runs, jobs, leases and
// deliveries are kept in memory and lost when the process ends.
type Postgres struct {
	// URL is a PostgreSQL connection string (pgx's format).
	URL string `yaml:"url" usage:"PostgreSQL connection URL (empty: memory stores)"`
	// MaxConns bounds the connection pool. Default: pgx's (4 per CPU, at
	// least 4).
	MaxConns int `yaml:"max-conns" usage:"the most PostgreSQL connections this process opens (0: pgx's default)"`
	// Migrate applies the schema migrations at start, as `cikit migrate`
	// does.
	Migrate bool `yaml:"migrate" usage:"apply the schema migrations at start"`
}

// Kafka carries the events between the stages. Without brokers an
// in-process Kafka is started.
type Kafka struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `yaml:"brokers" usage:"Kafka seed brokers, host:port (empty: an in-process Kafka)"`
	// Partitions is how many partitions the topics are created with when
	// they do not exist.
	Partitions int `yaml:"partitions" usage:"partitions of the topics cikit creates"`
	// ReplicationFactor is the topics' replication factor when created;
	// -1 takes the brokers' default.
	ReplicationFactor int `yaml:"replication-factor" usage:"replication factor of the topics cikit creates (-1: the brokers' default)"`
	// Group prefixes the consumer groups: several servers with the same
	// Group share the work.
	Group string `yaml:"group" usage:"the prefix of cikit's consumer groups"`
}

// Redis holds derived state: dependency counters, leases, dispatch hints.
// Without a URL an in-process Redis is started.
type Redis struct {
	// URL is a redis:// URL.
	URL string `yaml:"url" usage:"Redis URL, redis://host:port/db (empty: an in-process Redis)"`
	// KeyPrefix prefixes every key cikit writes.
	KeyPrefix string `yaml:"key-prefix" usage:"the prefix of every Redis key cikit writes"`
}

// S3 stores finished logs. Without a bucket they are files under DataDir.
type S3 struct {
	Bucket string `yaml:"bucket" usage:"the S3 bucket for finished logs (empty: files in the data directory)"`
	Prefix string `yaml:"prefix" usage:"the prefix of cikit's keys in the bucket"`
	Region string `yaml:"region" usage:"the bucket's region"`
	// Endpoint is an S3-compatible server's URL; requests then use path
	// style.
	Endpoint string `yaml:"endpoint" usage:"an S3-compatible endpoint URL (empty: AWS)"`
	// AccessKeyID and SecretAccessKey are static credentials; without
	// them the AWS default credential chain applies.
	AccessKeyID     string `yaml:"access-key-id" usage:"S3 access key id (empty: the AWS default credential chain)"`
	SecretAccessKey string `yaml:"secret-access-key" usage:"S3 secret access key"`
}

// VCS is where pipelines are read at a commit and where commit statuses
// go.
type VCS struct {
	// Provider is "local" (git repositories under Local.Root), "github"
	// or "gitlab".
	Provider string `yaml:"provider" usage:"where pipeline files are read: local, github or gitlab"`
	// Statuses is where commit statuses are reported: "" (the Provider),
	// "github", "gitlab" or "none".
	Statuses string `yaml:"statuses" usage:"where commit statuses go: github, gitlab, none (empty: the provider; none for local)"`
	Local    Local  `yaml:"local"`
	GitHub   GitHub `yaml:"github"`
	GitLab   GitLab `yaml:"gitlab"`
}

// Local reads repositories from the file system: org/repo is the git
// repository Root/org/repo.
type Local struct {
	Root string `yaml:"root" usage:"the directory of local repositories, Root/org/repo (default: DataDir/repos)"`
}

// GitHub is the GitHub (or GitHub Enterprise Server) API, as a token or as
// a GitHub App.
type GitHub struct {
	BaseURL string `yaml:"base-url" usage:"the GitHub REST API's root URL (empty: api.github.com)"`
	Token   string `yaml:"token" usage:"a GitHub token"`
	AppID   int64  `yaml:"app-id" usage:"the GitHub App's id (instead of a token)"`
	// PrivateKeyFile is the App's PEM private key.
	PrivateKeyFile string `yaml:"private-key-file" usage:"the GitHub App's private key file (PEM)"`
	// CheckRuns reports check runs instead of commit statuses (Apps only).
	CheckRuns bool `yaml:"check-runs" usage:"report check runs instead of commit statuses (GitHub Apps only)"`
}

// GitLab is the GitLab API.
type GitLab struct {
	BaseURL string `yaml:"base-url" usage:"the GitLab API's root URL (empty: gitlab.com)"`
	Token   string `yaml:"token" usage:"a GitLab token"`
}

// Webhooks are the secrets deliveries are verified with. Several of a kind
// are accepted at once, for rotation.
type Webhooks struct {
	GitHubSecrets   []string `yaml:"github-secrets" usage:"secrets of GitHub webhooks (X-Hub-Signature-256)"`
	GitLabTokens    []string `yaml:"gitlab-tokens" usage:"secret tokens of GitLab webhooks (X-Gitlab-Token)"`
	StandardSecrets []string `yaml:"standard-secrets" usage:"secrets of Standard Webhooks deliveries (whsec_...)"`
}

// Runners configures the runner protocol and the runners this process
// starts itself.
type Runners struct {
	// Local is how many sandboxed runners this process runs itself. The
	// embedded platform defaults to 2; with PostgreSQL the default is 0
	// and runners are `cikit runner` processes.
	Local int `yaml:"local" usage:"how many local runners this process starts (-1: the default: 2 embedded, 0 with PostgreSQL)"`
	// Labels are the local runners' labels; none means DefaultLabels
	// (see RunnerLabels), the labels of GitHub's hosted Linux runners
	// among them, so that a workflow with runs-on: ubuntu-latest runs
	// without configuration.
	Labels []string `yaml:"labels" usage:"labels of the local runners (default: self-hosted, the OS and architecture, and on Linux ubuntu-latest, ubuntu-24.04 and ubuntu-22.04)"`
	// Sandbox is the local runners' isolation: "auto" and "require" run
	// every job in a bubblewrap sandbox and make the server refuse to
	// start without one; "off" runs jobs as plain processes of the
	// server's user, for trusted code only. Nothing runs unsandboxed
	// unless it says off.
	Sandbox string `yaml:"sandbox" usage:"local runners' sandbox: auto or require (the server refuses to start without bubblewrap), or off (jobs run unsandboxed)"`
	// Network gives sandboxed jobs of local runners the host's network.
	Network bool `yaml:"network" usage:"give local runners' sandboxed jobs the host network"`
	// RegistrationTokens are what runners register with. Default
	// (embedded only): a random one, printed at start.
	RegistrationTokens []string `yaml:"registration-tokens" usage:"tokens runners register with (embedded default: a random one)"`
	// SigningKeys sign runner and job tokens, at least 32 bytes each; the
	// first signs, all verify. Servers sharing the work need the same
	// keys. Default (embedded only): a random one.
	SigningKeys []string `yaml:"signing-keys" usage:"keys that sign runner and job tokens, 32 bytes or more; the first signs (embedded default: random)"`
	// LeaseTTL is how long a job's lease lives without a heartbeat.
	LeaseTTL time.Duration `yaml:"lease-ttl" usage:"how long a job's lease lives without a heartbeat"`
	// ReaperGrace is how long past its expiry a lease is left before its
	// job may get another attempt: the job's supervisor must have killed
	// the old attempt by then (lease.ReaperConfig.Grace). It must be
	// longer than lease.MinReaperGrace(LeaseTTL). 0: lease.DefaultGrace.
	ReaperGrace time.Duration `yaml:"reaper-grace" usage:"how long past its expiry a lease waits before the job is tried again; longer than the supervisor's kill margin (0: the default, 5s)"`
	// TenantLimit bounds the jobs of one tenant (a repository's owner)
	// running at once per server; 0 is no limit.
	TenantLimit int `yaml:"tenant-limit" usage:"the most jobs of one repository owner running at once through each server (0: no limit)"`

	// What the jobs of local runners get from the host: nothing of the
	// server's environment but process.AllowedEnv and these names.
	PassEnv []string `yaml:"pass-env" usage:"names of more host variables local runners' jobs get, besides PATH, HOME, USER, LOGNAME, TMPDIR, LANG, LANGUAGE, LC_* and TZ"`
	// Limits bound each sandboxed job of the local runners.
	Limits JobLimits `yaml:"limits"`
	// Images say how the local runners run jobs in container images.
	Images RunnerImages `yaml:"images"`
}

// RunnerImages configure how the local runners run jobs in container
// images (process.Images, see Config.RunnerImages): a job naming an image
// (GitLab's image:, GitHub's container:) runs in it, pulled into Dir,
// in its sandbox, with no container engine. Images need the sandbox:
// with runners.sandbox off no job runs in an image, and these settings
// are refused. docs/isolation.md says more.
type RunnerImages struct {
	// Dir is the image directory: the layers and the unpacked images.
	// Default: DataDir/images.
	Dir string `yaml:"dir" usage:"the local runners' image directory: layers and unpacked images (default: images under data-dir)"`
	// Default is the image of a job that names none and that Labels
	// give none.
	Default string `yaml:"default-image" usage:"the image of a job that names none and whose runs-on labels runners.images.labels gives none"`
	// Labels are LABEL=IMAGE pairs, as act's -P: a job naming no image
	// whose runs-on names LABEL runs in IMAGE.
	Labels []string `yaml:"labels" usage:"LABEL=IMAGE pairs: a job naming no image that runs on LABEL runs in IMAGE, as act's -P does"`
	// HostJobs says whether a job that gets no image runs on the host,
	// in its sandbox ("true"), or fails ("false"). Default: false when
	// Default is set, else true.
	HostJobs string `yaml:"host-jobs" usage:"true: run a job that gets no image on the host, in its sandbox; false: fail it (default: false when default-image is set, else true)"`
	// Mirrors are HOST=MIRROR pairs: the mirrors of a registry host,
	// tried in the order given before it.
	Mirrors []string `yaml:"mirrors" usage:"HOST=MIRROR pairs: pull the images of registry HOST from MIRROR first (mirrors of a host are tried in order)"`
	// DockerConfig is a Docker config.json whose auths log in to
	// registries. Default: none; the server's own is never read
	// implicitly.
	DockerConfig string `yaml:"docker-config" usage:"a Docker config.json whose auths log in to registries (default: none)"`
	// Insecure are registry hosts reached over plain HTTP.
	Insecure []string `yaml:"insecure-registries" usage:"registry hosts reached over plain HTTP"`
	// BudgetBytes bounds the image layers cached before the least
	// recently used are evicted. 0: image.DefaultBudget.
	BudgetBytes int64 `yaml:"budget-bytes" usage:"the bytes of image layers kept before the least recently used are evicted (0: 20 GiB)"`
	// PullPolicy is the pull policy of a job that asks for none:
	// always (the default), if-not-present or never.
	PullPolicy string `yaml:"pull-policy" usage:"when a job's image is pulled, unless the job says: always (the default), if-not-present or never"`
}

// RunnerImages returns the local runners' images as process.Images, nil
// when runners.sandbox is off. c must be valid.
func (c *Config) RunnerImages() *process.Images {
	if c.Runners.Sandbox == "off" {
		return nil
	}
	ri := c.Runners.Images
	dir := ri.Dir
	if dir == "" {
		dir = filepath.Join(c.DataDir, "images")
	}
	im := &process.Images{
		Pull:       image.Config{Dir: dir, Budget: ri.BudgetBytes, DockerConfig: ri.DockerConfig, Insecure: slices.Clone(ri.Insecure)},
		Default:    ri.Default,
		Host:       ri.HostJobs == "true" || ri.HostJobs == "" && ri.Default == "",
		PullPolicy: image.PullPolicy(ri.PullPolicy),
	}
	if labels, _ := imagePairs(ri.Labels, true); len(labels) > 0 {
		im.Labels = map[string]string{}
		for _, kv := range labels {
			im.Labels[kv[0]] = kv[1]
		}
	}
	if mirrors, _ := imagePairs(ri.Mirrors, false); len(mirrors) > 0 {
		im.Pull.Mirrors = map[string][]string{}
		for _, kv := range mirrors {
			im.Pull.Mirrors[kv[0]] = append(im.Pull.Mirrors[kv[0]], kv[1])
		}
	}
	return im
}

// imagePairs splits KEY=VALUE items, neither side empty; unique refuses
// a key given twice.
func imagePairs(items []string, unique bool) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE with neither of them empty", item)
		}
		if unique && seen[k] {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		seen[k] = true
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// JobLimits bound each sandboxed job of the local runners; 0 switches a
// limit off. The defaults are process.DefaultLimits(). Where the host
// delegates a cgroup v2 hierarchy to the server, processes, memory and
// cpus are the job's cgroup's pids.max, memory.max and cpu.max;
// otherwise processes is an rlimit and memory and cpus are not enforced,
// which every job's log header says (process.Limits). docs/isolation.md
// says more.
type JobLimits struct {
	Processes int           `yaml:"processes" usage:"how many processes and threads a job may have at once (0: no limit)"`
	MemoryMiB int           `yaml:"memory-mib" usage:"the real memory a job may use in MiB; needs a delegated cgroup v2 (0: no limit)"`
	CPUs      int           `yaml:"cpus" usage:"how many CPUs' worth of time a job may use at once; needs a delegated cgroup v2 (0: no limit)"`
	CPUTime   time.Duration `yaml:"cpu-time" usage:"the CPU time each process of a job may use (0: no limit)"`
	// AddressSpaceMiB is RLIMIT_AS, off by default: Go's race detector
	// and JVMs reserve far more address space than they use.
	AddressSpaceMiB int `yaml:"address-space-mib" usage:"the address space each process of a job may map in MiB (0: no limit; breaks Go's race detector and JVMs when low)"`
	FileSizeMiB     int `yaml:"file-size-mib" usage:"the largest file a job may write in MiB (0: no limit)"`
	TmpMiB          int `yaml:"tmp-mib" usage:"the size of a job's /tmp and of its /dev/shm, both in memory, in MiB (0: the kernel's default, half of the memory)"`
}

// ProcessLimits returns the limits as process.Limits.
func (l JobLimits) ProcessLimits() process.Limits {
	const mib = 1 << 20
	return process.Limits{Processes: l.Processes, JobMemory: int64(l.MemoryMiB) * mib, CPUs: l.CPUs, CPUTime: l.CPUTime,
		Memory: int64(l.AddressSpaceMiB) * mib, FileSize: int64(l.FileSizeMiB) * mib, Tmp: int64(l.TmpMiB) * mib}
}

// defaultJobLimits is process.DefaultLimits() in the units of JobLimits.
func defaultJobLimits() JobLimits {
	const mib = 1 << 20
	d := process.DefaultLimits()
	return JobLimits{Processes: d.Processes, MemoryMiB: int(d.JobMemory / mib), CPUs: d.CPUs, CPUTime: d.CPUTime,
		AddressSpaceMiB: int(d.Memory / mib), FileSizeMiB: int(d.FileSize / mib), TmpMiB: int(d.Tmp / mib)}
}

// Artifacts configures the artifacts and caches jobs keep. They are blobs
// in the S3 bucket when one is set (keys under artifacts/ and cache/),
// and otherwise files under DataDir/blobs that this server serves at
// /v1/blobs/ through URLs it signs. Their records are in PostgreSQL, or
// in memory. Zero is each setting's default, the one its usage names.
type Artifacts struct {
	// ExpireIn is how long an artifact is kept when its job says
	// nothing; MaxExpireIn caps what a job asks for ("never" included).
	ExpireIn    time.Duration `yaml:"expire-in" usage:"how long an artifact is kept when its job says nothing (0: 30 days)"`
	MaxExpireIn time.Duration `yaml:"max-expire-in" usage:"the longest a job may keep its artifacts, never included (0: no limit)"`
	// KeepLatestDefault keeps the artifacts of each repository's latest
	// run of its default branch, whatever their expiry.
	KeepLatestDefault bool `yaml:"keep-latest-default" usage:"keep the artifacts of each repository's latest run of its default branch past their expiry"`
	// MaxArchiveBytes bounds one archive a job uploads.
	MaxArchiveBytes int64 `yaml:"max-archive-bytes" usage:"the largest artifact or cache archive a job may upload, in bytes (0: 5 GiB)"`
	// CacheBudgetBytes is how many bytes of caches each repository keeps
	// before the least recently hit are evicted; CacheMaxAge how long an
	// entry that is not hit is kept.
	CacheBudgetBytes int64         `yaml:"cache-budget-bytes" usage:"the bytes of caches each repository keeps, least recently hit evicted first (0: 10 GiB; -1: no budget)"`
	CacheMaxAge      time.Duration `yaml:"cache-max-age" usage:"how long a cache entry nobody restores is kept (0: 7 days)"`
	// PruneInterval is how often expired artifacts, abandoned uploads
	// and evicted caches are deleted.
	PruneInterval time.Duration `yaml:"prune-interval" usage:"how often expired artifacts and caches are deleted (0: 10 minutes)"`
}

// Auth is who may use the API and the web UI. Every API route needs a
// principal with a role: an API token (Authorization: Bearer) or a web
// session made by signing in through an OpenID Connect provider. On its
// first start the platform makes an admin token and prints it once.
type Auth struct {
	OIDC AuthOIDC `yaml:"oidc"`
	// SessionTTL is how long a web session lasts from sign-in;
	// SessionIdle how long it lasts unused.
	SessionTTL  time.Duration `yaml:"session-ttl" usage:"how long a web session lasts after sign-in (0: 12h)"`
	SessionIdle time.Duration `yaml:"session-idle" usage:"how long an unused web session lasts (0: 2h)"`
	// TokenTTL is an API token's lifetime when its maker asks none;
	// TokenMaxTTL the longest anyone may ask.
	TokenTTL    time.Duration `yaml:"token-ttl" usage:"an API token's lifetime when none is asked (0: 90 days)"`
	TokenMaxTTL time.Duration `yaml:"token-max-ttl" usage:"the longest lifetime of an API token (0: 1 year)"`
}

// AuthOIDC is the OpenID Connect provider people sign in to the web UI
// with (GitLab, Google, Keycloak, Dex, any issuer with discovery). Without
// an issuer the web UI takes no sign-in and the API only tokens.
type AuthOIDC struct {
	Issuer       string   `yaml:"issuer" usage:"the OIDC issuer URL people sign in with (empty: no web sign-in)"`
	ClientID     string   `yaml:"client-id" usage:"the platform's OIDC client id"`
	ClientSecret string   `yaml:"client-secret" usage:"the platform's OIDC client secret"`
	Scopes       []string `yaml:"scopes" usage:"OIDC scopes asked besides openid (default: profile, email)"`
	// AllowedDomains, when set, admits only users whose verified email
	// is in one of these domains.
	AllowedDomains []string `yaml:"allowed-domains" usage:"email domains whose users may sign in (empty: any)"`
	// DefaultRoles are granted to a user on their first sign-in, as
	// ROLE or ROLE:ORG or ROLE:ORG/REPO ("read:acme").
	DefaultRoles []string `yaml:"default-roles" usage:"roles a new user gets, ROLE[:ORG[/REPO]] (empty: none)"`
}

// Policy is what jobs may do: the OPA policy deciding, for each job of
// each run, allow, require_approval or deny and what the job gets, and
// the protection rules of refs and environments.
type Policy struct {
	// File is a Rego policy (package cikit.policy, defining decision)
	// replacing the built-in default; it is checked at start, and
	// reloaded when it changes (every Watch), on SIGHUP and on POST
	// /api/v1/policy/reload. A broken file is refused with its error
	// positions and the policy in force stays.
	File  string        `yaml:"file" usage:"a Rego policy file replacing the default policy (empty: the default)"`
	Watch time.Duration `yaml:"watch" usage:"how often the policy file is checked for changes (0: 10s; -1ns: never)"`
	// ProtectedBranches and ProtectedTags are patterns (path.Match) of
	// the refs the policy's input calls protected; the default branch
	// always is.
	ProtectedBranches []string `yaml:"protected-branches" usage:"patterns of protected branches, besides the default branch"`
	ProtectedTags     []string `yaml:"protected-tags" usage:"patterns of protected tags (empty: none)"`
	// ApprovalExpiry is how long a gated job waits for a decision before
	// it fails unapproved.
	ApprovalExpiry time.Duration `yaml:"approval-expiry" usage:"how long a job waits for approval before it fails (0: 72h)"`
	// Environments are the protection rules of deployment environments
	// (in the file only): required reviewers, a wait timer, the refs
	// that may deploy.
	Environments []Environment `yaml:"environments" config:"file-only"`
}

// Environment is the protection rule of the environments named Name in
// the repositories Repos match, as GitHub's environment settings: a job
// deploying to it waits for one of Reviewers to approve (when any are
// named), then WaitTimer; and only Refs may deploy to it.
type Environment struct {
	Name string `yaml:"name"`
	// Repos are patterns of org/repo (default: every repository).
	Repos []string `yaml:"repos"`
	// Reviewers are logins; "role:approve" is anyone with the approve
	// role on the repository.
	Reviewers []string      `yaml:"reviewers"`
	WaitTimer time.Duration `yaml:"wait-timer"`
	// Refs are patterns of the branches and tags that may deploy
	// ("main", "release/*", "v*"); empty: any.
	Refs []string `yaml:"refs"`
}

// Limits bound what one push may cost. Zero is each limit's default, the
// constant the usage text names.
type Limits struct {
	// PipelineFileBytes bounds a pipeline file and each file it includes
	// (compiler.Options.MaxFileBytes).
	PipelineFileBytes int `yaml:"pipeline-file-bytes" usage:"the largest pipeline file, and included file, in bytes (0: compiler.DefaultMaxFileBytes, 1 MiB)"`
	// JobsPerRun bounds a run's jobs, matrix variants counted
	// (compiler.Options.MaxJobs).
	JobsPerRun int `yaml:"jobs-per-run" usage:"the most jobs of one run, matrix variants counted (0: compiler.DefaultMaxJobs, 1000)"`
	// LogBytes bounds a job's log (logs.Config.MaxLogBytes): past it the
	// log says it was truncated and the rest is discarded.
	LogBytes int64 `yaml:"log-bytes" usage:"the largest log of a job in bytes; the rest is discarded, with a marker (0: cikit.DefaultMaxLogBytes, 4 MiB)"`
	// FailTruncatedLogs fails a job whose log was truncated, with a
	// reason naming the limit, instead of keeping its result.
	FailTruncatedLogs bool `yaml:"fail-truncated-logs" usage:"fail a job whose log went past limits.log-bytes"`
}

// Log configures the process's structured log.
type Log struct {
	Level  string `yaml:"level" usage:"debug, info, warn or error"`
	Format string `yaml:"format" usage:"text or json"`
}

// Default returns the defaults: the embedded platform on 127.0.0.1:8080.
func Default() *Config {
	return &Config{
		Listen:          "127.0.0.1:8080",
		DataDir:         ".cikit",
		ShutdownTimeout: 30 * time.Second,
		HTTP: HTTP{
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
			MaxBodyBytesInFlight: 64 << 20, MinBodyRate: 32 << 10, BodyReadTimeout: 10 * time.Second,
			SourceRequestsPerMinute: 600, SourceBurst: 100, MaxSources: 10000,
		},
		Kafka:   Kafka{Partitions: 6, ReplicationFactor: -1, Group: "cikit"},
		Redis:   Redis{KeyPrefix: "cikit:"},
		VCS:     VCS{Provider: "local"},
		Runners: Runners{Local: -1, Sandbox: "auto", LeaseTTL: 30 * time.Second, Limits: defaultJobLimits()},
		Log:     Log{Level: "info", Format: "text"},
	}
}

// DefaultLabels are the labels a runner offers unless told otherwise:
// "self-hosted", its OS and architecture as GitHub names them ("linux",
// "x64"), and on Linux the labels of GitHub's hosted Ubuntu runners
// ("ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04"). A job asking for one
// of those runs on this host's system as it is; it is not an Ubuntu
// image. Jobs asking for labels no runner has (windows-latest, say) wait,
// and the API and the commit status say that no runner matches.
func DefaultLabels() []string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64", "386": "x86", "arm": "arm"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	osName := map[string]string{"darwin": "macos"}[runtime.GOOS]
	if osName == "" {
		osName = runtime.GOOS
	}
	labels := []string{"self-hosted", osName, arch}
	if runtime.GOOS == "linux" {
		labels = append(labels, "ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04")
	}
	return labels
}

// RunnerLabels are the local runners' labels: Runners.Labels, or
// DefaultLabels when it names none.
func (c *Config) RunnerLabels() []string {
	if len(c.Runners.Labels) == 0 {
		return DefaultLabels()
	}
	return c.Runners.Labels
}

// Embedded reports whether c runs on memory stores (no PostgreSQL).
func (c *Config) Embedded() bool { return c.Postgres.URL == "" }

// LocalRunners is how many runners the process starts itself.
func (c *Config) LocalRunners() int {
	switch {
	case c.Runners.Local >= 0:
		return c.Runners.Local
	case c.Embedded():
		return 2
	default:
		return 0
	}
}

// StatusProvider is where commit statuses go: "github", "gitlab" or
// "none".
func (c *Config) StatusProvider() string {
	switch {
	case c.VCS.Statuses != "":
		return c.VCS.Statuses
	case c.VCS.Provider == "local":
		return "none"
	default:
		return c.VCS.Provider
	}
}

// DecodeYAML reads a YAML file's settings over c. Unknown keys are errors
// naming their line, and so is a second document; a file of only comments
// sets nothing.
func (c *Config) DecodeYAML(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			// Only comments: nothing to apply.
			return nil
		}
		return fmt.Errorf("config: %w", err)
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("config: %w", err)
		case !emptyDocument(&extra):
			return fmt.Errorf("config: line %d: the file holds more than one YAML document", extra.Line)
		}
	}
}

// emptyDocument reports whether doc holds nothing, as a trailing "---"
// does.
func emptyDocument(doc *yaml.Node) bool {
	for _, n := range doc.Content {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!null" {
			return false
		}
	}
	return true
}

// Validate checks the settings that do not depend on the services, and
// returns every problem at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: must be host:port, such as :8080, not %q", c.Listen)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("public-url: must be an http or https URL, not %q", c.PublicURL)
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout: must be positive")
	}
	h := c.HTTP
	if h.ReadHeaderTimeout <= 0 || h.IdleTimeout <= 0 || h.BodyReadTimeout <= 0 {
		bad("http.read-header-timeout, http.idle-timeout and http.body-read-timeout: must be positive")
	}
	if h.MaxHeaderBytes < 4<<10 {
		bad("http.max-header-bytes: must be at least 4096")
	}
	if h.MaxBodyBytesInFlight < 1<<20 {
		bad("http.max-body-bytes-in-flight: must be at least 1 MiB (1048576)")
	}
	if h.MinBodyRate < 1 {
		bad("http.min-body-rate: must be at least 1 byte per second")
	}
	if h.SourceRequestsPerMinute < 0 {
		bad("http.source-requests-per-minute: must not be negative (0: no limit)")
	}
	if h.SourceRequestsPerMinute > 0 && h.SourceBurst < 1 {
		bad("http.source-burst: must be at least 1 with a source-requests-per-minute")
	}
	if h.MaxSources < 1 {
		bad("http.max-sources: must be at least 1")
	}
	for _, p := range h.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				bad("http.trusted-proxies: %q is neither an IP address nor a CIDR prefix", p)
			}
		}
	}
	switch c.VCS.Provider {
	case "local", "github", "gitlab":
	default:
		bad("vcs.provider: must be local, github or gitlab, not %q", c.VCS.Provider)
	}
	switch c.VCS.Statuses {
	case "", "github", "gitlab", "none":
	default:
		bad("vcs.statuses: must be github, gitlab or none, not %q", c.VCS.Statuses)
	}
	uses := func(p string) bool { return c.VCS.Provider == p || c.StatusProvider() == p }
	if uses("github") {
		gh := c.VCS.GitHub
		if (gh.Token == "") == (gh.AppID == 0) {
			bad("vcs.github: set exactly one of token and app-id")
		}
		if gh.AppID != 0 && gh.PrivateKeyFile == "" {
			bad("vcs.github.private-key-file: required with app-id")
		}
		if gh.CheckRuns && gh.AppID == 0 {
			bad("vcs.github.check-runs: needs a GitHub App (app-id)")
		}
	}
	if uses("gitlab") && c.VCS.GitLab.Token == "" {
		bad("vcs.gitlab.token: required")
	}
	switch c.Runners.Sandbox {
	case "auto", "require", "off":
	default:
		bad("runners.sandbox: must be auto, require or off, not %q", c.Runners.Sandbox)
	}
	if c.Runners.LeaseTTL < 3*time.Second {
		bad("runners.lease-ttl: must be at least 3s")
	}
	if g, least := c.Runners.ReaperGrace, lease.MinReaperGrace(c.Runners.LeaseTTL); g < 0 || g > 0 && g <= least {
		bad("runners.reaper-grace: must be longer than %s (the job supervisor's kill margin plus clock drift over runners.lease-ttl), or 0 for the default", least)
	}
	if c.Kafka.Partitions < 1 {
		bad("kafka.partitions: must be at least 1")
	}
	if c.Kafka.ReplicationFactor == 0 || c.Kafka.ReplicationFactor < -1 {
		bad("kafka.replication-factor: must be at least 1, or -1 for the brokers' default")
	}
	if c.Postgres.MaxConns < 0 {
		bad("postgres.max-conns: must not be negative")
	}
	if c.Runners.Local < -1 {
		bad("runners.local: must be at least 0, or -1 for the default")
	}
	if l := c.Runners.Limits; l.Processes < 0 || l.MemoryMiB < 0 || l.CPUs < 0 || l.CPUTime < 0 || l.AddressSpaceMiB < 0 || l.FileSizeMiB < 0 || l.TmpMiB < 0 {
		bad("runners.limits: must not be negative (0 switches a limit off)")
	} else if l.Processes > 0 && l.Processes < process.MinProcesses {
		bad("runners.limits.processes: must be at least %d, or 0 for no limit", process.MinProcesses)
	} else if c.Runners.Sandbox == "off" && l != defaultJobLimits() && l != (JobLimits{}) {
		bad("runners.limits: bound sandboxed jobs only, and runners.sandbox is off")
	}
	ri := c.Runners.Images
	if c.Runners.Sandbox == "off" && !reflect.ValueOf(ri).IsZero() {
		bad("runners.images: jobs run in images only in the sandbox, and runners.sandbox is off")
	}
	if _, err := imagePairs(ri.Labels, true); err != nil {
		bad("runners.images.labels: %v", err)
	}
	if _, err := imagePairs(ri.Mirrors, false); err != nil {
		bad("runners.images.mirrors: %v", err)
	}
	switch ri.HostJobs {
	case "", "true", "false":
	default:
		bad("runners.images.host-jobs: must be true or false, not %q", ri.HostJobs)
	}
	switch image.PullPolicy(ri.PullPolicy) {
	case "", image.PullAlways, image.PullIfNotPresent, image.PullNever:
	default:
		bad("runners.images.pull-policy: must be %s, %s or %s, not %q", image.PullAlways, image.PullIfNotPresent, image.PullNever, ri.PullPolicy)
	}
	if ri.BudgetBytes < 0 {
		bad("runners.images.budget-bytes: must not be negative (0: the default)")
	}
	if err := process.ValidatePassEnv(c.Runners.PassEnv); err != nil {
		bad("runners.pass-env: %v", err)
	}
	if c.Runners.TenantLimit < 0 {
		bad("runners.tenant-limit: must not be negative")
	}
	if c.Limits.PipelineFileBytes < 0 {
		bad("limits.pipeline-file-bytes: must not be negative")
	}
	if a := c.Artifacts; a.ExpireIn < 0 || a.MaxExpireIn < 0 || a.MaxArchiveBytes < 0 || a.CacheBudgetBytes < -1 || a.CacheMaxAge < 0 || a.PruneInterval < 0 {
		bad("artifacts: durations and sizes must not be negative (cache-budget-bytes may be -1: no budget)")
	}
	if c.Limits.JobsPerRun < 0 {
		bad("limits.jobs-per-run: must not be negative")
	}
	if c.Limits.LogBytes < 0 {
		bad("limits.log-bytes: must not be negative")
	}
	if c.Kafka.Group == "" {
		bad("kafka.group: must not be empty")
	}
	for i, k := range c.Runners.SigningKeys {
		if len(k) < 32 {
			bad("runners.signing-keys[%d]: must be at least 32 bytes", i)
		}
	}
	if !c.Embedded() {
		if len(c.Runners.RegistrationTokens) == 0 {
			bad("runners.registration-tokens: required with PostgreSQL (servers sharing the work must agree)")
		}
		if len(c.Runners.SigningKeys) == 0 {
			bad("runners.signing-keys: required with PostgreSQL (servers sharing the work must agree)")
		}
	}
	if len(c.Webhooks.GitHubSecrets)+len(c.Webhooks.GitLabTokens)+len(c.Webhooks.StandardSecrets) == 0 && !c.Embedded() {
		bad("webhooks: set at least one secret (github-secrets, gitlab-tokens or standard-secrets)")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level: must be debug, info, warn or error, not %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format: must be text or json, not %q", c.Log.Format)
	}
	if c.S3.Bucket == "" && c.S3 != (S3{}) {
		// Logs would go to the data directory, which a production pod
		// loses when it goes.
		bad("s3.bucket: required when other s3 settings are set")
	}
	if (c.S3.AccessKeyID == "") != (c.S3.SecretAccessKey == "") {
		bad("s3: set both access-key-id and secret-access-key, or neither")
	}
	for i, k := range c.Secrets.Keys {
		if _, err := secrets.ParseKey(k); err != nil {
			bad("secrets.keys[%d]: %v", i, err)
		}
	}
	if c.Secrets.TokenTTL < 0 || c.Secrets.TokenTTL > time.Hour {
		bad("secrets.token-ttl: must be between 0 (the default, 10m) and 1h")
	}
	if pr := c.Secrets.PostgresRoles; pr.AdminURL != "" && (pr.URL == "" || len(pr.Roles) == 0) {
		bad("secrets.postgres-roles: set url and roles with admin-url")
	}
	errs = append(errs, c.validateTrust()...)
	return errors.Join(errs...)
}

// Secrets configure the secrets jobs get at run time, and the OIDC ID
// tokens the platform issues them (see docs/secrets.md).
type Secrets struct {
	// Keys seal the stored secrets and the OIDC signing keys, "ID:BASE64"
	// of 32 bytes each (openssl rand -base64 32): the first seals, all
	// open, so a key is rotated by putting a new one first. Required with
	// PostgreSQL for the built-in store; the embedded platform makes one
	// up and keeps it in the data directory.
	Keys []string `yaml:"keys" usage:"keys sealing stored secrets and OIDC signing keys, ID:BASE64 of 32 bytes; the first seals (embedded default: one kept in the data directory)"`
	// TokenTTL is how long a job's ID token is valid.
	TokenTTL time.Duration `yaml:"token-ttl" usage:"how long the OIDC ID tokens of jobs are valid (at most 1h)"`
	// AWS reads secrets from AWS Secrets Manager too, when Region is set.
	AWS AWSSecrets `yaml:"aws"`
	// PostgresRoles makes dynamic database credentials, when AdminURL is
	// set.
	PostgresRoles PostgresRoles `yaml:"postgres-roles"`
}

// AWSSecrets is AWS Secrets Manager as a secret provider: secret NAME of
// scope S is the AWS secret Prefix + S's path + "/" + NAME.
type AWSSecrets struct {
	Region   string `yaml:"region" usage:"the AWS region of Secrets Manager (empty: not used)"`
	Endpoint string `yaml:"endpoint" usage:"a Secrets Manager endpoint URL (empty: AWS's)"`
	Prefix   string `yaml:"prefix" usage:"the prefix of cikit's secret names in Secrets Manager (default cikit/)"`
}

// PostgresRoles is the dynamic provider of PostgreSQL credentials: each
// job naming one of Roles gets a login role of its own, valid for TTL,
// renewed while the job runs and dropped when it ends.
type PostgresRoles struct {
	AdminURL string        `yaml:"admin-url" usage:"a PostgreSQL URL allowed to CREATE ROLE, for dynamic credentials (empty: not used)"`
	URL      string        `yaml:"url" usage:"the URL jobs connect with; its user and password become the credential's"`
	Roles    []string      `yaml:"roles" usage:"NAME=ROLE@SCOPE[@SCOPE...]: secret NAME is a fresh login role in ROLE, for jobs of the scopes (repo:acme/api, org:acme)"`
	TTL      time.Duration `yaml:"ttl" usage:"how long a dynamic credential lives unless renewed (0: 30m)"`
}

// envName turns a setting's dotted name into its environment variable.
func envName(path string) string {
	return "CIKIT_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// Bounds of the policy settings.
const (
	// MaxEnvironments bounds policy.environments.
	MaxEnvironments = 256
	// MaxWaitTimer is the longest wait timer of an environment, as
	// GitHub's (30 days).
	MaxWaitTimer = 30 * 24 * time.Hour
)

// validateTrust checks the auth and policy settings.
func (c *Config) validateTrust() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if a := c.HTTP.WebhookListen; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("http.webhook-listen: must be host:port, not %q", a)
		}
	}
	o := c.Auth.OIDC
	if o.Issuer != "" {
		if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("auth.oidc.issuer: %q is not an http(s) URL", o.Issuer)
		}
		if o.ClientID == "" {
			bad("auth.oidc.client-id: required with auth.oidc.issuer")
		}
	} else if o.ClientID != "" || o.ClientSecret != "" {
		bad("auth.oidc.client-id and client-secret need auth.oidc.issuer")
	}
	for _, r := range o.DefaultRoles {
		if _, _, _, err := ParseRoleGrant(r); err != nil {
			bad("auth.oidc.default-roles: %v", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"auth.session-ttl", c.Auth.SessionTTL}, {"auth.session-idle", c.Auth.SessionIdle}, {"auth.token-ttl", c.Auth.TokenTTL}, {"auth.token-max-ttl", c.Auth.TokenMaxTTL}, {"policy.approval-expiry", c.Policy.ApprovalExpiry}} {
		if d.v < 0 {
			bad("%s: must not be negative, got %s", d.name, d.v)
		}
	}
	if c.Auth.TokenMaxTTL > 0 && c.Auth.TokenTTL > c.Auth.TokenMaxTTL {
		bad("auth.token-ttl (%s) is longer than auth.token-max-ttl (%s)", c.Auth.TokenTTL, c.Auth.TokenMaxTTL)
	}
	if c.Policy.Watch < -1 {
		bad("policy.watch: %s; 0 for the default, -1ns never", c.Policy.Watch)
	}
	pattern := func(setting, p string) {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			bad("%s: %q is not a pattern (path.Match: * ? [ranges])", setting, p)
		}
	}
	for _, p := range c.Policy.ProtectedBranches {
		pattern("policy.protected-branches", p)
	}
	for _, p := range c.Policy.ProtectedTags {
		pattern("policy.protected-tags", p)
	}
	if len(c.Policy.Environments) > MaxEnvironments {
		bad("policy.environments: %d rules; at most %d", len(c.Policy.Environments), MaxEnvironments)
	}
	for i, e := range c.Policy.Environments {
		at := fmt.Sprintf("policy.environments[%d]", i)
		if e.Name == "" || len(e.Name) > 255 {
			bad("%s.name: must be 1 to 255 bytes, got %q", at, e.Name)
		}
		for _, p := range e.Repos {
			pattern(at+".repos", p)
		}
		for _, p := range e.Refs {
			pattern(at+".refs", p)
		}
		if len(e.Reviewers) > 64 {
			bad("%s.reviewers: %d; at most 64", at, len(e.Reviewers))
		}
		for _, r := range e.Reviewers {
			if r == "" || len(r) > 64 || strings.ContainsAny(r, " \t\r\n,") {
				bad("%s.reviewers: %q is not a login or role:approve", at, r)
			}
		}
		if e.WaitTimer < 0 || e.WaitTimer > MaxWaitTimer {
			bad("%s.wait-timer: %s; from 0 to 30 days", at, e.WaitTimer)
		}
	}
	return errs
}

// ParseRoleGrant parses ROLE, ROLE:ORG or ROLE:ORG/REPO, as
// auth.oidc.default-roles writes a grant: the role's name and where it
// applies (org and repo empty: the whole platform). The last path
// element is the repository: "read:acme/platform/api" is repository api
// of the GitLab group acme/platform.
func ParseRoleGrant(s string) (role, org, repo string, err error) {
	role, where, placed := strings.Cut(s, ":")
	if placed && where == "" {
		return "", "", "", fmt.Errorf("%q: the place after the colon is missing: ROLE, ROLE:ORG or ROLE:ORG/REPO", s)
	}
	switch role {
	case "read", "trigger", "approve", "admin":
	default:
		return "", "", "", fmt.Errorf("%q: the role must be read, trigger, approve or admin", s)
	}
	if where == "" {
		return role, "", "", nil
	}
	if i := strings.LastIndexByte(where, '/'); i >= 0 {
		org, repo = where[:i], where[i+1:]
	} else {
		org = where
	}
	if org == "" || strings.Contains(where, "//") || strings.HasSuffix(where, "/") || strings.ContainsAny(where, " \t\r\n") {
		return "", "", "", fmt.Errorf("%q: the place must be ORG or ORG/REPO", s)
	}
	return role, org, repo, nil
}
