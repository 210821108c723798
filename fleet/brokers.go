package fleet

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/lease"
)

// ArtifactBrokers makes the artifacts.Broker of a job attempt, for the
// runner protocol's artifact and cache calls (see ServerConfig.Artifacts).
// The platform's artifacts.Service satisfies it.
//
// ForJob is called for each call a runner makes, after the call's job
// token and the attempt's lease were checked; it must be cheap (the
// Broker it returns is used for that one call). The Broker's errors
// decide the answer: artifacts.ErrRefused is 400 with its message,
// artifacts.ErrCacheExists 409, cikit.ErrNotFound 404; any other error is
// 500 with a generic message, and logged.
type ArtifactBrokers interface {
	ForJob(ref artifacts.JobRef) artifacts.Broker
}

// Limits of the artifact and cache calls, besides artifacts.MaxNameLen
// and artifacts.MaxRestoreKeys.
const (
	// maxUploadCompleteBodyBytes bounds the body of an upload's
	// completion, which lists the ETag of each part: S3 takes up to
	// 10,000 parts.
	maxUploadCompleteBodyBytes = 1 << 20
	// maxETags and maxETagBytes bound those ETags.
	maxETags     = 10000
	maxETagBytes = 256
	// maxShortField bounds an artifact's type and a SHA-256 in hex.
	maxShortField = 128
	// maxListJobs bounds the jobs one artifact listing names.
	maxListJobs = 1024
	// maxCacheReports bounds the cache reports of a completion.
	maxCacheReports = 64
	// maxJobRefs bounds the attempts whose artifacts.JobRef a Server
	// keeps between calls.
	maxJobRefs = 4096
)

// errNotConfigured is the answer of every artifact and cache call of a
// Server without ServerConfig.Artifacts.
const errNotConfigured = "artifacts are not configured on this server"

// Codes of the error bodies of the artifact and cache calls, for the
// answers a runner tells apart by more than the status.
const (
	codeCacheExists   = "cache_exists"
	codeNotFound      = "not_found"
	codeNotConfigured = "not_configured"
)

// routeArtifacts registers the artifact and cache calls. They are
// registered without methods so that a wrong method is answered 405,
// not the catch-all's 404.
func (s *Server) routeArtifacts() {
	s.mux.HandleFunc("/v1/jobs/{run_id}/{job_id}/uploads", s.brokerCall(http.MethodPost, brokerHandler{limit: maxBodyBytes, decode: decodeUploadRequest,
		serve: func(ctx context.Context, _ *http.Request, b artifacts.Broker, req any) (int, any, error) {
			u, err := b.CreateUpload(ctx, *req.(*artifacts.UploadRequest))
			return http.StatusCreated, u, err
		}}))
	s.mux.HandleFunc("/v1/jobs/{run_id}/{job_id}/uploads/{upload_id}/complete", s.brokerCall(http.MethodPost, brokerHandler{limit: maxUploadCompleteBodyBytes, decode: decodeUploadComplete,
		serve: func(ctx context.Context, r *http.Request, b artifacts.Broker, req any) (int, any, error) {
			a, err := b.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: r.PathValue("upload_id"), ETags: req.(*uploadCompleteBody).ETags})
			return http.StatusOK, a, err
		}}))
	s.mux.HandleFunc("/v1/jobs/{run_id}/{job_id}/uploads/{upload_id}", s.brokerCall(http.MethodDelete, brokerHandler{
		serve: func(ctx context.Context, r *http.Request, b artifacts.Broker, _ any) (int, any, error) {
			return http.StatusNoContent, nil, b.AbortUpload(ctx, r.PathValue("upload_id"))
		}}))
	s.mux.HandleFunc("/v1/jobs/{run_id}/{job_id}/artifacts", s.brokerCall(http.MethodPost, brokerHandler{limit: maxBodyBytes, decode: decodeListRequest,
		serve: func(ctx context.Context, _ *http.Request, b artifacts.Broker, req any) (int, any, error) {
			as, err := b.ListArtifacts(ctx, *req.(*artifacts.ListRequest))
			if as == nil {
				as = []artifacts.Artifact{}
			}
			return http.StatusOK, listResponse{Artifacts: as}, err
		}}))
	s.mux.HandleFunc("/v1/jobs/{run_id}/{job_id}/cache", s.brokerCall(http.MethodPost, brokerHandler{limit: maxBodyBytes, decode: decodeCacheQuery,
		serve: func(ctx context.Context, _ *http.Request, b artifacts.Broker, req any) (int, any, error) {
			hit, err := b.LookupCache(ctx, *req.(*artifacts.CacheQuery))
			return http.StatusOK, cacheResponse{Hit: hit}, err
		}}))
}

