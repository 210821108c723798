package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// ErrNoArtifacts is a server that serves no artifacts and caches (one
// without them configured, or older than the calls): a job that declares
// artifacts or caches, or runs a step that uses them, cannot run there.
var ErrNoArtifacts = errors.New("agent: the server serves no artifacts and caches")

// Retries of an artifact or cache call answered as transient.
const (
	filesTries      = 5
	filesFirstRetry = 200 * time.Millisecond
	filesMaxRetry   = 5 * time.Second
)

// jobFiles is the artifacts.Broker of a claimed job attempt over the
// runner protocol: each call is one request with the attempt's job token,
// sent again with backoff while the server answers that it is transient
// (or the request did not reach it), within the call's context.
type jobFiles struct {
	c *client
	j *job
	// onStale is called when the server refuses a call as stale: the
	// attempt must stop.
	onStale func()
}

var _ artifacts.Broker = (*jobFiles)(nil)

// CreateUpload reserves an upload (POST …/uploads).
func (f *jobFiles) CreateUpload(ctx context.Context, req artifacts.UploadRequest) (*artifacts.Upload, error) {
	var u artifacts.Upload
	if err := f.call(ctx, http.MethodPost, "uploads", req, &u, http.StatusCreated); err != nil {
		return nil, err
	}
	return &u, nil
}

// CompleteUpload completes an upload (POST …/uploads/{id}/complete).
func (f *jobFiles) CompleteUpload(ctx context.Context, req artifacts.CompleteRequest) (*artifacts.Artifact, error) {
	if req.UploadID == "" {
		return nil, fmt.Errorf("%w: completing an upload needs its ID", artifacts.ErrRefused)
	}
	var a artifacts.Artifact
	body := struct {
		ETags []string `json:"etags,omitempty"`
	}{req.ETags}
	if err := f.call(ctx, http.MethodPost, "uploads/"+url.PathEscape(req.UploadID)+"/complete", body, &a, http.StatusOK); err != nil {
		return nil, err
	}
	return &a, nil
}

// AbortUpload gives an upload up (DELETE …/uploads/{id}).
func (f *jobFiles) AbortUpload(ctx context.Context, uploadID string) error {
	if uploadID == "" {
		return nil // nothing was reserved
	}
	return f.call(ctx, http.MethodDelete, "uploads/"+url.PathEscape(uploadID), nil, nil, http.StatusNoContent)
}

// ListArtifacts lists artifacts of the run (POST …/artifacts).
func (f *jobFiles) ListArtifacts(ctx context.Context, req artifacts.ListRequest) ([]artifacts.Artifact, error) {
	var out struct {
		Artifacts []artifacts.Artifact `json:"artifacts"`
	}
	if err := f.call(ctx, http.MethodPost, "artifacts", req, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Artifacts, nil
}

// LookupCache looks a cache key up (POST …/cache); a miss is nil.
func (f *jobFiles) LookupCache(ctx context.Context, q artifacts.CacheQuery) (*artifacts.CacheHit, error) {
	var out struct {
		Hit *artifacts.CacheHit `json:"hit"`
	}
	if err := f.call(ctx, http.MethodPost, "cache", q, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Hit, nil
}

// call sends one call, again while its answer is transient, and turns
// the server's refusals into the Broker's errors.
func (f *jobFiles) call(ctx context.Context, method, call string, in, out any, want int) error {
	wait := filesFirstRetry
	for try := 1; ; try++ {
		var err error
		if method == http.MethodDelete {
			_, err = f.c.do(ctx, method, f.c.url(jobPath(f.j, call), nil), f.j.JobToken, nil, "", want, out)
		} else {
			err = f.c.postJSON(ctx, jobPath(f.j, call), f.j.JobToken, in, out, want)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("agent: %s %s: %w", method, call, context.Cause(ctx))
		}
		ae, isAPI := errors.AsType[*apiError](err)
		if errors.Is(err, ErrStale) || isAPI && !ae.transient() || try == filesTries {
			return f.interpret(method, call, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("agent: %s %s: %w (after %v)", method, call, context.Cause(ctx), err)
		case <-t.C:
		}
		wait = min(wait*2, filesMaxRetry)
	}
}

// interpret turns the error of a call into the Broker's: the server's
// refusals match artifacts.ErrRefused, artifacts.ErrCacheExists,
// cikit.ErrNotFound, ErrNoArtifacts or ErrStale.
func (f *jobFiles) interpret(method, call string, err error) error {
	if errors.Is(err, ErrStale) {
		if f.onStale != nil {
			f.onStale()
		}
		return err
	}
	ae, ok := errors.AsType[*apiError](err)
	if !ok {
		return fmt.Errorf("agent: %s %s: %w", method, call, err)
	}
	switch {
	case ae.Status == http.StatusConflict && ae.Code == "cache_exists":
		return fmt.Errorf("%w: %s", artifacts.ErrCacheExists, ae.Msg)
	case ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w by the server: %s", artifacts.ErrRefused, ae.Msg)
	case ae.Status == http.StatusNotFound && ae.Code == "not_found":
		return fmt.Errorf("%w: %s", cikit.ErrNotFound, ae.Msg)
	case ae.Status == http.StatusNotFound:
		// Not configured, or a server older than the call.
		return fmt.Errorf("%w (%s %s: %s)", ErrNoArtifacts, method, call, ae.Msg)
	}
	return fmt.Errorf("agent: %s %s: %w", method, call, err)
}
