package fleet

import (
	"container/list"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// JobRef names the attempt a claim hands out and the job token it runs
// with, for a SourceMinter.
type JobRef struct {
	RunID   string
	JobID   string
	Attempt int
	// Token is the attempt's job token: the credential of the platform's
	// own git server (see Server.AuthorizeFetch), valid while the
	// attempt's lease is.
	Token string
}

// SourceMinter mints where a claimed job's runner fetches its commit:
// the repository's URL and a short-lived, read-only credential scoped to
// the job (a GitHub installation token narrowed to the repository, a
// GitLab job token, or the job token itself for the platform's own git
// server). The Server calls it once per claim, with the run's context
// (nil for a run whose context names neither a repository nor a commit,
// such as one created without a context), after the attempt's lease is
// taken.
//
// It returns nil and no error for a job that has nothing to fetch. An
// error fails the attempt as an infrastructure failure
// (cikit.FailureInfrastructure), which the job's retry policy may retry:
// the forge may be down for a moment. It must return within ctx.
type SourceMinter interface {
	MintSource(ctx context.Context, run *cikit.RunContext, job JobRef) (*cikit.CheckoutSource, error)
}

// SourceMinterFunc is a SourceMinter as a function.
type SourceMinterFunc func(ctx context.Context, run *cikit.RunContext, job JobRef) (*cikit.CheckoutSource, error)

// MintSource calls f.
func (f SourceMinterFunc) MintSource(ctx context.Context, run *cikit.RunContext, job JobRef) (*cikit.CheckoutSource, error) {
	return f(ctx, run, job)
}

// claimFailure is why a claimed attempt cannot be handed out: class says
// whether it is retried.
type claimFailure struct {
	class cikit.FailureClass
	err   error
}

func (f *claimFailure) Error() string { return f.err.Error() }

// jobContext builds what the runner of a claimed job is told beyond its
// spec: the run's context, read with the run; the results and outputs of
// the jobs it needs, read in one JobGetMany. The source is minted later,
// with the job token, which names the run's repository.
func (s *Server) jobContext(ctx context.Context, o *Offer) (*cikit.JobContext, error) {
	rc, number, err := s.runContext(ctx, o.RunID)
	if err != nil {
		return nil, &claimFailure{class: cikit.FailureInfrastructure, err: fmt.Errorf("reading the job's run: %w", err)}
	}
	jc := &cikit.JobContext{RunID: o.RunID, RunNumber: number, Attempt: o.Attempt}
	if rc != nil {
		jc.RunContext = *rc // shared with the cache, and never modified
	}
	if s.cfg.RunURL != nil {
		jc.RunURL = s.cfg.RunURL(o.RunID)
	}
	if len(o.Spec.Needs) == 0 {
		return jc, nil
	}
	keys := make([]dag.JobKey, len(o.Spec.Needs))
	for i, n := range o.Spec.Needs {
		keys[i] = dag.JobKey{RunID: o.RunID, JobID: n}
	}
	needs, err := s.cfg.Jobs.JobGetMany(ctx, keys)
	if err != nil {
		return nil, &claimFailure{class: cikit.FailureInfrastructure, err: fmt.Errorf("reading the jobs it needs: %w", err)}
	}
	jc.Needs = make(map[string]cikit.NeedResult, len(needs))
	for i, j := range needs {
		if j == nil {
			return nil, &claimFailure{class: cikit.FailureConfig, err: fmt.Errorf("the job needs %q, which its run does not have", keys[i].JobID)}
		}
		nr := cikit.NeedResult{Result: j.State}
		if j.Result != nil {
			nr.Outputs = j.Result.Outputs
		}
		jc.Needs[keys[i].JobID] = nr
	}
	return jc, nil
}

// runContextCacheBytes bounds the run contexts a Server keeps.
const runContextCacheBytes = 32 << 20

// contextCache keeps the contexts and numbers of the runs whose jobs
// were claimed last, which never change once a run is created: the jobs of a run are
// claimed with one read of it, not one each. It holds at most
// runContextCacheBytes of them, roughly counted, and forgets the oldest
// first.
type contextCache struct {
	mu    sync.Mutex
	runs  map[string]*list.Element // of *cachedContext
	order list.List                // oldest first
	bytes int
}

type cachedContext struct {
	runID  string
	rc     *cikit.RunContext // nil for a run without one
	number int64
	size   int
}

func (c *contextCache) get(runID string) (rc *cikit.RunContext, number int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.runs[runID]
	if !ok {
		return nil, 0, false
	}
	cc := e.Value.(*cachedContext)
	return cc.rc, cc.number, true
}

func (c *contextCache) put(runID string, rc *cikit.RunContext, number int64) {
	size := len(runID) + 256
	if rc != nil {
		size += len(rc.Payload) + 1024
		for k, v := range rc.Inputs {
			size += len(k) + len(v)
		}
		for k, v := range rc.InputTypes {
			size += len(k) + len(v)
		}
	}
	if size > runContextCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = make(map[string]*list.Element)
	}
	if _, ok := c.runs[runID]; ok {
		return
	}
	for c.bytes+size > runContextCacheBytes {
		old := c.order.Remove(c.order.Front()).(*cachedContext)
		delete(c.runs, old.runID)
		c.bytes -= old.size
	}
	c.runs[runID] = c.order.PushBack(&cachedContext{runID: runID, rc: rc, number: number, size: size})
	c.bytes += size
}