// brokerHandler serves one artifact or cache call, given the request's
// body already decoded by it and the attempt's Broker; it returns the
// answer's status and body, or the Broker's error.
type brokerHandler struct {
	// decode decodes and checks the body; a *fieldError refuses it.
	decode func(body []byte) (any, *fieldError)
	// limit bounds the body.
	limit int64
	// serve makes the call.
	serve func(ctx context.Context, r *http.Request, b artifacts.Broker, req any) (int, any, error)
}

// brokerCall returns the handler of an artifact or cache call answering
// method: it authenticates the job token, checks the body, fences the
// call by the attempt's lease as a heartbeat is, and calls the attempt's
// Broker.
func (s *Server) brokerCall(method string, h brokerHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s takes %s only", r.Method, r.URL.Path, method))
			return
		}
		if s.cfg.Artifacts == nil {
			writeJSON(w, http.StatusNotFound, errorBody{Error: errNotConfigured, Code: codeNotConfigured})
			return
		}
		c, a, ok := s.job(w, r)
		if !ok {
			return
		}
		var req any
		if h.decode != nil {
			body, ok := readBody(w, r, h.limit)
			if !ok {
				return
			}
			var ferr *fieldError
			if req, ferr = h.decode(body); ferr != nil {
				writeJSON(w, ferr.status, errorBody{Error: ferr.Error(), Field: ferr.field})
				return
			}
		}
		err := s.cfg.Leases.Check(r.Context(), a, c.Lease)
		s.ended(c, a, stale(err))
		if err != nil {
			s.brokerLeaseError(w, r, a, err)
			return
		}
		ref, err := s.jobRef(r.Context(), a)
		if err != nil {
			s.brokerLeaseError(w, r, a, err)
			return
		}
		status, out, err := h.serve(r.Context(), r, s.cfg.Artifacts.ForJob(ref), req)
		if err != nil {
			s.brokerError(w, r, a, err)
			return
		}
		if out == nil {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, out)
	}
}

// brokerLeaseError answers a call whose lease check or job read failed:
// a stale attempt as a heartbeat's is answered.
func (s *Server) brokerLeaseError(w http.ResponseWriter, r *http.Request, a lease.Attempt, err error) {
	if !stale(err) && shuttingDown(r, err) {
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down; try again")
		return
	}
	s.leaseError(w, a, err)
}

// brokerError answers the error of a Broker.
func (s *Server) brokerError(w http.ResponseWriter, r *http.Request, a lease.Attempt, err error) {
	switch {
	case errors.Is(err, artifacts.ErrCacheExists):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Code: codeCacheExists})
	case errors.Is(err, artifacts.ErrRefused):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, cikit.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error(), Code: codeNotFound})
	case shuttingDown(r, err):
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down; try again")
	default:
		s.log.Error("fleet: artifact call failed", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "call", r.Method+" "+r.URL.Path, "error", err)
		writeError(w, http.StatusInternalServerError, "the artifact store failed; try again")
	}
}

// shuttingDown reports whether err is the request's context ending (the
// server shutting down, or the runner gone) rather than a failure.
func shuttingDown(r *http.Request, err error) bool {
	return r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// readBody reads a body of at most limit bytes, answering as decodeBody
// does when it cannot.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	var raw json.RawMessage
	if !decodeBodyMax(w, r, &raw, limit) {
		return nil, false
	}
	return raw, true
}

// decodeStrict decodes body into v, refusing fields v does not have and
// anything after the value.
func decodeStrict(body []byte, v any) *fieldError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("body", "not the JSON this call takes: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("body", "not the JSON this call takes: data after the value")
	}
	return nil
}

