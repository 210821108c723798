package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit/fleet/image"
)

// production is a valid configuration with every service outside the
// process.
func production() *Config {
	c := Default()
	c.Postgres.URL = "postgres://cikit@db/cikit"
	c.Kafka.Brokers = []string{"kafka:9092"}
	c.Redis.URL = "redis://redis:6379/0"
	c.S3.Bucket = "logs"
	c.VCS.Provider = "github"
	c.VCS.GitHub.Token = "ghp_token"
	c.Webhooks.GitHubSecrets = []string{"hook"}
	c.Runners.RegistrationTokens = []string{"register"}
	c.Runners.SigningKeys = []string{strings.Repeat("k", 32)}
	return c
}

// load runs a Loader over a fresh flag set with args and environ.
func load(t *testing.T, args, environ []string) (*Config, []string, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := NewLoader(fs)
	require.NoError(t, fs.Parse(args))
	return l.Load(environ)
}

// writeFile writes a config file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Default()
	require.NoError(t, c.Validate())
	require.True(t, c.Embedded())
	require.Equal(t, 2, c.LocalRunners(), "the embedded platform runs its own runners")
	require.Equal(t, "none", c.StatusProvider(), "local repositories have nowhere to report to")

	loaded, warnings, err := load(t, nil, nil)
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, c, loaded, "nothing given: the defaults")
}

func TestProductionDerived(t *testing.T) {
	t.Parallel()
	c := production()
	require.NoError(t, c.Validate())
	require.False(t, c.Embedded())
	require.Equal(t, 0, c.LocalRunners(), "with PostgreSQL runners are `cikit runner` processes")
	require.Equal(t, "github", c.StatusProvider())
	c.Runners.Local = 3
	require.Equal(t, 3, c.LocalRunners())
	c.VCS.Statuses = "none"
	require.Equal(t, "none", c.StatusProvider())
}

func TestFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `# cikit serve
listen: ":9000"
shutdown-timeout: 1m30s
postgres:
  max-conns: 12
  migrate: true
kafka:
  brokers: [a:9092, b:9092]
runners:
  labels:
    - linux
    - x64
log:
  format: json
`)
	c, warnings, err := load(t, []string{"-config", path}, nil)
	require.NoError(t, err)
	require.Empty(t, warnings)
	want := Default()
	want.Listen = ":9000"
	want.ShutdownTimeout = 90 * time.Second
	want.Postgres.MaxConns = 12
	want.Postgres.Migrate = true
	want.Kafka.Brokers = []string{"a:9092", "b:9092"}
	want.Runners.Labels = []string{"linux", "x64"}
	want.Log.Format = "json"
	require.Equal(t, want, c, "the file's settings over the defaults, the rest untouched")

	// CIKIT_CONFIG names the file when -config does not.
	c, _, err = load(t, nil, []string{"CIKIT_CONFIG=" + path})
	require.NoError(t, err)
	require.Equal(t, ":9000", c.Listen)

	_, _, err = load(t, []string{"-config", filepath.Join(t.TempDir(), "missing.yaml")}, nil)
	require.ErrorContains(t, err, "missing.yaml")
}

