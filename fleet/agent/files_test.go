package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/logs"
)

// recordingBrokers is a fleet.ArtifactBrokers whose Brokers record the
// calls made, with the attempt each was made for, and answer by fixed
// rules (see recordingBroker).
type recordingBrokers struct {
	mu    sync.Mutex
	calls []string
	flaky bool // a lookup of "flaky" failed once
}

func (bs *recordingBrokers) ForJob(ref artifacts.JobRef) artifacts.Broker {
	return &recordingBroker{bs: bs, ref: ref}
}

func (bs *recordingBrokers) taken() []string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	c := bs.calls
	bs.calls = nil
	return c
}

// recordingBroker answers: a cache upload of "taken" is ErrCacheExists,
// an upload of "huge" is refused; uploads complete unless unknown
// ("u9": cikit.ErrNotFound); listing returns one artifact per job named;
// lookups hit "hit", fail "flaky" once with an error of the store, and
// miss the rest.
type recordingBroker struct {
	bs  *recordingBrokers
	ref artifacts.JobRef
}

func (b *recordingBroker) record(format string, args ...any) {
	b.bs.mu.Lock()
	defer b.bs.mu.Unlock()
	b.bs.calls = append(b.bs.calls, fmt.Sprintf("%s/%d ", b.ref.JobID, b.ref.Attempt)+fmt.Sprintf(format, args...))
}