// checkName refuses an artifact's name or a cache key that is empty,
// longer than artifacts.MaxNameLen or not storable.
func checkName(field, v string) *fieldError {
	switch {
	case v == "":
		return invalid(field, "is empty")
	case len(v) > artifacts.MaxNameLen:
		return invalid(field, "is %d bytes; at most %d are allowed (artifacts.MaxNameLen)", len(v), artifacts.MaxNameLen)
	}
	if why := storable(v); why != "" {
		return invalid(field, "%s", why)
	}
	return nil
}

// checkShort refuses a short field (a type, a report type, a digest)
// longer than maxShortField or not storable; empty is allowed.
func checkShort(field, v string, limit int) *fieldError {
	if len(v) > limit {
		return invalid(field, "is %d bytes; at most %d are allowed", len(v), limit)
	}
	if why := storable(v); why != "" {
		return invalid(field, "%s", why)
	}
	return nil
}

func decodeUploadRequest(body []byte) (any, *fieldError) {
	var req artifacts.UploadRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkName("name", req.Name); err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ name, v string }{{"type", req.Type}, {"report", req.Report}, {"sha256", req.SHA256}} {
		if err := checkShort(f.name, f.v, maxShortField); err != nil {
			return nil, err
		}
	}
	return &req, nil
}

// uploadCompleteBody is the body of an upload's completion: its upload
// ID is the path's.
type uploadCompleteBody struct {
	ETags []string `json:"etags,omitempty"`
}

func decodeUploadComplete(body []byte) (any, *fieldError) {
	var req uploadCompleteBody
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if len(req.ETags) > maxETags {
		return nil, invalid("etags", "%d ETags; at most %d are allowed", len(req.ETags), maxETags)
	}
	for i, e := range req.ETags {
		if err := checkShort(fmt.Sprintf("etags[%d]", i), e, maxETagBytes); err != nil {
			return nil, err
		}
	}
	return &req, nil
}

func decodeListRequest(body []byte) (any, *fieldError) {
	var req artifacts.ListRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if len(req.Jobs) > maxListJobs {
		return nil, invalid("jobs", "%d jobs; at most %d are allowed", len(req.Jobs), maxListJobs)
	}
	for i, j := range req.Jobs {
		if err := checkName(fmt.Sprintf("jobs[%d]", i), j); err != nil {
			return nil, err
		}
	}
	if req.Name != "" {
		if err := checkName("name", req.Name); err != nil {
			return nil, err
		}
	}
	if err := checkShort("type", req.Type, maxShortField); err != nil {
		return nil, err
	}
	return &req, nil
}

func decodeCacheQuery(body []byte) (any, *fieldError) {
	var q artifacts.CacheQuery
	if err := decodeStrict(body, &q); err != nil {
		return nil, err
	}
	if err := checkName("key", q.Key); err != nil {
		return nil, err
	}
	if n := len(q.FallbackKeys) + len(q.RestoreKeys); n > artifacts.MaxRestoreKeys {
		return nil, invalid("restore_keys", "%d fallback and restore keys together; at most %d are allowed (artifacts.MaxRestoreKeys)", n, artifacts.MaxRestoreKeys)
	}
	for i, k := range q.FallbackKeys {
		if err := checkName(fmt.Sprintf("fallback_keys[%d]", i), k); err != nil {
			return nil, err
		}
	}
	for i, k := range q.RestoreKeys {
		if err := checkName(fmt.Sprintf("restore_keys[%d]", i), k); err != nil {
			return nil, err
		}
	}
	return &q, nil
}

// listResponse is the answer to an artifact listing.
type listResponse struct {
	Artifacts []artifacts.Artifact `json:"artifacts"`
}

// cacheResponse is the answer to a cache lookup: Hit is null for a miss.
type cacheResponse struct {
	Hit *artifacts.CacheHit `json:"hit"`
}

