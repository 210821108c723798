package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/groupcommit"
	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
)

// Defaults of ServerConfig.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultMaxWait           = 60 * time.Second
	DefaultWait              = 50 * time.Second
	DefaultJobTimeout        = time.Hour
)

// Group commit of the lease calls the Server makes per request.
const (
	// maxBatch is the most claims or completions one lease call takes.
	maxBatch = 64
	// batchWriters is how many lease calls of one kind run at once.
	// One: the next batch gathers while it waits on the stores, and
	// the stores, not the batches, are the bottleneck: with more calls
	// at once each took longer and the batches were smaller.
	batchWriters = 1
)

// Limits on what runners send.
const (
	maxLabels      = 64
	maxLabelLength = 64
	maxBodyBytes   = 64 << 10
)

// ServerConfig configures a Server. Jobs, Leases, RegistrationTokens and
// SigningKeys are required.
type ServerConfig struct {
	// Jobs is the store of runs and jobs.
	Jobs dag.Store
	// Leases claims, renews and completes job attempts; its store must
	// be Jobs.
	Leases *lease.Manager
	// Dispatcher holds the jobs waiting for runners. Default: a new one.
	Dispatcher *Dispatcher
	// RegistrationTokens are the secrets runners register with; any of
	// them is accepted.
	RegistrationTokens []string
	// SigningKeys sign the runner and job tokens: the first signs, all
	// verify. Each must be at least 32 bytes.
	SigningKeys [][]byte
	// HeartbeatInterval is how often runners are told to heartbeat; it
	// should be a third of the lease TTL or less.
	// Default: DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// MaxWait bounds a claim's long poll. Default: DefaultMaxWait.
	MaxWait time.Duration
	// DefaultJobTimeout is the deadline of a job whose spec sets no
	// timeout. Default: DefaultJobTimeout.
	DefaultJobTimeout time.Duration
	// RetryBackoff is how long a retried attempt waits before it is
	// offered again; attempt is the new attempt's number (2 or more).
	// Default: one second, doubling each attempt, at most a minute.
	RetryBackoff func(attempt int) time.Duration
	// Logs, when set, takes the jobs' log chunks and serves followers
	// under /v1/jobs/{run_id}/{job_id}/log (see package logs). Chunks and
	// finishes are fenced like every job-scoped call.
	Logs *logs.Hub
	// FailTruncatedLogs fails a job that succeeded but whose log was cut
	// at the Logs hub's limit (logs.Config.MaxLogBytes), with a reason
	// naming the limit; otherwise such a job keeps its result and its
	// log says it was truncated.
	FailTruncatedLogs bool
	// AuthorizeFollow decides who may follow a log live. Default: nobody
	// (403); the platform's API sets it to its users' authorization.
	AuthorizeFollow logs.AuthorizeFunc
	// Tenant names whom a run's jobs run for (such as its repository's
	// owner), for TenantLimit. Default: nobody; no limit applies.
	Tenant func(run *dag.Run) string
	// TenantLimit, when set, is how many jobs of a tenant may run at once
	// through this server (0 or less: no limit). A tenant's job beyond
	// it waits, and other tenants' jobs behind it go first
	// (Dispatcher.LimitTenants); Manager.Why says so.
	TenantLimit func(tenant string) int
	// Source, when set, mints where each claimed job's runner fetches
	// its commit (cikit.JobContext.Source). Default: none; runners are
	// told no source and check out nothing.
	Source SourceMinter
	// RunURL, when set, is the page of run runID on the platform, for
	// cikit.JobContext.RunURL. Default: none.
	RunURL func(runID string) string
	// Artifacts, when set, makes the artifacts.Broker of each job attempt
	// whose runner calls the artifact and cache calls
	// (/v1/jobs/{run_id}/{job_id}/uploads, …/artifacts, …/cache; see
	// docs/runner-protocol.md), fenced like every job-scoped call.
	// Default: none; those calls are answered 404 "artifacts are not
	// configured on this server", and a runner fails the jobs that
	// declare artifacts or caches, saying so.
	Artifacts ArtifactBrokers
	// CacheScopes returns the cache scope a job of a run of context rc
	// (nil for a run without one) writes and the scopes it reads, that
	// one first: artifacts.JobRef's Scope and ReadScopes. The platform
	// sets it to artifacts.Scopes. Default: every job writes and reads
	// the scope "".
	CacheScopes func(rc *cikit.RunContext) (write string, read []string)
	// Secrets, when set, gives claimed jobs their secrets and ID tokens
	// (see JobSecrets). Default: none; a job that names secrets or asks
	// for ID tokens fails at the claim as a configuration failure, saying
	// so.
	Secrets *JobSecrets
	// Runners keeps the runners that register, so that they can be
	// revoked (Server.RunnerRevoke) and listed (Server.RunnerList). A
	// runner token whose runner the store does not hold is refused 401,
	// and the runner registers again. Servers of one platform share one
	// (a PostgresRunnerStore). Default: a new MemoryRunnerStore, which
	// forgets the runners when the process ends.
	Runners RunnerStore
	// RunnerCheckTTL is how long a runner's record, once read, is
	// trusted: a revocation made through another Server over the same
	// Runners is refused here within it; one made through this Server,
	// at once. Default: DefaultRunnerCheckTTL.
	RunnerCheckTTL time.Duration
	// RunnerSeenInterval is how often at most a runner's LastSeen is
	// written to Runners. Default: DefaultRunnerSeenInterval.
	RunnerSeenInterval time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives the server's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Server is the platform's side of the runner protocol (see
// docs/runner-protocol.md): an http.Handler serving /v1. It registers
// runners, hands them jobs through long polls, and takes their heartbeats
// and results, each fenced by the attempt's lease. It is safe for
// concurrent use.
type Server struct {
	cfg      ServerConfig
	signer   *signer
	mux      *http.ServeMux
	log      *slog.Logger
	dispatch *Dispatcher
	runners  runners
	// checks cache the runners' records.
	checks runnerChecks
	// claims and completes join concurrent requests' lease calls into
	// batches.
	claims    *groupcommit.Batcher[lease.ClaimRequest, lease.ClaimResult]
	completes *groupcommit.Batcher[lease.CompleteRequest, lease.CompleteResult]
	// contexts are the contexts of runs whose jobs were claimed.
	contexts contextCache
	// refs are the artifacts.JobRef of attempts that made artifact calls.
	refs refCache
}

// NewServer validates cfg and returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case cfg.Jobs == nil:
		return nil, errors.New("fleet: ServerConfig.Jobs is required")
	case cfg.Leases == nil:
		return nil, errors.New("fleet: ServerConfig.Leases is required")
	case len(cfg.RegistrationTokens) == 0:
		return nil, errors.New("fleet: ServerConfig.RegistrationTokens needs at least one token")
	case len(cfg.SigningKeys) == 0:
		return nil, errors.New("fleet: ServerConfig.SigningKeys needs at least one key")
	}
	for i, k := range cfg.SigningKeys {
		if len(k) < 32 {
			return nil, fmt.Errorf("fleet: ServerConfig.SigningKeys[%d] has %d bytes; a key needs at least 32", i, len(k))
		}
	}
	for i, t := range cfg.RegistrationTokens {
		if len(t) < 16 {
			return nil, fmt.Errorf("fleet: ServerConfig.RegistrationTokens[%d] is %d bytes long; a token needs at least 16", i, len(t))
		}
	}
	if js := cfg.Secrets; js != nil {
		switch {
		case js.Issuer == nil || js.Broker == nil:
			return nil, errors.New("fleet: ServerConfig.Secrets needs an Issuer and a Broker")
		case js.Audience == "":
			return nil, errors.New("fleet: ServerConfig.Secrets.Audience is required")
		}
		if js.RunnerEnvironment == "" {
			c := *js
			c.RunnerEnvironment = "self-hosted"
			cfg.Secrets = &c
		}
	}
	if cfg.HeartbeatInterval < 0 || cfg.MaxWait < 0 || cfg.DefaultJobTimeout < 0 || cfg.RunnerCheckTTL < 0 || cfg.RunnerSeenInterval < 0 {
		return nil, errors.New("fleet: ServerConfig durations must not be negative")
	}
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.MaxWait = cmp.Or(cfg.MaxWait, DefaultMaxWait)
	cfg.DefaultJobTimeout = cmp.Or(cfg.DefaultJobTimeout, DefaultJobTimeout)
	cfg.RunnerCheckTTL = cmp.Or(cfg.RunnerCheckTTL, DefaultRunnerCheckTTL)
	cfg.RunnerSeenInterval = cmp.Or(cfg.RunnerSeenInterval, DefaultRunnerSeenInterval)
	if cfg.Runners == nil {
		cfg.Runners = NewMemoryRunnerStore()
	}
	if cfg.RetryBackoff == nil {
		cfg.RetryBackoff = defaultRetryBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = NewDispatcher()
	}
	if cfg.TenantLimit != nil {
		cfg.Dispatcher.LimitTenants(cfg.TenantLimit)
	}
	s := &Server{cfg: cfg, signer: &signer{keys: cfg.SigningKeys}, log: cfg.Logger, dispatch: cfg.Dispatcher, mux: http.NewServeMux(),
		claims:    groupcommit.New(maxBatch, batchWriters, cfg.Leases.ClaimMany),
		completes: groupcommit.New(maxBatch, batchWriters, cfg.Leases.CompleteMany)}
	s.runners.forget = runnerForget * cfg.MaxWait
	s.mux.HandleFunc("POST /v1/runners", s.register)
	s.mux.HandleFunc("GET /v1/jobs/claim", s.claim)
	s.mux.HandleFunc("POST /v1/jobs/{run_id}/{job_id}/heartbeat", s.heartbeat)
	s.mux.HandleFunc("POST /v1/jobs/{run_id}/{job_id}/complete", s.complete)
	s.mux.HandleFunc("POST /v1/jobs/{run_id}/{job_id}/return", s.giveBack)
	s.routeArtifacts()
	s.routeSecrets()
	if cfg.Logs != nil {
		follow := cfg.AuthorizeFollow
		if follow == nil {
			follow = func(*http.Request, logs.Key) error {
				return fmt.Errorf("%w: following logs is not configured on this server", logs.ErrForbidden)
			}
		}
		h, err := logs.NewHandler(logs.HandlerConfig{Hub: cfg.Logs, AuthorizeWrite: s.authorizeLogWrite, AuthorizeFollow: follow, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		s.mux.Handle("/v1/jobs/{run_id}/{job_id}/log", h)
		s.mux.Handle("/v1/jobs/{run_id}/{job_id}/log/{call}", h)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such call in runner protocol v1: "+r.Method+" "+r.URL.Path)
	})
	return s, nil
}

func defaultRetryBackoff(attempt int) time.Duration {
	d := time.Second << min(max(attempt-2, 0), 6)
	return min(d, time.Minute)
}

// ServeHTTP serves the runner protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Dispatcher returns the server's dispatcher.
func (s *Server) Dispatcher() *Dispatcher { return s.dispatch }

// registerRequest is the body of POST /v1/runners.
type registerRequest struct {
	Name    string   `json:"name"`
	Labels  []string `json:"labels"`
	Version string   `json:"version"`
}

type registerResponse struct {
	RunnerID    string   `json:"runner_id"`
	RunnerToken string   `json:"runner_token"`
	Labels      []string `json:"labels"`
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok || !s.registrationToken(token) {
		writeError(w, http.StatusUnauthorized, "a valid registration token is required")
		return
	}
	var req registerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" || len(req.Name) > 256 {
		writeError(w, http.StatusBadRequest, "name must be 1 to 256 bytes long")
		return
	}
	if len(req.Labels) > maxLabels {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d labels; at most %d are allowed", len(req.Labels), maxLabels))
		return
	}
	for _, l := range req.Labels {
		if l == "" || len(l) > maxLabelLength {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("label %q must be 1 to %d bytes long", l, maxLabelLength))
			return
		}
	}
	if len(req.Version) > 256 {
		writeError(w, http.StatusBadRequest, "version must be at most 256 bytes long")
		return
	}
	_, labels := labelKey(req.Labels)
	id := "r_" + randomHex(12)
	rc := &runnerClaims{Kind: kindRunner, RunnerID: id, Name: req.Name, Labels: labels, Issued: s.cfg.Now().UTC()}
	rt, err := s.signer.sign(rc)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rec := &RunnerRecord{ID: id, Name: req.Name, Labels: labels, Version: req.Version, RegisteredAt: rc.Issued, LastSeen: rc.Issued}
	if err := s.cfg.Runners.RunnerCreate(r.Context(), rec); err != nil {
		s.log.Error("fleet: recording a runner", "name", req.Name, "error", err)
		writeError(w, http.StatusServiceUnavailable, "the runner store is unavailable; register again later")
		return
	}
	s.runners.seen(rc, rc.Issued)
	s.log.Info("fleet: runner registered", "runner", id, "name", req.Name, "labels", labels, "version", req.Version)
	writeJSON(w, http.StatusCreated, registerResponse{RunnerID: id, RunnerToken: rt, Labels: labels})
}