func (b *recordingBroker) CreateUpload(_ context.Context, req artifacts.UploadRequest) (*artifacts.Upload, error) {
	b.record("create %s cache=%v size=%d", req.Name, req.Cache, req.Size)
	switch {
	case req.Cache && req.Name == "taken":
		return nil, fmt.Errorf("%w: %q", artifacts.ErrCacheExists, req.Name)
	case req.Name == "huge":
		return nil, fmt.Errorf("%w: %d bytes is more than the 1 GiB an artifact may be", artifacts.ErrRefused, req.Size)
	}
	return &artifacts.Upload{ID: "u1", PartSize: req.Size, Parts: []artifacts.Request{{Method: http.MethodPut, URL: "https://blobs.example/u1", Size: req.Size}},
		ExpiresAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, nil
}

func (b *recordingBroker) CompleteUpload(_ context.Context, req artifacts.CompleteRequest) (*artifacts.Artifact, error) {
	b.record("complete %s %v", req.UploadID, req.ETags)
	if req.UploadID == "u9" {
		return nil, fmt.Errorf("upload %q: %w", req.UploadID, cikit.ErrNotFound)
	}
	return &artifacts.Artifact{ID: "a1", RunID: b.ref.RunID, JobID: b.ref.JobID, Attempt: b.ref.Attempt, Name: "dist", Type: artifacts.TypeArchive}, nil
}

func (b *recordingBroker) AbortUpload(_ context.Context, uploadID string) error {
	b.record("abort %s", uploadID)
	return nil
}

func (b *recordingBroker) ListArtifacts(_ context.Context, req artifacts.ListRequest) ([]artifacts.Artifact, error) {
	b.record("list %v", req.Jobs)
	var out []artifacts.Artifact
	for _, j := range req.Jobs {
		out = append(out, artifacts.Artifact{ID: "a-" + j, JobID: j, Attempt: 1, Name: "dist", Type: artifacts.TypeArchive,
			Download: &artifacts.Request{Method: http.MethodGet, URL: "https://blobs.example/" + j}})
	}
	return out, nil
}

func (b *recordingBroker) LookupCache(_ context.Context, q artifacts.CacheQuery) (*artifacts.CacheHit, error) {
	b.record("lookup %s", q.Key)
	switch q.Key {
	case "hit":
		return &artifacts.CacheHit{Key: "hit", Exact: true, Size: 7, Download: artifacts.Request{Method: http.MethodGet, URL: "https://blobs.example/c"}}, nil
	case "flaky":
		b.bs.mu.Lock()
		defer b.bs.mu.Unlock()
		if !b.bs.flaky {
			b.bs.flaky = true
			return nil, errors.New("the index is down")
		}
		return &artifacts.CacheHit{Key: "flaky", Exact: true}, nil
	}
	return nil, nil
}

// holdingExecutor hands each job to the test and returns the result the
// test sends, or cancelled when the job's context ends.
type holdingExecutor struct {
	jobs    chan process.Job
	results chan agent.Result
}

func newHoldingExecutor() *holdingExecutor {
	return &holdingExecutor{jobs: make(chan process.Job, 1), results: make(chan agent.Result, 1)}
}

func (h *holdingExecutor) Run(ctx context.Context, job process.Job) agent.Result {
	h.jobs <- job
	select {
	case r := <-h.results:
		return r
	case <-ctx.Done():
		return agent.Result{State: cikit.JobCancelled, ExitCode: -1, Reason: "cancelled"}
	}
}

// TestAgentFiles: the executor's Files is the attempt's Broker on the
// server, through the runner protocol: every call arrives with what it
// carries, for the attempt; the answers come back, refusals as the
// Broker's errors, and a store failure is retried; the job's cache
// reports are stored with its result.
func TestAgentFiles(t *testing.T) {
	t.Parallel()
	bs := &recordingBrokers{}
	e := setup(t, longTTL, func(_ *logs.Config, sc *fleet.ServerConfig) { sc.Artifacts = bs })
	exec := newHoldingExecutor()
	e.startWith(t, exec)
	runID := e.newRun(t)
	job := <-exec.jobs
	f := job.Files
	require.NotNil(t, f)
	ctx := t.Context()

	u, err := f.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Size: 3, SHA256: "00ff", Files: 2, ExpireIn: time.Hour})
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(&artifacts.Upload{ID: "u1", PartSize: 3, Parts: []artifacts.Request{{Method: http.MethodPut, URL: "https://blobs.example/u1", Size: 3}},
		ExpiresAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, u))
	a, err := f.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: "u1", ETags: []string{`"e1"`, `"e2"`}})
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(&artifacts.Artifact{ID: "a1", RunID: runID, JobID: "build", Attempt: 1, Name: "dist", Type: artifacts.TypeArchive}, a))
	require.NoError(t, f.AbortUpload(ctx, "up/1"))
	as, err := f.ListArtifacts(ctx, artifacts.ListRequest{Jobs: []string{"lint", "unit/test"}})
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, "unit/test", as[1].JobID)
	require.Equal(t, "https://blobs.example/lint", as[0].Download.URL)
	hit, err := f.LookupCache(ctx, artifacts.CacheQuery{Key: "hit", RestoreKeys: []string{"h"}})
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(&artifacts.CacheHit{Key: "hit", Exact: true, Size: 7, Download: artifacts.Request{Method: http.MethodGet, URL: "https://blobs.example/c"}}, hit))
	hit, err = f.LookupCache(ctx, artifacts.CacheQuery{Key: "miss"})
	require.NoError(t, err)
	require.Nil(t, hit, "a miss")
	hit, err = f.LookupCache(ctx, artifacts.CacheQuery{Key: "flaky"})
	require.NoError(t, err, "the server's 500 is sent again")
	require.Equal(t, "flaky", hit.Key)
	require.Empty(t, cmp.Diff([]string{"build/1 create dist cache=false size=3", `build/1 complete u1 ["e1" "e2"]`, "build/1 abort up/1",
		"build/1 list [lint unit/test]", "build/1 lookup hit", "build/1 lookup miss", "build/1 lookup flaky", "build/1 lookup flaky"}, bs.taken()))

	_, err = f.CreateUpload(ctx, artifacts.UploadRequest{Name: "taken", Cache: true, Size: 1, SHA256: "00"})
	require.ErrorIs(t, err, artifacts.ErrCacheExists)
	require.NotErrorIs(t, err, artifacts.ErrRefused)
	_, err = f.CreateUpload(ctx, artifacts.UploadRequest{Name: "huge", Size: 2 << 30, SHA256: "00"})
	require.ErrorIs(t, err, artifacts.ErrRefused)
	require.ErrorContains(t, err, "2147483648 bytes is more than the 1 GiB an artifact may be", "the server's message")
	_, err = f.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: "u9"})
	require.ErrorIs(t, err, cikit.ErrNotFound)
	_, err = f.LookupCache(ctx, artifacts.CacheQuery{Key: strings.Repeat("k", artifacts.MaxNameLen+1)})
	require.ErrorIs(t, err, artifacts.ErrRefused, "refused by the protocol's limits")
	require.ErrorContains(t, err, "artifacts.MaxNameLen")
	require.Len(t, bs.taken(), 3, "the key past its limit never reached the Broker")

	caches := []cikit.CacheReport{{Key: "go-1", Hit: true, Exact: true, MatchedKey: "go-1", RestoredInMS: 40, Size: 7, Note: "exact hit"}}
	exec.results <- agent.Result{State: cikit.JobSucceeded, Caches: caches}
	waitState(t, e, runID, cikit.JobSucceeded)
	require.Empty(t, cmp.Diff(&dag.JobResult{Caches: caches}, e.job(t, runID).Result))
}