// jobRef returns the artifacts.JobRef of attempt a: from the Server's
// cache of them, or made from the run's context (the Server's cache of
// those) and the job's spec, read from the store.
func (s *Server) jobRef(ctx context.Context, a lease.Attempt) (artifacts.JobRef, error) {
	if ref, ok := s.refs.get(a); ok {
		return ref, nil
	}
	rc, _, err := s.runContext(ctx, a.RunID)
	if err != nil {
		return artifacts.JobRef{}, err
	}
	j, err := s.cfg.Jobs.JobGet(ctx, a.RunID, a.JobID)
	if err != nil {
		return artifacts.JobRef{}, err
	}
	ref := makeJobRef(a, rc, j.Spec, s.cfg.CacheScopes)
	s.refs.put(a, ref)
	return ref, nil
}

// makeJobRef is the artifacts.JobRef of attempt a of the job of spec in
// a run of context rc (nil for none), artifacts.JobRefFor's, with the
// cache scopes scopes gives ("" for nil) unless the job's Admission sets
// its scope (artifacts.JobScopes).
func makeJobRef(a lease.Attempt, rc *cikit.RunContext, spec *cikit.JobSpec, scopes func(*cikit.RunContext) (string, []string)) artifacts.JobRef {
	ref := artifacts.JobRefFor(rc, a.RunID, spec, a.Attempt)
	write, read := "", []string{""}
	if scopes != nil {
		write, read = scopes(rc)
	}
	ref.Scope, ref.ReadScopes = artifacts.JobScopes(rc, spec, write, read)
	return ref
}

// runContext returns the context and number of run runID, from the
// Server's cache or read with the run.
func (s *Server) runContext(ctx context.Context, runID string) (*cikit.RunContext, int64, error) {
	if rc, number, ok := s.contexts.get(runID); ok {
		return rc, number, nil
	}
	run, err := s.cfg.Jobs.RunGet(ctx, runID)
	if err != nil {
		return nil, 0, err
	}
	s.contexts.put(runID, run.Context, run.Number)
	return run.Context, run.Number, nil
}

// refCache keeps the artifacts.JobRef of the attempts that made artifact
// calls last, at most maxJobRefs of them, forgetting the oldest first and
// an attempt's once its runner says it ended.
type refCache struct {
	mu    sync.Mutex
	refs  map[lease.Attempt]*list.Element // of *cachedRef
	order list.List                       // oldest first
}

type cachedRef struct {
	a   lease.Attempt
	ref artifacts.JobRef
}

func (c *refCache) get(a lease.Attempt) (artifacts.JobRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.refs[a]
	if !ok {
		return artifacts.JobRef{}, false
	}
	return e.Value.(*cachedRef).ref, true
}

func (c *refCache) put(a lease.Attempt, ref artifacts.JobRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == nil {
		c.refs = make(map[lease.Attempt]*list.Element)
	}
	if _, ok := c.refs[a]; ok {
		return
	}
	for len(c.refs) >= maxJobRefs {
		old := c.order.Remove(c.order.Front()).(*cachedRef)
		delete(c.refs, old.a)
	}
	c.refs[a] = c.order.PushBack(&cachedRef{a: a, ref: ref})
}

func (c *refCache) forget(a lease.Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.refs[a]; ok {
		c.order.Remove(e)
		delete(c.refs, a)
	}
}

// checkCaches checks the cache reports of a completion.
func checkCaches(cs []cikit.CacheReport) *fieldError {
	if len(cs) > maxCacheReports {
		return tooLarge("caches", "%d cache reports; at most %d are allowed", len(cs), maxCacheReports)
	}
	for i, c := range cs {
		f := fmt.Sprintf("caches[%d]", i)
		for _, fv := range [...]struct {
			name, v string
			max     int
		}{{"step", c.Step, maxAnnotationFieldBytes}, {"key", c.Key, artifacts.MaxNameLen},
			{"matched_key", c.MatchedKey, artifacts.MaxNameLen}, {"note", c.Note, maxAnnotationFieldBytes}} {
			if len(fv.v) > fv.max {
				return tooLarge(f+"."+fv.name, "%d bytes; at most %d are allowed", len(fv.v), fv.max)
			}
			if why := storable(fv.v); why != "" {
				return invalid(f+"."+fv.name, "%s", why)
			}
		}
		if c.RestoredInMS < 0 || c.Size < 0 || c.SavedSize < 0 {
			return invalid(f, "a duration or size is negative")
		}
	}
	return nil
}