func TestDecodeYAML(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		err      []string // substrings of the error; none: no error
	}{
		{name: "empty", in: ""},
		{name: "only comments", in: "# everything commented out\n# listen: :1\n"},
		{name: "null", in: "~\n"},
		{name: "leading document marker", in: "---\nlisten: :1\n"},
		{name: "trailing document marker", in: "listen: :1\n---\n"},
		{name: "document end marker", in: "listen: :1\n...\n"},
		{name: "unknown key", in: "listen: :1\nkafka:\n  partitions: 3\n  brokerz: [a]\n", err: []string{"line 4", "brokerz"}},
		{name: "unknown top-level key", in: "\n\nlisten_addr: :1\n", err: []string{"line 3", "listen_addr"}},
		{name: "second document", in: "listen: :1\n---\nlisten: :2\n", err: []string{"line 2", "more than one YAML document"}},
		{name: "second document after comments", in: "listen: :1\n---\n# the other\nlog: {level: warn}\n", err: []string{"more than one YAML document"}},
		{name: "syntax error in the second document", in: "listen: :1\n---\nlog: [\n", err: []string{"config:"}},
		{name: "duration without unit", in: "shutdown-timeout: 30\n", err: []string{"line 1", "time.Duration"}},
		{name: "bad duration", in: "runners:\n  lease-ttl: soon\n", err: []string{"line 2", "soon"}},
		{name: "string for a number", in: "kafka:\n  partitions: many\n", err: []string{"line 2", "many"}},
		{name: "scalar for a list", in: "kafka:\n  brokers: {a: b}\n", err: []string{"line 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			err := c.DecodeYAML(strings.NewReader(tc.in))
			if len(tc.err) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, s := range tc.err {
				require.ErrorContains(t, err, s)
			}
		})
	}

	c := Default()
	require.NoError(t, c.DecodeYAML(strings.NewReader("kafka:\n  group: ci\n")))
	require.Equal(t, Kafka{Partitions: 6, ReplicationFactor: -1, Group: "ci"}, c.Kafka, "a partial section keeps the other defaults")

	c = Default()
	require.NoError(t, c.DecodeYAML(strings.NewReader("# nothing\n")))
	require.Equal(t, Default(), c)

	c = Default()
	c.Kafka.Brokers = []string{"old:1", "old:2"}
	require.NoError(t, c.DecodeYAML(strings.NewReader("kafka:\n  brokers: [new:1]\n")))
	require.Equal(t, []string{"new:1"}, c.Kafka.Brokers, "a list is replaced, not merged")

	c = Default()
	require.ErrorContains(t, c.DecodeYAML(iotestErrReader{}), "disk on fire")
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestPrecedence(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
postgres:
  url: postgres://file/db
redis:
  url: redis://file:6379/0
log:
  level: warn
kafka:
  partitions: 3
`)
	environ := []string{
		"CIKIT_POSTGRES_URL=postgres://env/db",
		"CIKIT_REDIS_URL=redis://env:6379/0",
		"CIKIT_KAFKA_BROKERS=a:9092, b:9092,,c:9092",
		"CIKIT_RUNNERS_REGISTRATION_TOKENS=one,two",
		"CIKIT_RUNNERS_SIGNING_KEYS=" + strings.Repeat("x", 32),
		"CIKIT_WEBHOOKS_STANDARD_SECRETS=whsec_a",
		"CIKIT_POSTGRES_MIGRATE=true",
		"CIKIT_SHUTDOWN_TIMEOUT=5s",
		"PATH=/bin",
	}
	args := []string{"-config", path, "-redis.url", "redis://flag:6379/1", "-kafka.brokers", "z:9092", "-postgres.migrate=false", "-runners.network"}
	c, warnings, err := load(t, args, environ)
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, "postgres://env/db", c.Postgres.URL, "the environment over the file")
	require.Equal(t, "redis://flag:6379/1", c.Redis.URL, "a flag over the environment and the file")
	require.Equal(t, "warn", c.Log.Level, "the file over the defaults")
	require.Equal(t, 3, c.Kafka.Partitions)
	require.Equal(t, []string{"z:9092"}, c.Kafka.Brokers, "a flag's list replaces the environment's")
	require.Equal(t, []string{"one", "two"}, c.Runners.RegistrationTokens, "comma-separated")
	require.False(t, c.Postgres.Migrate, "-postgres.migrate=false over CIKIT_POSTGRES_MIGRATE=true")
	require.True(t, c.Runners.Network, "a boolean flag without a value is true")
	require.Equal(t, 5*time.Second, c.ShutdownTimeout)

	c, _, err = load(t, []string{"-config", path}, environ)
	require.NoError(t, err)
	require.Equal(t, []string{"a:9092", "b:9092", "c:9092"}, c.Kafka.Brokers, "spaces trimmed, empty items dropped")
	require.True(t, c.Postgres.Migrate)

	// The last of a repeated flag wins.
	c, _, err = load(t, []string{"-log.level", "debug", "-log.level", "error"}, nil)
	require.NoError(t, err)
	require.Equal(t, "error", c.Log.Level)
}

func TestBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, flag, value, want string
	}{
		{"CIKIT_SHUTDOWN_TIMEOUT", "-shutdown-timeout", "30", `shutdown-timeout: "30" is not a duration`},
		{"CIKIT_RUNNERS_LEASE_TTL", "-runners.lease-ttl", "1 minute", `runners.lease-ttl: "1 minute" is not a duration`},
		{"CIKIT_KAFKA_PARTITIONS", "-kafka.partitions", "six", `kafka.partitions: "six" is not an integer`},
		{"CIKIT_VCS_GITHUB_APP_ID", "-vcs.github.app-id", "1.5", `vcs.github.app-id: "1.5" is not an integer`},
		{"CIKIT_POSTGRES_MIGRATE", "-postgres.migrate", "maybe", `postgres.migrate: "maybe" is not a boolean`},
	} {
		_, _, err := load(t, nil, []string{tc.env + "=" + tc.value})
		require.ErrorContains(t, err, "$"+tc.env+": "+tc.want, "from the environment")
		_, _, err = load(t, []string{tc.flag + "=" + tc.value}, nil)
		require.ErrorContains(t, err, "config: -"+tc.want, "from a flag")
	}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	NewLoader(fs)
	require.ErrorContains(t, fs.Parse([]string{"-postgres.ur", "x"}), "flag provided but not defined: -postgres.ur")
}

func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	_, warnings, err := load(t, nil, []string{
		"CIKIT_POSTGRESS_URL=postgres://typo/db",
		"CIKIT_REGISTRATION_TOKEN=runner-token",
		"CIKIT_CONFIG=",
		"CIKIT_TEST_DATABASE_URL=postgres://test/db",
		"CIKIT_LOG_LEVEL=debug",
		"OTHER=1",
		"CIKIT_NO_EQUALS",
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"$CIKIT_POSTGRESS_URL names no setting; ignored",
		"$CIKIT_REGISTRATION_TOKEN names no setting; ignored",
	}, warnings, "sorted; CIKIT_CONFIG and CIKIT_TEST_* are no settings but known")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"listen", func(c *Config) { c.Listen = "" }, "listen: must be host:port"},
		{"listen without port", func(c *Config) { c.Listen = "8080" }, `listen: must be host:port, such as :8080, not "8080"`},
		{"public url without scheme", func(c *Config) { c.PublicURL = "ci.example.com" }, `public-url: must be an http or https URL, not "ci.example.com"`},
		{"shutdown timeout", func(c *Config) { c.ShutdownTimeout = 0 }, "shutdown-timeout: must be positive"},
		{"provider", func(c *Config) { c.VCS.Provider = "bitbucket" }, `vcs.provider: must be local, github or gitlab, not "bitbucket"`},
		{"statuses", func(c *Config) { c.VCS.Statuses = "slack" }, `vcs.statuses: must be github, gitlab or none, not "slack"`},
		{"github token and app", func(c *Config) { c.VCS.GitHub.AppID = 7; c.VCS.GitHub.PrivateKeyFile = "key.pem" }, "vcs.github: set exactly one of token and app-id"},
		{"github neither", func(c *Config) { c.VCS.GitHub.Token = "" }, "vcs.github: set exactly one of token and app-id"},
		{"github app without key", func(c *Config) { c.VCS.GitHub.Token = ""; c.VCS.GitHub.AppID = 7 }, "vcs.github.private-key-file: required with app-id"},
		{"check runs with a token", func(c *Config) { c.VCS.GitHub.CheckRuns = true }, "vcs.github.check-runs: needs a GitHub App"},
		{"github statuses need github", func(c *Config) { c.VCS.Provider = "local"; c.VCS.Statuses = "github"; c.VCS.GitHub.Token = "" }, "vcs.github: set exactly one"},
		{"gitlab token", func(c *Config) { c.VCS.Provider = "gitlab" }, "vcs.gitlab.token: required"},
		{"sandbox", func(c *Config) { c.Runners.Sandbox = "maybe" }, `runners.sandbox: must be auto, require or off, not "maybe"`},
		{"lease ttl", func(c *Config) { c.Runners.LeaseTTL = time.Second }, "runners.lease-ttl: must be at least 3s"},
		{"reaper grace", func(c *Config) { c.Runners.ReaperGrace = 2 * time.Second }, "runners.reaper-grace: must be longer than 2.03s"},
		{"negative reaper grace", func(c *Config) { c.Runners.ReaperGrace = -time.Second }, "runners.reaper-grace: must be longer than"},
		{"partitions", func(c *Config) { c.Kafka.Partitions = 0 }, "kafka.partitions: must be at least 1"},
		{"replication factor", func(c *Config) { c.Kafka.ReplicationFactor = 0 }, "kafka.replication-factor: must be at least 1"},
		{"group", func(c *Config) { c.Kafka.Group = "" }, "kafka.group: must not be empty"},
		{"max conns", func(c *Config) { c.Postgres.MaxConns = -1 }, "postgres.max-conns: must not be negative"},
		{"local runners", func(c *Config) { c.Runners.Local = -2 }, "runners.local: must be at least 0"},
		{"tenant limit", func(c *Config) { c.Runners.TenantLimit = -1 }, "runners.tenant-limit: must not be negative"},
		{"negative limit", func(c *Config) { c.Runners.Limits.MemoryMiB = -1 }, "runners.limits: must not be negative"},
		{"few processes", func(c *Config) { c.Runners.Limits.Processes = 4 }, "runners.limits.processes: must be at least 32"},
		{"limits without a sandbox", func(c *Config) { c.Runners.Sandbox = "off"; c.Runners.Limits.Processes = 100 }, "runners.limits: bound sandboxed jobs only"},
		{"images without a sandbox", func(c *Config) { c.Runners.Sandbox = "off"; c.Runners.Images.Default = "alpine:3.20" }, "runners.images: jobs run in images only in the sandbox, and runners.sandbox is off"},
		{"image label without image", func(c *Config) { c.Runners.Images.Labels = []string{"ubuntu-latest"} }, `runners.images.labels: "ubuntu-latest" is not KEY=VALUE with neither of them empty`},
		{"image label twice", func(c *Config) { c.Runners.Images.Labels = []string{"l=a:1", "l=b:1"} }, "runners.images.labels: l is given twice"},
		{"mirror without host", func(c *Config) { c.Runners.Images.Mirrors = []string{"=mirror.gcr.io"} }, `runners.images.mirrors: "=mirror.gcr.io" is not KEY=VALUE`},
		{"host jobs", func(c *Config) { c.Runners.Images.HostJobs = "maybe" }, `runners.images.host-jobs: must be true or false, not "maybe"`},
		{"pull policy", func(c *Config) { c.Runners.Images.PullPolicy = "sometimes" }, `runners.images.pull-policy: must be always, if-not-present or never, not "sometimes"`},
		{"image budget", func(c *Config) { c.Runners.Images.BudgetBytes = -1 }, "runners.images.budget-bytes: must not be negative"},
		{"pass cikit's own", func(c *Config) { c.Runners.PassEnv = []string{"CIKIT_POSTGRES_URL"} }, "runners.pass-env: CIKIT_POSTGRES_URL: CIKIT* variables"},
		{"short signing key", func(c *Config) { c.Runners.SigningKeys = append(c.Runners.SigningKeys, "short") }, "runners.signing-keys[1]: must be at least 32 bytes"},
		{"no registration tokens", func(c *Config) { c.Runners.RegistrationTokens = nil }, "runners.registration-tokens: required with PostgreSQL"},
		{"no signing keys", func(c *Config) { c.Runners.SigningKeys = nil }, "runners.signing-keys: required with PostgreSQL"},
		{"no webhook secrets", func(c *Config) { c.Webhooks.GitHubSecrets = nil }, "webhooks: set at least one secret"},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, `log.level: must be debug, info, warn or error, not "verbose"`},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, `log.format: must be text or json, not "xml"`},
		{"s3 endpoint without bucket", func(c *Config) { c.S3.Bucket = ""; c.S3.Endpoint = "http://minio:9000" }, "s3.bucket: required when other s3 settings are set"},
		{"s3 region without bucket", func(c *Config) { c.S3.Bucket = ""; c.S3.Region = "eu-west-1" }, "s3.bucket: required when other s3 settings are set"},
		{"s3 key without secret", func(c *Config) { c.S3.AccessKeyID = "AKIA" }, "s3: set both access-key-id and secret-access-key, or neither"},
		{"header timeout", func(c *Config) { c.HTTP.ReadHeaderTimeout = 0 }, "http.read-header-timeout, http.idle-timeout and http.body-read-timeout: must be positive"},
		{"body timeout", func(c *Config) { c.HTTP.BodyReadTimeout = -time.Second }, "http.read-header-timeout, http.idle-timeout and http.body-read-timeout: must be positive"},
		{"header bytes", func(c *Config) { c.HTTP.MaxHeaderBytes = 100 }, "http.max-header-bytes: must be at least 4096"},
		{"bytes in flight", func(c *Config) { c.HTTP.MaxBodyBytesInFlight = 1000 }, "http.max-body-bytes-in-flight: must be at least 1 MiB"},
		{"body rate", func(c *Config) { c.HTTP.MinBodyRate = 0 }, "http.min-body-rate: must be at least 1 byte per second"},
		{"source rate", func(c *Config) { c.HTTP.SourceRequestsPerMinute = -1 }, "http.source-requests-per-minute: must not be negative"},
		{"source burst", func(c *Config) { c.HTTP.SourceBurst = 0 }, "http.source-burst: must be at least 1"},
		{"max sources", func(c *Config) { c.HTTP.MaxSources = 0 }, "http.max-sources: must be at least 1"},
		{"trusted proxies", func(c *Config) { c.HTTP.TrustedProxies = []string{"10.0.0.0/8", "proxy.local"} }, `http.trusted-proxies: "proxy.local" is neither an IP address nor a CIDR prefix`},
		{"s3 secret without key", func(c *Config) { c.S3.SecretAccessKey = "shh" }, "s3: set both access-key-id and secret-access-key, or neither"},
		{"secrets key not ID:BASE64", func(c *Config) { c.Secrets.Keys = []string{"no-colon"} }, "secrets.keys[0]: secrets: invalid: a key is ID:BASE64"},
		{"secrets key too short", func(c *Config) { c.Secrets.Keys = []string{"k1:c2hvcnQ="} }, `secrets.keys[0]: secrets: invalid: key "k1" has 5 bytes; a key has 32`},
		{"token ttl", func(c *Config) { c.Secrets.TokenTTL = 2 * time.Hour }, "secrets.token-ttl: must be between 0"},
		{"postgres roles half set", func(c *Config) { c.Secrets.PostgresRoles.AdminURL = "postgres://db/app" }, "secrets.postgres-roles: set url and roles with admin-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := production()
			tc.change(c)
			err := c.Validate()
			require.ErrorContains(t, err, tc.want)
		})
	}

	// The embedded platform needs no secrets: it makes its own.
	c := Default()
	c.Runners.SigningKeys = nil
	require.NoError(t, c.Validate())

	// Limits switched off, with the sandbox or without it, and the
	// defaults without it are fine.
	c = production()
	c.Runners.Limits = JobLimits{}
	require.NoError(t, c.Validate())
	c.Runners.Sandbox = "off"
	require.NoError(t, c.Validate())
	c.Runners.Limits = Default().Runners.Limits
	require.NoError(t, c.Validate())

	// Every problem at once, one per line.
	c = production()
	c.Listen = ""
	c.VCS.Provider = "svn"
	c.Runners.RegistrationTokens = nil
	c.Runners.SigningKeys = []string{"short"}
	c.Log.Format = "xml"
	err := c.Validate()
	require.Error(t, err)
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined, "errors.Join")
	require.Len(t, joined.Unwrap(), 5, err.Error())
	require.Len(t, strings.Split(err.Error(), "\n"), 5)

	// Load validates.
	_, _, err = load(t, nil, []string{"CIKIT_POSTGRES_URL=postgres://db/cikit"})
	require.ErrorContains(t, err, "runners.registration-tokens: required with PostgreSQL")
	require.ErrorContains(t, err, "webhooks: set at least one secret")
}

func TestSettings(t *testing.T) {
	t.Parallel()
	c := Default()
	settings := c.Settings()
	require.NotEmpty(t, settings)
	names, envs := map[string]bool{}, map[string]bool{}
	for _, s := range settings {
		require.NotEmpty(t, strings.TrimSpace(s.Usage), "%s has no usage text", s.Name)
		require.False(t, names[s.Name], "two settings named %s", s.Name)
		require.False(t, envs[s.Env], "two settings read %s", s.Env)
		names[s.Name], envs[s.Env] = true, true
		require.Equal(t, envName(s.Name), s.Env)
		require.Regexp(t, `^CIKIT_[A-Z0-9_]+$`, s.Env)
		require.NotEqual(t, EnvConfig, s.Env)
		require.False(t, strings.HasPrefix(s.Env, "CIKIT_TEST_"), "%s would be taken for a test variable", s.Env)
	}
	require.Equal(t, "listen", settings[0].Name, "in the order of the struct")
	require.True(t, names["vcs.github.private-key-file"] && envs["CIKIT_VCS_GITHUB_PRIVATE_KEY_FILE"])
	require.True(t, envs["CIKIT_WEBHOOKS_GITHUB_SECRETS"] && envs["CIKIT_RUNNERS_REGISTRATION_TOKENS"] && envs["CIKIT_RUNNERS_SIGNING_KEYS"])

	// Every setting has a flag, and the YAML file knows every name: a
	// file naming each one, null (which leaves it be), decodes.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	NewLoader(fs)
	file := map[string]any{}
	for _, s := range settings {
		require.NotNil(t, fs.Lookup(s.Name), "no flag -%s", s.Name)
		m := file
		parts := strings.Split(s.Name, ".")
		for _, p := range parts[:len(parts)-1] {
			if m[p] == nil {
				m[p] = map[string]any{}
			}
			m = m[p].(map[string]any)
		}
		m[parts[len(parts)-1]] = nil
	}
	require.NotNil(t, fs.Lookup("config"))
	data, err := yaml.Marshal(file)
	require.NoError(t, err)
	c = Default()
	require.NoError(t, c.DecodeYAML(bytes.NewReader(data)), string(data))
	require.Equal(t, Default(), c)

	// Set reads what String writes.
	c = Default()
	for _, s := range c.Settings() {
		require.NoError(t, s.Set(s.String()), s.Name)
	}
	require.Equal(t, Default(), c)
}

func TestHelpHidesSecrets(t *testing.T) {
	t.Parallel()
	base := production()
	base.Postgres.URL = "postgres://cikit:pg-password@db/cikit"
	base.Redis.URL = "redis://:redis-password@redis:6379/0"
	base.S3.AccessKeyID = "AKIAEXAMPLEKEYID"
	base.S3.SecretAccessKey = "s3-secret-access-key"
	base.VCS.GitHub.Token = "ghp_github-token"
	base.VCS.GitLab.Token = "glpat-gitlab-token"
	base.Webhooks = Webhooks{GitHubSecrets: []string{"gh-hook-secret"}, GitLabTokens: []string{"gl-hook-token"}, StandardSecrets: []string{"whsec_standard"}}
	base.Runners.RegistrationTokens = []string{"reg-tok-value"}
	base.Runners.SigningKeys = []string{"sign-with-this-32-byte-or-longer-key"}
	secrets := []string{"pg-password", "redis-password", "AKIAEXAMPLEKEYID", "s3-secret-access-key", "ghp_github-token", "glpat-gitlab-token",
		"gh-hook-secret", "gl-hook-token", "whsec_standard", "reg-tok-value", "sign-with-this"}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	newLoader(fs, base)
	fs.PrintDefaults()
	for _, s := range secrets {
		require.NotContains(t, help.String(), s)
	}
	// Other defaults are shown, with the variable that sets each.
	require.Contains(t, help.String(), "(default kafka:9092)")
	require.Contains(t, help.String(), "(default github)")
	require.Contains(t, help.String(), "[$CIKIT_POSTGRES_URL]")
	require.Contains(t, help.String(), "(default 30s)")
	require.NotContains(t, help.String(), "(default 0)")
	require.NotContains(t, help.String(), "(default false)")

	var secret []string
	for _, s := range base.Settings() {
		if s.secret() {
			secret = append(secret, s.Name)
		}
	}
	require.ElementsMatch(t, []string{"postgres.url", "redis.url", "s3.access-key-id", "s3.secret-access-key", "vcs.github.token", "vcs.gitlab.token",
		"webhooks.github-secrets", "webhooks.gitlab-tokens", "webhooks.standard-secrets", "runners.registration-tokens", "runners.signing-keys",
		"secrets.keys", "secrets.postgres-roles.admin-url", "secrets.postgres-roles.url", "auth.oidc.client-secret"}, secret)
}

// TestRunnerImages: the local runners' images are under the data
// directory unless runners.images.dir says otherwise, with the pairs of
// labels and mirrors as process.Images has them; jobs left without an
// image run on the host unless a default image is set or host-jobs says
// so; with the sandbox off there are none.
func TestRunnerImages(t *testing.T) {
	t.Parallel()
	c := Default()
	c.DataDir = "/srv/cikit"
	im := c.RunnerImages()
	require.Equal(t, image.Config{Dir: "/srv/cikit/images"}, im.Pull)
	require.True(t, im.Host)
	require.Empty(t, im.Default)

	c.Runners.Images = RunnerImages{Dir: "/cache/images", Default: "alpine:3.20", Labels: []string{"ubuntu-latest=ubuntu:24.04"},
		Mirrors: []string{"index.docker.io=m1", "index.docker.io=m2"}, Insecure: []string{"localhost:5000"}, BudgetBytes: 1 << 30,
		DockerConfig: "/etc/cikit/docker.json", PullPolicy: "if-not-present"}
	require.NoError(t, c.Validate())
	im = c.RunnerImages()
	require.Equal(t, image.Config{Dir: "/cache/images", Budget: 1 << 30, DockerConfig: "/etc/cikit/docker.json",
		Mirrors: map[string][]string{"index.docker.io": {"m1", "m2"}}, Insecure: []string{"localhost:5000"}}, im.Pull)
	require.Equal(t, map[string]string{"ubuntu-latest": "ubuntu:24.04"}, im.Labels)
	require.Equal(t, image.PullIfNotPresent, im.PullPolicy)
	require.False(t, im.Host, "a default image keeps jobs off the host")
	c.Runners.Images.HostJobs = "true"
	require.True(t, c.RunnerImages().Host)

	c = Default()
	c.Runners.Sandbox = "off"
	require.Nil(t, c.RunnerImages())
}
