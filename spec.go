package cikit

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
)

// JobSpec is one compiled job: everything a runner needs to execute it,
// resolved at compile time so that it can be stored with the job and
// replayed later exactly as it was.
//
// Fields that only some pipeline formats have are zero when unused, and
// omitted from the JSON form.
type JobSpec struct {
	// ID identifies the job within its run: the key of the job in the
	// pipeline file ("build"), or for a matrix variant the key and the
	// variant's values ("test (linux, 20)"). Unique within the plan.
	ID string `json:"id"`
	// Name is the display name; it defaults to ID.
	Name string `json:"name"`
	// Stage is the stage the job belongs to, when the pipeline has stages.
	Stage string `json:"stage,omitempty"`
	// Needs lists the IDs of the jobs that must be satisfied before this
	// one may run: the explicit needs plus those implied by stage order.
	// A need of a matrix job is a need of every one of its variants.
	Needs []string `json:"needs,omitempty"`
	// NoArtifactsFrom lists needs whose artifacts the job does not
	// download (GitLab's needs:artifacts:false). By default a job
	// receives the artifacts of every job it needs.
	NoArtifactsFrom []string `json:"no_artifacts_from,omitempty"`
	// Image is the container image the job asks for. Executors that do
	// not run containers record it and run on the host.
	Image string `json:"image,omitempty"`
	// ImageOptions say how the job's container is started from Image;
	// nil when the pipeline gives none.
	ImageOptions *ImageOptions `json:"image_options,omitempty"`
	// RunsOn are the runner labels the job requires: a runner must have
	// all of them.
	RunsOn []string `json:"runs_on,omitempty"`
	// Services are containers that run beside the job (databases …).
	Services []Service `json:"services,omitempty"`
	// Env is the job's environment: the pipeline's env overlaid by the
	// job's own. Step env overlays it at execution time. Values may hold
	// expressions only the runner can expand (GitHub `${{ … }}`).
	Env map[string]string `json:"env,omitempty"`
	// Steps run in order in one workspace; the first failing step fails
	// the job, unless it may fail (Step.ContinueOnError).
	Steps []Step `json:"steps"`
	// AfterSteps run after Steps whatever their outcome, and do not
	// change it (GitLab's after_script).
	AfterSteps []Step `json:"after_steps,omitempty"`
	// AllowFailure lets the jobs that need this one run even when it
	// fails, and keeps its failure out of the run's status.
	AllowFailure bool `json:"allow_failure,omitempty"`
	// AllowFailureExitCodes, when set, limits AllowFailure to failures
	// of a step that exited with one of these codes (FailureScript): a
	// failure with another code, or one that is not a step's exit (a
	// timeout, a lost runner), fails the run as if AllowFailure were
	// false (GitLab's allow_failure:exit_codes).
	AllowFailureExitCodes []int `json:"allow_failure_exit_codes,omitempty"`
	// When says in which outcome of its needs the job runs; empty means
	// WhenOnSuccess.
	When When `json:"when,omitempty"`
	// StartIn delays a job of When WhenDelayed after it becomes ready.
	StartIn time.Duration `json:"start_in,omitempty"`
	// If is a condition the scheduler evaluates when the job's needs are
	// done, because the compiler could not: it refers to needs' results,
	// job status functions or other run-time values. Empty means none.
	// The run's store decides it (dag.Decider; the reference platform and
	// `cikit run` use compiler.DecideJob) in the write that would make
	// the job ready: false skips the job, and one that cannot be decided
	// fails it as a configuration error.
	If *Condition `json:"if,omitempty"`
	// Timeout bounds the job's execution; zero means the executor's
	// default.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retry is the automatic retry policy; nil means no retry.
	Retry *Retry `json:"retry,omitempty"`
	// Concurrency serialises jobs (and runs) sharing a group.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Caches are restored before the steps and saved after them.
	Caches []Cache `json:"caches,omitempty"`
	// Artifacts are uploaded after the steps.
	Artifacts *Artifacts `json:"artifacts,omitempty"`
	// Secrets name the secrets the job may read at execution time: its
	// runner fetches exactly these, from the scopes the job is entitled
	// to, before the first step, and a missing one fails the job. The
	// values are never in the spec.
	Secrets []string `json:"secrets,omitempty"`
	// IDTokens are the OIDC ID tokens the runner requests for the job
	// before its first step, each into an environment variable (GitLab's
	// id_tokens).
	IDTokens []IDToken `json:"id_tokens,omitempty"`
	// Environment is the deployment environment the job targets.
	Environment *Environment `json:"environment,omitempty"`
	// Gate, when set, holds the job until a person approves it (see
	// Gate): a native job's approval:, or what the platform added when
	// the run was created (environment protection rules, its policy).
	Gate *Gate `json:"gate,omitempty"`
	// Admission is what the platform's policy decided for the job when
	// its run was created; nil where no policy ran (cikit run, a store
	// used alone). A DENY admission fails the job without running it.
	Admission *Admission `json:"admission,omitempty"`
	// Outputs map output names to expressions the runner evaluates at job
	// end (GitHub's jobs.<id>.outputs). An output (name and value) holds
	// at most MaxOutputValueBytes, all of a job's at most MaxOutputsBytes;
	// the compiler checks the declarations against them.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Permissions of the job's token (GitHub's permissions), scope to
	// "read", "write" or "none".
	Permissions map[string]string `json:"permissions,omitempty"`
	// Matrix holds the values of this job's matrix variant, rendered as
	// strings (non-string values as JSON); nil for a job without matrix.
	Matrix map[string]string `json:"matrix,omitempty"`
	// MatrixJSON holds each matrix value of Matrix in its JSON form, so
	// that numbers, booleans, objects and arrays stay such in the matrix
	// context at run time; nil when every value is a string.
	MatrixJSON map[string]json.RawMessage `json:"matrix_json,omitempty"`
	// MatrixOf is the ID of the job as written, for a matrix variant.
	MatrixOf string `json:"matrix_of,omitempty"`
	// Strategy is where a variant of a GitHub matrix job stands among
	// the job's variants (GitHub's strategy context); nil for a job
	// without matrix, whose strategy context is GitHub's default (index
	// 0 of 1, fail-fast, max-parallel 1). GitLab's parallel copies say
	// the same with CI_NODE_INDEX and CI_NODE_TOTAL in Env instead.
	Strategy *Strategy `json:"strategy,omitempty"`
	// Expand, when set, marks a job whose matrix only the run can compute
	// (a GitHub matrix read from the outputs of the jobs it needs, such as
	// fromJSON(needs.setup.outputs.matrix)). The job is never run as it
	// is: once its needs are done, the scheduler expands it into its
	// variants (dag.Expander), which run as jobs of their own, and the job
	// ends as they all have. Its content belongs to the compiler, which
	// wrote it and which expands it (compiler.ExpandJob); to everything
	// else it is opaque. At most MaxExpandBytes.
	Expand json.RawMessage `json:"expand,omitempty"`
	// Checkout, when set, is how the runner puts the run's commit into
	// the workspace before the first step: native pipelines and GitLab
	// jobs have one. Nil for a job that checks out in a step (GitHub's
	// actions/checkout) or whose workspace starts as the runner's source.
	Checkout *Checkout `json:"checkout,omitempty"`
	// Uses is a reusable workflow the job calls and that could not be
	// expanded in place (it lives in another repository).
	Uses string `json:"uses,omitempty"`
	// Format is the pipeline format the job was compiled from: "github",
	// "gitlab" or "native". It decides the job's run-time semantics: its
	// expressions, predefined variables and default shell.
	Format string `json:"format,omitempty"`
	// Warnings name what the job asks for that the platform accepts but
	// does not honour yet; the runner prints them at the top of the job's
	// log, and `cikit lint` reports them.
	Warnings []string `json:"warnings,omitempty"`
}