// registrationToken compares token with every registration token in
// constant time.
func (s *Server) registrationToken(token string) bool {
	ok := 0
	for _, t := range s.cfg.RegistrationTokens {
		ok |= subtle.ConstantTimeCompare([]byte(token), []byte(t))
	}
	return ok == 1
}

// claimResponse is the answer to a claim that found a job.
type claimResponse struct {
	RunID             string    `json:"run_id"`
	JobID             string    `json:"job_id"`
	Attempt           int       `json:"attempt"`
	JobToken          string    `json:"job_token"`
	LeaseExpiresAt    time.Time `json:"lease_expires_at"`
	LeaseRemainingMS  int64     `json:"lease_remaining_ms"`
	HeartbeatInterval string    `json:"heartbeat_interval"`
	Deadline          time.Time `json:"deadline"`
	// Spec is the job's cikit.JobSpec, encoded once to be measured.
	Spec json.RawMessage `json:"spec"`
	// MaxLogBytes is where the runner cuts the job's log (see
	// cikit.LogTruncatedLine); 0 when the server keeps no logs.
	MaxLogBytes int64 `json:"max_log_bytes,omitempty"`
	// Context is the job's cikit.JobContext, encoded once to be
	// measured.
	Context json.RawMessage `json:"context"`
	// SecretsToken is the job's ID token for the secrets call, for a job
	// that names secrets or asks for ID tokens.
	SecretsToken string `json:"secrets_token,omitempty"`
}