// encodeContext encodes a job's context for its claim, refusing one
// larger than a runner decodes.
func encodeContext(jc *cikit.JobContext) (json.RawMessage, error) {
	b, err := json.Marshal(jc)
	if err != nil {
		return nil, &claimFailure{class: cikit.FailureConfig, err: fmt.Errorf("encoding the job's context: %w", err)}
	}
	if len(b) > cikit.MaxJobContextBytes {
		outputs := 0
		for id, n := range jc.Needs {
			outputs += len(id)
			for k, v := range n.Outputs {
				outputs += len(k) + len(v)
			}
		}
		return nil, &claimFailure{class: cikit.FailureConfig, err: fmt.Errorf(
			"the job's context is %d bytes (the run's event payload %d, the outputs of the jobs it needs %d), more than the %s a runner takes (cikit.MaxJobContextBytes)",
			len(b), len(jc.Payload), outputs, cikit.FormatBytes(cikit.MaxJobContextBytes))}
	}
	return b, nil
}

// Limits of a completion's report, besides cikit.MaxOutputValueBytes,
// cikit.MaxOutputsBytes and cikit.MaxAnnotations.
const (
	// maxCompleteBodyBytes bounds a completion's body: outputs at their
	// limit, escaped in JSON, and the rest of the report.
	maxCompleteBodyBytes = 8 * cikit.MaxOutputsBytes
	// maxOutputNameBytes bounds the name of an output.
	maxOutputNameBytes = 256
	// maxAnnotationMessageBytes bounds an annotation's message, and
	// maxAnnotationFieldBytes its title, file and step.
	maxAnnotationMessageBytes = 16 << 10
	maxAnnotationFieldBytes   = 1 << 10
	// maxEnvNames and maxEnvNameBytes bound the names of the variables
	// of a job's environment.
	maxEnvNames     = 4096
	maxEnvNameBytes = 256
	// maxImageRefBytes bounds the reference of the image a job ran in.
	maxImageRefBytes = 512
)