// TestAgentFilesStale: a call about an attempt that has ended is ErrStale,
// and the agent fences the job: it is killed and nothing more is sent.
func TestAgentFilesStale(t *testing.T) {
	t.Parallel()
	bs := &recordingBrokers{}
	e := setup(t, longTTL, func(_ *logs.Config, sc *fleet.ServerConfig) { sc.Artifacts = bs })
	exec := newHoldingExecutor()
	e.startWith(t, exec)
	runID := e.newRun(t)
	job := <-exec.jobs
	_, err := e.jobs.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: runID, JobID: "build", Attempt: 1,
		Outcome: cikit.JobFailed, ExitCode: -1, Reason: "runner_lost: test", FailureClass: cikit.FailureScript})
	require.NoError(t, err)
	// Not the job's context, which the fence (by this call or a
	// heartbeat) ends.
	_, err = job.Files.LookupCache(context.Background(), artifacts.CacheQuery{Key: "hit"})
	require.ErrorIs(t, err, agent.ErrStale)
	require.Empty(t, bs.taken())
	waitClaiming(t, e)
	for _, c := range e.callsMade() {
		require.NotContains(t, c, "complete")
	}
}

// TestAgentFilesNotConfigured: on a server without artifacts, every call
// fails with ErrNoArtifacts, saying why.
func TestAgentFilesNotConfigured(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	exec := newHoldingExecutor()
	e.startWith(t, exec)
	runID := e.newRun(t)
	job := <-exec.jobs
	ctx := t.Context()
	_, err := job.Files.LookupCache(ctx, artifacts.CacheQuery{Key: "k"})
	require.ErrorIs(t, err, agent.ErrNoArtifacts)
	require.ErrorContains(t, err, "artifacts are not configured on this server")
	require.NotErrorIs(t, err, cikit.ErrNotFound)
	_, err = job.Files.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Size: 1})
	require.ErrorIs(t, err, agent.ErrNoArtifacts)
	_, err = job.Files.ListArtifacts(ctx, artifacts.ListRequest{})
	require.ErrorIs(t, err, agent.ErrNoArtifacts)
	exec.results <- agent.Result{State: cikit.JobSucceeded}
	waitState(t, e, runID, cikit.JobSucceeded)
}

// losingTransport loses the answer to the first request whose path ends
// in suffix: the server got it and answered, the runner sees the
// connection fail.
type losingTransport struct {
	base   http.RoundTripper
	suffix string
	mu     sync.Mutex
	lost   int
}

func (l *losingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, l.suffix) {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost > 0 {
		return resp, nil
	}
	l.lost++
	resp.Body.Close()
	return nil, errors.New("connection reset by peer")
}

// TestAgentFilesCompletionAnswerLost: the answer to an upload's
// completion is lost; the runner sends the completion again and gets the
// artifact the first recorded, and the upload succeeds.
func TestAgentFilesCompletionAnswerLost(t *testing.T) {
	t.Parallel()
	fs, err := artifacts.NewFileStore(filepath.Join(t.TempDir(), "blobs"))
	require.NoError(t, err)
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	blobs, err := artifacts.NewSignedFileStore(fs, []byte(strings.Repeat("s", artifacts.MinSigningKeyLen)), hs.URL+"/v1/blobs")
	require.NoError(t, err)
	mux.Handle("/v1/blobs/", blobs.Handler())
	manifest := artifacts.NewMemoryManifest()
	svc, err := artifacts.NewService(artifacts.ServiceConfig{Blobs: blobs, Manifest: manifest, Index: artifacts.NewMemoryCacheIndex()})
	require.NoError(t, err)
	e := setup(t, longTTL, func(_ *logs.Config, sc *fleet.ServerConfig) { sc.Artifacts = svc })
	lossy := &losingTransport{base: http.DefaultTransport, suffix: "/complete"}
	exec := newHoldingExecutor()
	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, Name: "test", Executor: exec,
		Wait: time.Second, HTTPClient: &http.Client{Transport: lossy}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	runID := e.newRun(t)
	job := <-exec.jobs

	data := []byte("the archive of dist")
	sum := sha256.Sum256(data)
	sender := &artifacts.Sender{HTTP: hs.Client()}
	art, err := sender.Upload(t.Context(), job.Files, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])},
		bytes.NewReader(data))
	require.NoError(t, err, "the completion sent again is answered with the artifact")
	lossy.mu.Lock()
	require.Equal(t, 1, lossy.lost, "the first answer was lost")
	lossy.mu.Unlock()
	list, err := manifest.ArtifactsList(t.Context(), artifacts.ArtifactFilter{RunID: runID})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, list[0].ID, art.ID)
	require.Equal(t, "dist", art.Name)

	exec.results <- agent.Result{State: cikit.JobSucceeded}
	waitState(t, e, runID, cikit.JobSucceeded)
}