func (s *Server) runner(w http.ResponseWriter, r *http.Request) (*runnerClaims, bool) {
	token, ok := bearer(r.Header.Get("Authorization"))
	var c runnerClaims
	if !ok || s.signer.verify(token, kindRunner, &c) != nil {
		writeError(w, http.StatusUnauthorized, "a valid runner token is required")
		return nil, false
	}
	if s.refuseRunner(w, c.RunnerID, s.checkRunner(r.Context(), c.RunnerID)) {
		return nil, false
	}
	return &c, true
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	rc, ok := s.runner(w, r)
	if !ok {
		return
	}
	wait := DefaultWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := parseWait(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		wait = d
	}
	wait = min(wait, s.cfg.MaxWait)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	s.runners.waiting(rc, s.cfg.Now(), 1)
	var got *lease.Attempt
	defer func() {
		s.runners.waiting(rc, s.cfg.Now(), -1)
		if got != nil {
			s.runners.busy(rc, s.cfg.Now(), *got)
		}
	}()
	for {
		o, err := s.dispatch.Take(ctx, rc.Labels)
		if err != nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err := s.checkRunner(r.Context(), rc.RunnerID); err != nil {
			// Revoked while it waited: the offer goes to another runner.
			s.dispatch.Release(o.RunID, o.JobID, o.Attempt)
			s.dispatch.Offer(o)
			s.refuseRunner(w, rc.RunnerID, err)
			return
		}
		if !mayRun(o.Spec, rc.Labels) {
			// Never handed to a runner its policy disallows, whatever
			// handed the offer here: it goes back for another runner.
			s.log.Error("fleet: an offer reached a runner its policy disallows; offered again", "run", o.RunID, "job", o.JobID, "runner", rc.RunnerID)
			s.dispatch.Release(o.RunID, o.JobID, o.Attempt)
			s.dispatch.Offer(o)
			continue
		}
		// The runner is busy from here: a pool's manager must not take
		// it for idle and destroy it while it is handed the job.
		attempt := lease.Attempt{RunID: o.RunID, JobID: o.JobID, Attempt: o.Attempt}
		s.runners.busy(rc, s.cfg.Now(), attempt)
		// The claim is made even when the runner has just gone: its
		// lease then expires and the reaper tries the job again. It
		// joins the claims of other requests in one lease call.
		res, _ := s.claims.Do(context.WithoutCancel(r.Context()), lease.ClaimRequest{Attempt: attempt, Runner: rc.RunnerID})
		l, err := res.Lease, res.Err
		if err != nil {
			s.runners.waiting(rc, s.cfg.Now(), 0) // idle again
			s.dispatch.Release(o.RunID, o.JobID, o.Attempt)
			if !errors.Is(err, lease.ErrNotClaimed) {
				// The store failed: the offer is kept for a runner that
				// comes after the store recovers.
				s.log.Error("fleet: claim failed", "run", o.RunID, "job", o.JobID, "attempt", o.Attempt, "error", err)
				s.dispatch.OfferAfter(o, time.Second)
				writeError(w, http.StatusServiceUnavailable, "the job store is unavailable; claim again later")
				return
			}
			// Cancelled, retried or taken meanwhile: the next offer.
			continue
		}
		spec, err := json.Marshal(o.Spec)
		if err == nil && len(spec) > cikit.MaxJobSpecBytes {
			// Stored by a compiler that did not bound specs: no runner
			// could decode it, so every attempt would end as a lost
			// runner. The job fails for good, and the runner takes the
			// next offer.
			err = fmt.Errorf("the job's spec is %d bytes, more than the %s a runner takes (cikit.MaxJobSpecBytes); compile the pipeline again",
				len(spec), cikit.FormatBytes(cikit.MaxJobSpecBytes))
		}
		if err != nil {
			s.refuse(r.Context(), rc, o, l, cikit.FailureConfig, err)
			continue
		}
		timeout := cmp.Or(o.Spec.Timeout, s.cfg.DefaultJobTimeout)
		deadline := s.cfg.Now().Add(timeout).UTC()
		// Not the request's context: a runner gone meanwhile must not
		// fail the job (its lease expires, and the reaper offers it
		// again).
		hctx, cancelHandOut := context.WithTimeout(context.WithoutCancel(r.Context()), handOutTimeout)
		jt, jcb, st, err := s.handOut(hctx, rc, o, l, deadline)
		cancelHandOut()
		if err != nil {
			var cf *claimFailure
			if errors.As(err, &cf) {
				s.refuse(r.Context(), rc, o, l, cf.class, err)
				continue
			}
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		got = &l.Attempt
		resp := claimResponse{RunID: o.RunID, JobID: o.JobID, Attempt: o.Attempt, JobToken: jt,
			LeaseExpiresAt: l.Expires.UTC(), LeaseRemainingMS: remainingMS(s.cfg.Leases, l.Expires), HeartbeatInterval: s.cfg.HeartbeatInterval.String(), Deadline: deadline, Spec: spec,
			Context: jcb, SecretsToken: st}
		if s.cfg.Logs != nil {
			resp.MaxLogBytes = s.cfg.Logs.MaxLogBytes()
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
}

// handOutTimeout bounds the reads and the minting of handOut.
const handOutTimeout = 30 * time.Second

// handOut builds what the runner of a claimed attempt is given besides
// its spec: the job's context, with its source minted, the job token
// (which names the run's repository) and, for a job that needs secrets,
// its ID token for the secrets call. A *claimFailure says why the
// attempt cannot be handed out.
func (s *Server) handOut(ctx context.Context, rc *runnerClaims, o *Offer, l *lease.Lease, deadline time.Time) (string, json.RawMessage, string, error) {
	jc, err := s.jobContext(ctx, o)
	if err != nil {
		return "", nil, "", err
	}
	st, err := s.secretsToken(ctx, o, jc)
	if err != nil {
		return "", nil, "", err
	}
	jt, err := s.signer.sign(&jobClaims{Kind: kindJob, RunID: o.RunID, JobID: o.JobID, Attempt: o.Attempt,
		Lease: l.Token, RunnerID: rc.RunnerID, Expires: deadline.Add(s.cfg.HeartbeatInterval * 3), Repository: jc.Repository, Secrets: st != ""})
	if err != nil {
		return "", nil, "", err
	}
	if s.cfg.Source != nil {
		var rcx *cikit.RunContext
		if jc.Repository != "" || jc.SHA != "" {
			rcx = &jc.RunContext
		}
		src, err := s.cfg.Source.MintSource(ctx, rcx, JobRef{RunID: o.RunID, JobID: o.JobID, Attempt: o.Attempt, Token: jt})
		if err != nil {
			return "", nil, "", &claimFailure{class: cikit.FailureInfrastructure, err: fmt.Errorf("minting the job's checkout credential: %w", err)}
		}
		jc.Source = src
	}
	b, err := encodeContext(jc)
	if err != nil {
		return "", nil, "", err
	}
	return jt, b, st, nil
}

// refuse fails a claimed attempt that cannot be handed to a runner, with
// class: a configuration failure (cikit.FailureConfig) is never retried,
// an infrastructure one by the job's policy.
func (s *Server) refuse(ctx context.Context, rc *runnerClaims, o *Offer, l *lease.Lease, class cikit.FailureClass, why error) {
	ctx = context.WithoutCancel(ctx)
	a := l.Attempt
	s.log.Warn("fleet: job refused at claim", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", why)
	cr, _ := s.completes.Do(ctx, lease.CompleteRequest{Attempt: a, Token: l.Token, Params: &dag.JobCompleteParams{
		Outcome: cikit.JobFailed, ExitCode: -1, Reason: why.Error(), FailureClass: class}})
	s.runners.waiting(rc, s.cfg.Now(), 0) // idle again
	s.dispatch.Release(o.RunID, o.JobID, o.Attempt)
	if cr.Err != nil {
		// The lease expires and the reaper ends the attempt.
		s.log.Error("fleet: failing a refused job failed", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", cr.Err)
		return
	}
	s.Dispatch(ctx, cr.Result)
}

// parseWait reads a claim's wait: a Go duration ("50s") or seconds.
func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("wait %q is neither a duration such as 50s nor a number of seconds", v)
	}
	return d, nil
}

// job authenticates a job-scoped call: the job token must verify, be
// unexpired and name the job of the path.
func (s *Server) job(w http.ResponseWriter, r *http.Request) (*jobClaims, lease.Attempt, bool) {
	token, ok := bearer(r.Header.Get("Authorization"))
	var c jobClaims
	if !ok || s.signer.verify(token, kindJob, &c) != nil {
		writeError(w, http.StatusUnauthorized, "a valid job token is required")
		return nil, lease.Attempt{}, false
	}
	if c.RunID != r.PathValue("run_id") || c.JobID != r.PathValue("job_id") {
		writeError(w, http.StatusForbidden, "the job token is for another job")
		return nil, lease.Attempt{}, false
	}
	if !s.cfg.Now().Before(c.Expires) {
		writeError(w, http.StatusUnauthorized, "the job token has expired")
		return nil, lease.Attempt{}, false
	}
	if s.refuseRunner(w, c.RunnerID, s.checkRunner(r.Context(), c.RunnerID)) {
		return nil, lease.Attempt{}, false
	}
	return &c, lease.Attempt{RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt}, true
}

// authorizeLogWrite fences a log chunk or finish: the job token must be
// the attempt's, and its lease current.
func (s *Server) authorizeLogWrite(r *http.Request, key logs.Key) error {
	token, ok := bearer(r.Header.Get("Authorization"))
	var c jobClaims
	if !ok || s.signer.verify(token, kindJob, &c) != nil {
		return fmt.Errorf("%w: a valid job token is required", logs.ErrUnauthenticated)
	}
	if c.RunID != key.RunID || c.JobID != key.JobID || c.Attempt != key.Attempt {
		return fmt.Errorf("%w: the job token is for another job attempt", logs.ErrForbidden)
	}
	if !s.cfg.Now().Before(c.Expires) {
		return fmt.Errorf("%w: the job token has expired", logs.ErrUnauthenticated)
	}
	if err := s.checkRunner(r.Context(), c.RunnerID); err != nil {
		if re, ok := errors.AsType[*RunnerRefusedError](err); ok {
			return fmt.Errorf("%w: %v", logs.ErrUnauthenticated, re)
		}
		return err
	}
	err := s.cfg.Leases.Check(r.Context(), lease.Attempt{RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt}, c.Lease)
	if errors.Is(err, lease.ErrFenced) {
		return fmt.Errorf("%w: %v", logs.ErrStale, err)
	}
	return err
}

type heartbeatResponse struct {
	LeaseExpiresAt   time.Time `json:"lease_expires_at"`
	LeaseRemainingMS int64     `json:"lease_remaining_ms"`
	CancelRequested  bool      `json:"cancel_requested"`
}

// remainingMS is what a lease ending at expires has left, in whole
// milliseconds rounded down: measured after the lease was written, it is
// at most what it had left when the runner sent its request, which is
// what the runner counts from (see docs/runner-protocol.md).
func remainingMS(m *lease.Manager, expires time.Time) int64 {
	return m.Remaining(expires).Milliseconds()
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	c, a, ok := s.job(w, r)
	if !ok {
		return
	}
	rn, err := s.cfg.Leases.Renew(r.Context(), a, c.Lease)
	s.ended(c, a, stale(err))
	if err != nil {
		s.leaseError(w, a, err)
		return
	}
	if c.Secrets {
		s.renewSecrets(r.Context(), a)
	}
	writeJSON(w, http.StatusOK, heartbeatResponse{LeaseExpiresAt: rn.Expires.UTC(), LeaseRemainingMS: remainingMS(s.cfg.Leases, rn.Expires),
		CancelRequested: rn.CancelRequested})
}

// completeRequest is the body of a completion.
type completeRequest struct {
	Result       cikit.JobState     `json:"result"`
	ExitCode     int                `json:"exit_code"`
	FailureClass cikit.FailureClass `json:"failure_class"`
	Reason       string             `json:"reason"`
	Log          *struct {
		TotalBytes int64  `json:"total_bytes"`
		SHA256     string `json:"sha256"`
	} `json:"log"`
	// The job's report (see dag.JobResult), each bounded (see result).
	Outputs            map[string]string   `json:"outputs"`
	Annotations        []cikit.Annotation  `json:"annotations"`
	Commit             string              `json:"commit"`
	CheckoutDurationMS int64               `json:"checkout_duration_ms"`
	EnvNames           []string            `json:"env_names"`
	Caches             []cikit.CacheReport `json:"caches"`
	ImageRef           string              `json:"image"`
	ImageDigest        string              `json:"image_digest"`
}

type stateResponse struct {
	State cikit.JobState `json:"state"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	c, a, ok := s.job(w, r)
	if !ok {
		return
	}
	var req completeRequest
	if !decodeBodyMax(w, r, &req, maxCompleteBodyBytes) {
		return
	}
	switch req.Result {
	case cikit.JobSucceeded, cikit.JobCancelled:
	case cikit.JobFailed:
		switch req.FailureClass {
		case "":
			req.FailureClass = cikit.FailureScript
		case cikit.FailureScript, cikit.FailureTimeout, cikit.FailureInfrastructure, cikit.FailureConfig:
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("failure_class %q is not script, timeout, infrastructure or config", req.FailureClass))
			return
		}
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("result %q is not succeeded, failed or cancelled", req.Result))
		return
	}
	result, ferr := req.result()
	if ferr != nil {
		writeJSON(w, ferr.status, errorBody{Error: ferr.Error(), Field: ferr.field})
		return
	}
	s.failTruncated(a, &req)
	// The completion joins those of other requests in one lease call.
	// Made even when the runner has gone meanwhile, so that what the
	// completion made READY is dispatched and its tenant's place freed.
	cr, _ := s.completes.Do(context.WithoutCancel(r.Context()), lease.CompleteRequest{Attempt: a, Token: c.Lease, Params: &dag.JobCompleteParams{
		Outcome: req.Result, ExitCode: req.ExitCode, Reason: req.Reason, FailureClass: req.FailureClass, Result: result}})
	res, err := cr.Result, cr.Err
	s.ended(c, a, err == nil || stale(err))
	if err != nil {
		if errors.Is(err, lease.ErrFenced) {
			// A completion repeated after its answer was lost finds the
			// attempt ended as it said.
			if st, ok := s.endedAs(r.Context(), a, req.Result); ok {
				writeJSON(w, http.StatusOK, stateResponse{State: st})
				return
			}
		}
		s.leaseError(w, a, err)
		return
	}
	s.Dispatch(context.WithoutCancel(r.Context()), res)
	writeJSON(w, http.StatusOK, stateResponse{State: jobState(res, a.JobID, req.Result)})
}

// failTruncated turns the success of an attempt whose log was truncated
// into a failure, when the server is configured so.
func (s *Server) failTruncated(a lease.Attempt, req *completeRequest) {
	if !s.cfg.FailTruncatedLogs || s.cfg.Logs == nil || req.Result != cikit.JobSucceeded {
		return
	}
	dropped, truncated := s.cfg.Logs.Truncated(logs.Key{RunID: a.RunID, JobID: a.JobID, Attempt: a.Attempt})
	if !truncated {
		return
	}
	req.Result, req.FailureClass = cikit.JobFailed, cikit.FailureScript
	req.Reason = fmt.Sprintf("the log was truncated at %s (%d bytes of output dropped), and this server fails a job whose log is truncated",
		cikit.FormatBytes(s.cfg.Logs.MaxLogBytes()), dropped)
}

// endedAs reports whether attempt a ended with result, and the job's state
// now. It reads the job and, when it has moved on to another attempt, the
// job's ended attempts: never the whole run.
func (s *Server) endedAs(ctx context.Context, a lease.Attempt, result cikit.JobState) (cikit.JobState, bool) {
	j, err := s.cfg.Jobs.JobGet(ctx, a.RunID, a.JobID)
	if err != nil {
		return "", false
	}
	if j.Attempt == a.Attempt {
		return j.State, j.State == result
	}
	ended, err := s.cfg.Jobs.JobAttempts(ctx, a.RunID, a.JobID)
	if err != nil {
		return "", false
	}
	for _, e := range ended {
		if e.Attempt == a.Attempt {
			return j.State, e.State == result
		}
	}
	return "", false
}

// jobState is the state of job after res; want when res does not list it.
func jobState(res *dag.TransitionResult, jobID string, want cikit.JobState) cikit.JobState {
	st := want
	if res == nil {
		return st
	}
	for _, j := range res.Changed {
		if j.ID() == jobID {
			st = j.State // the last change of the job is its state now
		}
	}
	return st
}

func (s *Server) giveBack(w http.ResponseWriter, r *http.Request) {
	c, a, ok := s.job(w, r)
	if !ok {
		return
	}
	res, err := s.cfg.Leases.Return(r.Context(), a, c.Lease, "returned by runner "+c.RunnerID)
	s.ended(c, a, err == nil || stale(err))
	if err != nil {
		s.leaseError(w, a, err)
		return
	}
	s.Dispatch(context.WithoutCancel(r.Context()), res)
	writeJSON(w, http.StatusOK, stateResponse{State: jobState(res, a.JobID, cikit.JobReady)})
}

// ended records a job-scoped call of a runner about attempt a: over says
// the runner no longer runs it.
func (s *Server) ended(c *jobClaims, a lease.Attempt, over bool) {
	s.runners.jobCall(c.RunnerID, a, s.cfg.Now(), over)
	if over {
		s.dispatch.Release(a.RunID, a.JobID, a.Attempt)
		s.refs.forget(a)
		if c.Secrets {
			s.endSecrets(context.Background(), a)
		}
	}
}

// stale reports whether err refuses a call for a stale attempt.
func stale(err error) bool {
	return errors.Is(err, lease.ErrFenced) || errors.Is(err, cikit.ErrInvalidTransition)
}

// leaseError answers a refused lease operation.
func (s *Server) leaseError(w http.ResponseWriter, a lease.Attempt, err error) {
	if stale(err) {
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Stale: true})
		return
	}
	s.log.Error("fleet: lease operation failed", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", err)
	writeError(w, http.StatusServiceUnavailable, "the job store is unavailable; try again")
}

// Dispatch queues and offers the jobs that the transitions made READY, and
// the jobs whose turn came in the concurrency groups they freed. A job
// that became READY as a retry is offered after its backoff. Offers of
// attempts the transitions ended (a cancelled run's jobs) are withdrawn.
// It costs what the results list, never a read of their runs.
func (s *Server) Dispatch(ctx context.Context, results ...*dag.TransitionResult) {
	var ready []*dag.Job
	var ended []lease.Attempt
	for _, res := range results {
		if res == nil {
			continue
		}
		for _, j := range res.Changed {
			if j.State != cikit.JobRunning && j.State != cikit.JobCancelRequested {
				// An attempt that ended, and the one before a retry,
				// free their tenant's place and are offered no more.
				s.dispatch.Release(j.RunID, j.ID(), j.Attempt)
				s.dispatch.Release(j.RunID, j.ID(), j.Attempt-1)
				ended = append(ended, lease.Attempt{RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt - 1})
				if j.State.Terminal() {
					ended = append(ended, lease.Attempt{RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt})
				}
			}
			if j.State == cikit.JobReady {
				ready = append(ready, j)
			}
		}
		for _, k := range res.Freed() {
			j, err := s.cfg.Jobs.GroupNext(ctx, k)
			if err != nil {
				s.log.Error("fleet: next job of a concurrency group", "group", k.Group, "branch", k.Branch, "error", err)
				continue
			}
			if j != nil {
				ready = append(ready, j)
			}
		}
	}
	s.dispatch.Withdraw(ended...)
	if err := s.queueJobs(ctx, ready, tenants{}); err != nil && ctx.Err() == nil {
		s.log.Error("fleet: queueing jobs", "jobs", len(ready), "error", err)
	}
}

// DispatchRun queues and offers the READY jobs of a run, and offers its
// QUEUED ones again: after creating it, or after a restart of the process
// that dispatched it. Offers are idempotent. A retried attempt is offered
// once its backoff, counted from when it became ready, has passed. It
// reads the run's jobs once and queues them in batches.
func (s *Server) DispatchRun(ctx context.Context, runID string) error {
	jobs, err := s.cfg.Jobs.JobList(ctx, runID)
	if err != nil {
		return err
	}
	return s.DispatchJobs(ctx, jobs)
}

// DispatchJobs is DispatchRun for the given jobs, as JobList or
// dag.Store.JobListWaiting return them: READY ones are queued, in batches
// of one store call each (dag.Store.JobApply), and offered; QUEUED ones
// are offered again; the others are left alone. It returns the store's
// error, or ctx's once it ended, and then stops; a job refused because it
// moved on meanwhile is no error.
func (s *Server) DispatchJobs(ctx context.Context, jobs []*dag.Job) error {
	tn := tenants{}
	var ready []*dag.Job
	for _, j := range jobs {
		switch j.State {
		case cikit.JobReady:
			ready = append(ready, j)
		case cikit.JobQueued:
			s.offer(ctx, j, nil, tn)
		}
	}
	return s.queueJobs(ctx, ready, tn)
}

// DispatchJob is DispatchRun for one attempt of one job, such as one a
// "job.ready" event names: nothing happens when the job has moved on to
// another attempt or is no longer waiting.
func (s *Server) DispatchJob(ctx context.Context, runID, jobID string, attempt int) error {
	j, err := s.cfg.Jobs.JobGet(ctx, runID, jobID)
	if err != nil {
		return err
	}
	if j.Attempt != attempt {
		return nil
	}
	return s.DispatchJobs(ctx, []*dag.Job{j})
}

// tenants caches whom runs' jobs run for, across the jobs of one
// dispatch.
type tenants map[string]string

// offer offers a QUEUED job; run, when known, spares reading it for its
// tenant.
func (s *Server) offer(ctx context.Context, j *dag.Job, run *dag.Run, tn tenants) {
	t, ok := tn[j.RunID]
	if !ok {
		t = s.tenant(ctx, run, j.RunID)
		tn[j.RunID] = t
	}
	o := &Offer{RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt, Spec: j.Spec, Tenant: t}
	if wait := s.backoffLeft(j); wait > 0 {
		s.dispatch.OfferAfter(o, wait)
	} else {
		s.dispatch.Offer(o)
	}
}

// backoffLeft is how long a retried attempt must still wait before it is
// offered: its backoff counted from when it became ready.
func (s *Server) backoffLeft(j *dag.Job) time.Duration {
	if j.Attempt <= 1 || j.ReadyAt.IsZero() {
		return 0
	}
	return j.ReadyAt.Add(s.cfg.RetryBackoff(j.Attempt)).Sub(s.cfg.Now())
}

// tenant returns whom the jobs of run runID run for ("" for nobody in
// particular), reading the run unless it is given.
func (s *Server) tenant(ctx context.Context, run *dag.Run, runID string) string {
	if s.cfg.Tenant == nil {
		return ""
	}
	if run == nil {
		var err error
		if run, err = s.cfg.Jobs.RunGet(ctx, runID); err != nil {
			s.log.Error("fleet: reading a run for its tenant; its jobs go without", "run", runID, "error", err)
			return ""
		}
	}
	return s.cfg.Tenant(run)
}

// maxQueueBatch is the most READY jobs one store call queues.
const maxQueueBatch = 256

// queueJobs moves READY jobs to QUEUED and offers them, maxQueueBatch at
// a time. A job another server queued first is offered too: that
// server's runners are not ours (a claim decides). A job of a busy
// concurrency group waits for its turn. It returns the store's error, or
// ctx's once it ended.
func (s *Server) queueJobs(ctx context.Context, jobs []*dag.Job, tn tenants) error {
	for lo := 0; lo < len(jobs); lo += maxQueueBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := jobs[lo:min(lo+maxQueueBatch, len(jobs))]
		evs := make([]*dag.JobEvent, len(batch))
		for i, j := range batch {
			evs[i] = &dag.JobEvent{Kind: dag.EventQueue, RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt}
		}
		results, err := s.cfg.Jobs.JobApply(ctx, evs)
		if err != nil {
			return err
		}
		var taken []dag.JobKey
		var takenAttempts []int
		for i, r := range results {
			j := batch[i]
			switch {
			case errors.Is(r.Err, cikit.ErrInvalidTransition):
				taken, takenAttempts = append(taken, dag.JobKey{RunID: j.RunID, JobID: j.ID()}), append(takenAttempts, j.Attempt)
			case errors.Is(r.Err, dag.ErrGroupBusy):
			case r.Err != nil:
				s.log.Error("fleet: queueing a job", "run", j.RunID, "job", j.ID(), "attempt", j.Attempt, "error", r.Err)
			default:
				s.offer(ctx, j, r.Run, tn)
				// Queueing a job with cancel_in_progress cancels others;
				// their consequences may free groups or make jobs READY.
				if len(r.Changed) > 1 {
					s.Dispatch(ctx, &dag.TransitionResult{Changed: r.Changed[1:], Run: r.Run})
				}
			}
		}
		if len(taken) == 0 {
			continue
		}
		now, err := s.cfg.Jobs.JobGetMany(ctx, taken)
		if err != nil {
			return err
		}
		for i, j := range now {
			if j != nil && j.State == cikit.JobQueued && j.Attempt == takenAttempts[i] {
				s.offer(ctx, j, nil, tn)
			}
		}
	}
	return nil
}

type errorBody struct {
	Error string `json:"error"`
	Stale bool   `json:"stale,omitempty"`
	// Field names the field of the request refused, when one was.
	Field string `json:"field,omitempty"`
	// Code tells apart answers of the same status that a runner acts on
	// differently (see the artifact and cache calls).
	Code string `json:"code,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody decodes a JSON body into v, answering 400 or 413 when it
// cannot, or 408 or 503 when the server's body guard cut the body (see
// internal/httpguard), which the runner sends again.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBodyMax(w, r, v, maxBodyBytes)
}

// decodeBodyMax is decodeBody for a body of at most limit bytes.
func decodeBodyMax(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", limit))
		} else if status, retryAfter := httpguard.Status(err); status != 0 {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			writeError(w, status, "reading the body: "+err.Error())
		} else {
			writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not the JSON this call takes: "+err.Error())
		return false
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}