// fieldError is a completion's field the server refuses: status is 400,
// or 413 for a field over its size limit.
type fieldError struct {
	status int
	field  string
	msg    string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func tooLarge(field, format string, args ...any) *fieldError {
	return &fieldError{status: http.StatusRequestEntityTooLarge, field: field, msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *fieldError {
	return &fieldError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

// storable reports why s cannot be stored (PostgreSQL refuses invalid
// UTF-8 and, in jsonb, NUL), or "".
func storable(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte"
	}
	return ""
}

// result checks the report of a completion and returns it as the store
// records it; nil when the completion reported nothing.
func (req *completeRequest) result() (*dag.JobResult, *fieldError) {
	if len(req.Outputs) == 0 && len(req.Annotations) == 0 && req.Commit == "" && req.CheckoutDurationMS == 0 && len(req.EnvNames) == 0 && len(req.Caches) == 0 &&
		req.ImageRef == "" && req.ImageDigest == "" {
		return nil, nil
	}
	total := 0
	for k, v := range req.Outputs {
		f := "outputs." + k
		if len(k) > maxOutputNameBytes {
			return nil, tooLarge("outputs", "an output name is %d bytes; at most %d are allowed", len(k), maxOutputNameBytes)
		}
		if k == "" {
			return nil, invalid("outputs", "an output has an empty name")
		}
		if why := storable(k); why != "" {
			return nil, invalid("outputs", "an output name %s", why)
		}
		if len(v) > cikit.MaxOutputValueBytes {
			return nil, tooLarge(f, "the value is %d bytes; at most %s are allowed (cikit.MaxOutputValueBytes)", len(v), cikit.FormatBytes(cikit.MaxOutputValueBytes))
		}
		if why := storable(v); why != "" {
			return nil, invalid(f, "the value %s", why)
		}
		total += len(k) + len(v)
	}
	if total > cikit.MaxOutputsBytes {
		return nil, tooLarge("outputs", "the outputs are %d bytes together; at most %s are allowed (cikit.MaxOutputsBytes)", total, cikit.FormatBytes(cikit.MaxOutputsBytes))
	}
	if len(req.Annotations) > cikit.MaxAnnotations {
		return nil, tooLarge("annotations", "%d annotations; at most %d are allowed (cikit.MaxAnnotations)", len(req.Annotations), cikit.MaxAnnotations)
	}
	for i, a := range req.Annotations {
		f := fmt.Sprintf("annotations[%d]", i)
		switch a.Level {
		case "error", "warning", "notice":
		default:
			return nil, invalid(f+".level", "%q is not error, warning or notice", a.Level)
		}
		for _, fv := range [...]struct {
			name, v string
			max     int
		}{{"message", a.Message, maxAnnotationMessageBytes}, {"title", a.Title, maxAnnotationFieldBytes},
			{"file", a.File, maxAnnotationFieldBytes}, {"step", a.Step, maxAnnotationFieldBytes}} {
			if len(fv.v) > fv.max {
				return nil, tooLarge(f+"."+fv.name, "%d bytes; at most %d are allowed", len(fv.v), fv.max)
			}
			if why := storable(fv.v); why != "" {
				return nil, invalid(f+"."+fv.name, "%s", why)
			}
		}
		if a.Line < 0 || a.EndLine < 0 || a.Col < 0 || a.EndColumn < 0 {
			return nil, invalid(f, "a line or column is negative")
		}
	}
	if c := req.Commit; c != "" {
		if _, err := hex.DecodeString(c); err != nil || len(c) != 40 && len(c) != 64 {
			return nil, invalid("commit", "%.80q is not a commit's SHA-1 or SHA-256 in hex", c)
		}
	}
	if req.CheckoutDurationMS < 0 {
		return nil, invalid("checkout_duration_ms", "%d is negative", req.CheckoutDurationMS)
	}
	if len(req.EnvNames) > maxEnvNames {
		return nil, tooLarge("env_names", "%d names; at most %d are allowed", len(req.EnvNames), maxEnvNames)
	}
	for i, n := range req.EnvNames {
		f := fmt.Sprintf("env_names[%d]", i)
		switch {
		case n == "":
			return nil, invalid(f, "an empty name")
		case len(n) > maxEnvNameBytes:
			return nil, tooLarge(f, "%d bytes; at most %d are allowed", len(n), maxEnvNameBytes)
		case strings.ContainsRune(n, '='):
			return nil, invalid(f, "a name holds '='")
		}
		if why := storable(n); why != "" {
			return nil, invalid(f, "%s", why)
		}
	}
	if ferr := checkCaches(req.Caches); ferr != nil {
		return nil, ferr
	}
	if ferr := checkImage(req.ImageRef, req.ImageDigest); ferr != nil {
		return nil, ferr
	}
	return &dag.JobResult{Outputs: req.Outputs, Annotations: req.Annotations, Commit: strings.ToLower(req.Commit),
		CheckoutDuration: time.Duration(req.CheckoutDurationMS) * time.Millisecond, EnvNames: req.EnvNames, Caches: req.Caches,
		ImageRef: req.ImageRef, ImageDigest: req.ImageDigest}, nil
}

// checkImage checks the image a completion says its job ran in: ref, as
// the job asked for it, at most maxImageRefBytes of UTF-8 without control
// characters, and digest an OCI digest, "sha256:" and 64 lowercase hex
// digits. Either may be empty.
func checkImage(ref, digest string) *fieldError {
	if len(ref) > maxImageRefBytes {
		return tooLarge("image", "the reference is %d bytes; at most %d are allowed", len(ref), maxImageRefBytes)
	}
	if why := storable(ref); why != "" {
		return invalid("image", "the reference %s", why)
	}
	if i := strings.IndexFunc(ref, unicode.IsControl); i >= 0 {
		return invalid("image", "the reference %.80q holds a control character at byte %d", ref, i)
	}
	if digest == "" {
		return nil
	}
	h, err := v1.NewHash(digest)
	if err == nil && h.Algorithm != "sha256" {
		// The images a runner pulls are addressed by SHA-256 alone.
		err = fmt.Errorf("the algorithm is %s", h.Algorithm)
	}
	if err != nil {
		return invalid("image_digest", "%.80q is not an OCI digest, sha256:<64 lowercase hex digits>: %v", digest, err)
	}
	return nil
}

// ErrFetchRefused is the error of Server.AuthorizeFetch for a token that
// does not allow a fetch: not a job token, expired, of an attempt that
// has ended, or of a run of another repository.
var ErrFetchRefused = errors.New("fleet: the token does not allow fetching this repository")

// AuthorizeFetch reports whether token is a live job token of a run of
// repository (cikit.RunContext.Repository, compared exactly): signed by
// this server's keys, unexpired, and of an attempt whose lease is still
// current. It is how the platform's own git server authorizes a runner's
// fetch of a job's commit, the job token being the credential its
// SourceMinter hands out; the token stops working when the attempt ends.
// It returns the attempt the token names, or an error matching
// ErrFetchRefused; any other error is the lease store failing.
func (s *Server) AuthorizeFetch(ctx context.Context, token, repository string) (JobRef, error) {
	var c jobClaims
	if s.signer.verify(token, kindJob, &c) != nil {
		return JobRef{}, fmt.Errorf("%w: not a valid job token", ErrFetchRefused)
	}
	if !s.cfg.Now().Before(c.Expires) {
		return JobRef{}, fmt.Errorf("%w: the job token has expired", ErrFetchRefused)
	}
	if c.Repository == "" || c.Repository != repository {
		return JobRef{}, fmt.Errorf("%w: the job token is for another repository", ErrFetchRefused)
	}
	if err := s.checkRunner(ctx, c.RunnerID); err != nil {
		if re, ok := errors.AsType[*RunnerRefusedError](err); ok {
			return JobRef{}, fmt.Errorf("%w: %v", ErrFetchRefused, re)
		}
		return JobRef{}, err
	}
	a := lease.Attempt{RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt}
	if err := s.cfg.Leases.Check(ctx, a, c.Lease); err != nil {
		if errors.Is(err, lease.ErrFenced) {
			return JobRef{}, fmt.Errorf("%w: the job's attempt has ended", ErrFetchRefused)
		}
		return JobRef{}, err
	}
	return JobRef{RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt, Token: token}, nil
}