// Step is one command of a job.
type Step struct {
	// ID names the step for references to its outputs (GitHub's id).
	ID string `json:"id,omitempty"`
	// Name is the display name; it defaults to the command's first line.
	Name string `json:"name"`
	// Run is the script of the step, run with Shell (default
	// `sh -e -c`). Empty for a step that uses an action.
	Run string `json:"run,omitempty"`
	// Shell overrides the shell that runs Run ("bash", "pwsh" …).
	Shell string `json:"shell,omitempty"`
	// WorkingDirectory is relative to the workspace.
	WorkingDirectory string `json:"working_directory,omitempty"`
	// Uses references an action ("actions/checkout@v4", "./local",
	// "docker://alpine"); With holds its inputs.
	Uses string            `json:"uses,omitempty"`
	With map[string]string `json:"with,omitempty"`
	// Env overlays the job's environment for this step.
	Env map[string]string `json:"env,omitempty"`
	// If is the step's run-time condition; nil means success().
	If *Condition `json:"if,omitempty"`
	// ContinueOnError keeps the job going when the step fails.
	ContinueOnError bool `json:"continue_on_error,omitempty"`
	// Timeout bounds the step; zero means none beyond the job's.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// When says in which outcome of its needs a job runs.
type When string

const (
	WhenOnSuccess When = "on_success" // all needs satisfied (the default)
	WhenOnFailure When = "on_failure" // some need failed
	WhenAlways    When = "always"     // whatever the needs' outcome
	WhenManual    When = "manual"     // when a person starts it
	WhenDelayed   When = "delayed"    // on success, after StartIn
	WhenNever     When = "never"      // never (a rule excluded it)
)

// ConditionLang names the expression language of a Condition.
type ConditionLang string

const (
	LangGitHub ConditionLang = "github" // GitHub Actions ${{ }} expressions
	LangGitLab ConditionLang = "gitlab" // GitLab rules:if expressions
)

// Condition is an expression left for run time.
type Condition struct {
	Lang ConditionLang `json:"lang"`
	Expr string        `json:"expr"`
}

// Service is a container that runs beside a job.
type Service struct {
	// Name is how the job reaches the service (host name); defaults to
	// a name derived from the image.
	Name    string            `json:"name"`
	Image   string            `json:"image"`
	Env     map[string]string `json:"env,omitempty"`
	Ports   []string          `json:"ports,omitempty"`
	Command []string          `json:"command,omitempty"`
	// Options are GitHub's container options as written. Their parsed
	// form is ImageOptions.Options and Health.
	Options string `json:"options,omitempty"`
	// ImageOptions say how the service's container is started from
	// Image; nil when the pipeline gives none. Its Options are the
	// options left after Health and User are taken out.
	ImageOptions *ImageOptions `json:"image_options,omitempty"`
	// Health is how the runner knows the service is ready (GitHub's
	// --health-* options); nil when none is given.
	Health *ServiceHealth `json:"health,omitempty"`
}

// HostName is the name a job reaches s by: its Name, or one derived from
// its image when it has none ("postgres:16" is "postgres",
// "registry.example.com/team/redis:7" is "redis").
func (s Service) HostName() string {
	if s.Name != "" {
		return s.Name
	}
	name := s.Image[strings.LastIndexByte(s.Image, '/')+1:]
	name, _, _ = strings.Cut(name, "@")
	name, _, _ = strings.Cut(name, ":")
	return name
}

// ImageOptions say how a container is started from its image, beyond
// the image's own configuration. Every field is optional; zero fields
// leave the image's configuration as it is.
type ImageOptions struct {
	// Entrypoint replaces the image's entrypoint (GitLab's
	// image:entrypoint). It is kept as given: GitLab's [""] means "no
	// entrypoint", which differs from nil ("the image's entrypoint").
	Entrypoint []string `json:"entrypoint,omitempty"`
	// PullPolicy lists the pull policies the runner may use, in order
	// of preference: PullAlways, PullIfNotPresent, PullNever (GitLab's
	// pull_policy). Empty means the runner's default.
	PullPolicy []string `json:"pull_policy,omitempty"`
	// User is the user, as "name", "uid" or "uid:gid", the container's
	// processes run as (GitLab's image:docker:user, GitHub's
	// options --user).
	User string `json:"user,omitempty"`
	// Env is the container's environment (GitHub's container.env).
	// Values may hold expressions only the runner can expand. The
	// compiler also puts a job container's env into JobSpec.Env, under
	// the job's own, so that steps see it on any executor.
	Env map[string]string `json:"env,omitempty"`
	// Credentials log in to the image's registry (GitHub's
	// credentials). They are kept as written, usually
	// "${{ secrets.X }}", for the runner to expand; nothing may log
	// them, and the runner must mask what they expand to.
	Credentials *RegistryCredentials `json:"credentials,omitempty"`
	// Options are the container options (GitHub's options), split into
	// words as a shell would, without the flags mapped to other fields.
	Options []string `json:"options,omitempty"`
}

// Pull policies of ImageOptions.PullPolicy.
const (
	// PullAlways pulls the image for every job.
	PullAlways = "always"
	// PullIfNotPresent pulls the image when the runner has no copy.
	PullIfNotPresent = "if-not-present"
	// PullNever uses the runner's copy, and fails the job without one.
	PullNever = "never"
)

// RegistryCredentials log in to a container registry. Their values are
// secrets once expanded: never log or display them.
type RegistryCredentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// ServiceHealth is a service's health check: the runner runs Cmd in the
// service's container every Interval, and the service is ready once Cmd
// succeeds. Zero durations and Retries mean the runner's defaults.
type ServiceHealth struct {
	// Cmd is a shell command line, run with the container's shell.
	Cmd string `json:"cmd,omitempty"`
	// Interval is the time between two checks.
	Interval time.Duration `json:"interval,omitempty"`
	// Timeout is how long one check may take.
	Timeout time.Duration `json:"timeout,omitempty"`
	// StartPeriod is how long after start failed checks do not count.
	StartPeriod time.Duration `json:"start_period,omitempty"`
	// Retries is how many failed checks in a row make the service
	// unhealthy.
	Retries int `json:"retries,omitempty"`
}

// Clone returns a deep copy of o; nil for nil.
func (o *ImageOptions) Clone() *ImageOptions {
	if o == nil {
		return nil
	}
	c := *o
	c.Entrypoint = slices.Clone(o.Entrypoint)
	c.PullPolicy = slices.Clone(o.PullPolicy)
	c.Env = maps.Clone(o.Env)
	c.Credentials = clonePtr(o.Credentials)
	c.Options = slices.Clone(o.Options)
	return &c
}

// Retry is an automatic retry policy.
type Retry struct {
	// Max is the number of retries after the first attempt.
	Max int `json:"max"`
	// When lists the failure classes retried ("always",
	// "runner_system_failure", "script_failure" …); empty means always,
	// unless ExitCodes is set.
	When []string `json:"when,omitempty"`
	// ExitCodes, when set, also retries a failure of a step that exited
	// with one of these codes (FailureScript), whatever When says
	// (GitLab's retry:exit_codes); with ExitCodes and no When, only those
	// failures are retried.
	ExitCodes []int `json:"exit_codes,omitempty"`
}

// Concurrency places a job in a concurrency group: at most one job of the
// group runs at a time.
type Concurrency struct {
	Group string `json:"group"`
	// CancelInProgress cancels the running job of the group when a new
	// one arrives; otherwise the new one waits.
	CancelInProgress bool `json:"cancel_in_progress,omitempty"`
}

// Cache is one cache a job restores and saves.
type Cache struct {
	// Key is the cache key template, e.g. `deps-{{ hash("go.sum") }}`;
	// KeyFiles, when set, are the files whose content hash makes the key
	// (GitLab's key:files), prefixed with KeyPrefix.
	Key       string   `json:"key,omitempty"`
	KeyFiles  []string `json:"key_files,omitempty"`
	KeyPrefix string   `json:"key_prefix,omitempty"`
	// Paths are the paths cached, relative to the workspace; globs with
	// ** are allowed.
	Paths []string `json:"paths"`
	// Untracked also caches the files git does not track (GitLab's
	// cache:untracked).
	Untracked bool `json:"untracked,omitempty"`
	// FallbackKeys are exact keys tried in order when the key misses
	// (GitLab's fallback_keys).
	FallbackKeys []string `json:"fallback_keys,omitempty"`
	// RestoreKeys are prefixes tried when the key and the fallback keys
	// miss: the longest prefix matching a saved entry wins, and its most
	// recent entry is restored (native restore_keys).
	RestoreKeys []string `json:"restore_keys,omitempty"`
	// Policy is "pull-push" (default), "pull" or "push".
	Policy string `json:"policy,omitempty"`
	// When is "on_success" (default), "on_failure" or "always".
	When string `json:"when,omitempty"`
}

// Artifacts are the files a job uploads.
type Artifacts struct {
	// Name is the artifact's name; empty is "artifacts".
	Name string `json:"name,omitempty"`
	// Paths are the paths archived, relative to the workspace; globs
	// with ** are allowed. Exclude removes matches of its globs.
	Paths   []string `json:"paths"`
	Exclude []string `json:"exclude,omitempty"`
	// Untracked also archives the files git does not track (GitLab's
	// artifacts:untracked).
	Untracked bool `json:"untracked,omitempty"`
	// ExpireIn is how long the artifact is kept; zero is the platform's
	// default. ExpireNever keeps it until it is deleted (GitLab's
	// expire_in: never), where the platform allows it.
	ExpireIn    time.Duration `json:"expire_in,omitempty"`
	ExpireNever bool          `json:"expire_never,omitempty"`
	// When is "on_success" (default), "on_failure" or "always".
	When string `json:"when,omitempty"`
	// Reports are GitLab's artifacts:reports, report type to paths. The
	// variables of "dotenv" reach the jobs that need this one (see
	// MaxDotenvBytes); the other types are kept as artifacts of type
	// "report".
	Reports map[string][]string `json:"reports,omitempty"`
}

// Limits of a GitLab artifacts:reports:dotenv report, GitLab's own.
const (
	// MaxDotenvBytes bounds the dotenv file.
	MaxDotenvBytes = 5 << 10
	// MaxDotenvVariables bounds the variables it holds.
	MaxDotenvVariables = 20
)

// CacheReport is how one cache of a job was restored and saved, as the
// runner reports it with the job's result: seed 004's build-status
// cache payload.
type CacheReport struct {
	// Step is the step that restored it (GitHub's actions/cache); empty
	// for a cache of the job (JobSpec.Caches).
	Step string `json:"step,omitempty"`
	// Key is the rendered key looked up.
	Key string `json:"key"`
	// Hit says an entry was restored; MatchedKey is its key (Key itself
	// for an exact hit, a fallback key or a restore-key match otherwise).
	Hit        bool   `json:"hit"`
	Exact      bool   `json:"exact,omitempty"`
	MatchedKey string `json:"matched_key,omitempty"`
	// RestoredInMS is how long the download and extraction took; Size the
	// restored archive's size.
	RestoredInMS int64 `json:"restored_in_ms,omitempty"`
	Size         int64 `json:"size,omitempty"`
	// Saved says a new entry was saved under Key at the job's end, of
	// SavedSize bytes; Note says why not, when it was not ("exact hit",
	// "unchanged", "policy pull", "saved by another job first" …).
	Saved     bool   `json:"saved,omitempty"`
	SavedSize int64  `json:"saved_size,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Environment is a deployment environment.
type Environment struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
	// Action is "start" (default), "stop", "prepare", "verify" or
	// "access".
	Action string `json:"action,omitempty"`
}

// IDToken is an OIDC ID token a job asks for: the variable Name holds a
// token of the platform's issuer for Audience.
type IDToken struct {
	Name     string   `json:"name"`
	Audience []string `json:"aud"`
}

// Limits of JobSpec.IDTokens.
const (
	// MaxIDTokens bounds the ID tokens of one job.
	MaxIDTokens = 20
	// MaxAudiences bounds the audiences of one ID token, MaxAudienceBytes
	// each of them.
	MaxAudiences     = 10
	MaxAudienceBytes = 256
)

// DisplayName returns the job's name, or its ID when it has none.
func (j *JobSpec) DisplayName() string {
	if j.Name != "" {
		return j.Name
	}
	return j.ID
}

// Clone returns a deep copy of j.
func (j *JobSpec) Clone() *JobSpec {
	c := *j
	c.Needs = slices.Clone(j.Needs)
	c.NoArtifactsFrom = slices.Clone(j.NoArtifactsFrom)
	c.RunsOn = slices.Clone(j.RunsOn)
	c.Services = slices.Clone(j.Services)
	for i := range c.Services {
		s := &c.Services[i]
		s.Env, s.Ports, s.Command = maps.Clone(s.Env), slices.Clone(s.Ports), slices.Clone(s.Command)
		s.ImageOptions, s.Health = s.ImageOptions.Clone(), clonePtr(s.Health)
	}
	c.ImageOptions = j.ImageOptions.Clone()
	c.Env = maps.Clone(j.Env)
	c.Steps = cloneSteps(j.Steps)
	c.AfterSteps = cloneSteps(j.AfterSteps)
	c.AllowFailureExitCodes = slices.Clone(j.AllowFailureExitCodes)
	c.If = clonePtr(j.If)
	if j.Retry != nil {
		r := *j.Retry
		r.When, r.ExitCodes = slices.Clone(r.When), slices.Clone(r.ExitCodes)
		c.Retry = &r
	}
	c.Concurrency = clonePtr(j.Concurrency)
	c.Caches = slices.Clone(j.Caches)
	for i := range c.Caches {
		k := &c.Caches[i]
		k.KeyFiles, k.Paths, k.RestoreKeys = slices.Clone(k.KeyFiles), slices.Clone(k.Paths), slices.Clone(k.RestoreKeys)
		k.FallbackKeys = slices.Clone(k.FallbackKeys)
	}
	if j.Artifacts != nil {
		a := *j.Artifacts
		a.Paths, a.Exclude = slices.Clone(a.Paths), slices.Clone(a.Exclude)
		if a.Reports != nil {
			a.Reports = make(map[string][]string, len(j.Artifacts.Reports))
			for k, v := range j.Artifacts.Reports {
				a.Reports[k] = slices.Clone(v)
			}
		}
		c.Artifacts = &a
	}
	c.Secrets = slices.Clone(j.Secrets)
	c.IDTokens = slices.Clone(j.IDTokens)
	for i := range c.IDTokens {
		c.IDTokens[i].Audience = slices.Clone(c.IDTokens[i].Audience)
	}
	c.Environment = clonePtr(j.Environment)
	c.Gate = j.Gate.clone()
	if j.Admission != nil {
		a := *j.Admission
		a.SecretsScopes, a.RunnerLabelsAllowed = slices.Clone(a.SecretsScopes), slices.Clone(a.RunnerLabelsAllowed)
		a.TokenPermissions = maps.Clone(a.TokenPermissions)
		c.Admission = &a
	}
	c.Outputs = maps.Clone(j.Outputs)
	c.Permissions = maps.Clone(j.Permissions)
	c.Matrix = maps.Clone(j.Matrix)
	c.MatrixJSON = maps.Clone(j.MatrixJSON)
	c.Strategy = clonePtr(j.Strategy)
	c.Expand = slices.Clone(j.Expand)
	c.Checkout = clonePtr(j.Checkout)
	c.Warnings = slices.Clone(j.Warnings)
	return &c
}

// Strategy is a matrix variant's place among the variants of its job,
// and the job's strategy as written: what GitHub's strategy context
// holds. FailFast and MaxParallel are recorded, not honoured: the
// scheduler neither cancels the other variants when one fails nor bounds
// how many run at once (the compiler warns where they are written).
type Strategy struct {
	// Index is the variant's place in the expansion order, from 0
	// (strategy.job-index); Total the number of variants
	// (strategy.job-total).
	Index int `json:"index"`
	Total int `json:"total"`
	// FailFast is strategy.fail-fast, true unless written false.
	FailFast bool `json:"fail_fast"`
	// MaxParallel is strategy.max-parallel as written; 0 when it is not
	// (the context then says Total, as GitHub's does).
	MaxParallel int `json:"max_parallel,omitempty"`
}

func cloneSteps(steps []Step) []Step {
	c := slices.Clone(steps)
	for i := range c {
		c[i].Env, c[i].With, c[i].If = maps.Clone(c[i].Env), maps.Clone(c[i].With), clonePtr(c[i].If)
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// FailureClass says why a job failed, for retry policies: a failing step
// is the code's fault and retried only when the pipeline asks; a lost
// runner is the platform's and is retried on its own.
type FailureClass string

const (
	FailureScript         FailureClass = "script"         // a step exited non-zero
	FailureTimeout        FailureClass = "timeout"        // the job ran out of time
	FailureInfrastructure FailureClass = "infrastructure" // the runner or platform failed
)

// RetryClasses maps the retry classes pipeline formats write to failure
// classes: the native names, and GitLab's retry:when values.
var retryClasses = map[string][]FailureClass{
	"always":                   {FailureScript, FailureTimeout, FailureInfrastructure},
	"failure":                  {FailureScript},
	"script_failure":           {FailureScript},
	"timeout":                  {FailureTimeout},
	"stuck_or_timeout_failure": {FailureTimeout},
	"job_execution_timeout":    {FailureTimeout},
	"infrastructure":           {FailureInfrastructure},
	"unknown_failure":          {FailureInfrastructure},
	"api_failure":              {FailureInfrastructure},
	"runner_system_failure":    {FailureInfrastructure},
	"runner_unsupported":       {FailureInfrastructure},
	"stale_schedule":           {FailureInfrastructure},
	"archived_failure":         {FailureInfrastructure},
	"unmet_prerequisites":      {FailureInfrastructure},
	"scheduler_failure":        {FailureInfrastructure},
	"data_integrity_failure":   {FailureInfrastructure},
}

// Retries reports whether attempt (1 for the first) of a job that failed
// with class and exitCode gets another attempt under policy r: when the
// attempt is within r.Max retries and the class is one r.When names, or
// a step exited (FailureScript) with one of r.ExitCodes. Empty When and
// ExitCodes retry every failure. A nil policy retries nothing, and no
// policy retries FailureConfig.
func (r *Retry) Retries(class FailureClass, exitCode, attempt int) bool {
	if r == nil || attempt > r.Max || class == FailureConfig {
		return false
	}
	if len(r.When) == 0 && len(r.ExitCodes) == 0 {
		return true
	}
	if class == FailureScript && slices.Contains(r.ExitCodes, exitCode) {
		return true
	}
	for _, w := range r.When {
		if slices.Contains(retryClasses[w], class) {
			return true
		}
	}
	return false
}
