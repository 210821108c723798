package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
	"github.com/cikit/cikit/vcs"
)

const (
	native = `on:
  push:
    branches: [main, "feature/**"]
  pull_request:
    branches: [main]
jobs:
  build:
    steps: [make]
  test:
    needs: [build]
    steps: [make test]
`
	ghCI = `on:
  push:
    branches: [main]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: make lint
`
	ghRelease = `on:
  push:
    tags: ["v*"]
jobs:
  release:
    runs-on: ubuntu-latest
    steps:
      - run: make release
`
)

// sleeps records the debounce waits instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

type fixture struct {
	in     *ingest.Ingester
	vcs    *vcs.Memory
	dag    dag.Store
	sleeps *sleeps
}

func newFixture(t testing.TB, debounce time.Duration) *fixture {
	t.Helper()
	f := &fixture{vcs: &vcs.Memory{}, dag: dag.NewMemoryStore(dag.MemoryConfig{}), sleeps: &sleeps{}}
	f.vcs.AddCommit("acme/api", "c1", map[string]string{
		".cikit.yml":                    native,
		".github/workflows/ci.yml":      ghCI,
		".github/workflows/release.yml": ghRelease,
		"README.md":                     "hi",
	})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(f.dag, nil), VCS: f.vcs,
		Debounce: debounce, Sleep: f.sleeps.sleep})
	require.NoError(t, err)
	f.in = in
	return f
}

func (f *fixture) pipelines(t *testing.T, d *ingest.Delivery) []string {
	t.Helper()
	var out []string
	for _, id := range d.RunIDs {
		run, err := f.dag.RunGet(context.Background(), id)
		require.NoError(t, err)
		out = append(out, run.Pipeline)
	}
	return out
}

func TestIngestPushToDefaultBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 0)
	ev := ingesttest.Push("d1", "main", "c0", "c1", 0)
	d, _, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/api:.cikit.yml", "acme/api:.github/workflows/ci.yml"}, f.pipelines(t, d),
		"the release workflow runs on tags only")
	require.Empty(t, f.sleeps.d, "the default branch is not debounced")
	run, err := f.dag.RunGet(ctx, d.RunIDs[0])
	require.NoError(t, err)
	require.Equal(t, "main", run.Branch)
	jobs, err := f.dag.JobList(ctx, d.RunIDs[0])
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, cikit.JobReady, jobs[0].State)

	again, created, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, d.RunIDs, again.RunIDs, "a redelivery returns the runs it created")
}

func TestIngestTag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	ev := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "t1", Kind: ingest.KindTag, Org: "acme", Repo: "api",
		RefType: ingest.RefTag, RefName: "v1.2.0", SHA: "c1", DefaultBranch: "main"}
	d, _, err := f.in.Ingest(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/api:.github/workflows/release.yml"}, f.pipelines(t, d))
}

func TestIngestResolvesTheRef(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	f.vcs.SetRef("acme/api", "refs/tags/v2.0.0", "c1")
	ev := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "t2", Kind: ingest.KindTag, Org: "acme", Repo: "api",
		RefType: ingest.RefTag, RefName: "v2.0.0"}
	d, _, err := f.in.Ingest(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/api:.github/workflows/release.yml"}, f.pipelines(t, d), "built at the tag's commit")
	require.Equal(t, "c1", ev.SHA)

	_, _, err = f.in.Ingest(context.Background(), &ingest.Event{Provider: ingest.GitHub, DeliveryID: "t3", Kind: ingest.KindTag,
		Org: "acme", Repo: "api", RefType: ingest.RefTag, RefName: "v9"})
	require.ErrorIs(t, err, ingest.ErrMalformed, "a ref that does not exist")
}

func TestIngestNothingTriggered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, -1)
	d, _, err := f.in.Ingest(context.Background(), ingesttest.Push("d1", "docs", "c0", "c1", 0))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Contains(t, d.Dropped, ".cikit.yml: ")
	require.Contains(t, d.Dropped, "docs", "the reason names what did not match")

	f.vcs.AddCommit("acme/api", "c2", map[string]string{"README.md": "no pipeline"})
	d, _, err = f.in.Ingest(context.Background(), ingesttest.Push("d2", "main", "c1", "c2", time.Second))
	require.NoError(t, err)
	require.Equal(t, "acme/api has no pipeline at c2", d.Dropped)
}

func TestIngestSkipsPipelinesThatDoNotCompile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	f.vcs.AddCommit("acme/api", "c2", map[string]string{
		".cikit.yml":               "jobs: {a: {stepz: [x]}}",
		".github/workflows/ci.yml": ghCI,
	})
	d, _, err := f.in.Ingest(context.Background(), ingesttest.Push("d1", "main", "c1", "c2", 0))
	require.NoError(t, err)
	require.Equal(t, []string{"acme/api:.github/workflows/ci.yml"}, f.pipelines(t, d), "a broken file does not stop the others")

	f.vcs.AddCommit("acme/api", "c3", map[string]string{".cikit.yml": "jobs: {a: {stepz: [x]}}"})
	d, _, err = f.in.Ingest(context.Background(), ingesttest.Push("d2", "main", "c2", "c3", time.Second))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Contains(t, d.Dropped, ".cikit.yml does not compile")
}

func TestIngestDebounce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 0)
	d, _, err := f.in.Ingest(ctx, ingesttest.Push("d1", "feature/x", "c0", "c1", 0))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{ingest.DefaultDebounce}, f.sleeps.d, "a branch push waits first")
	require.Equal(t, []string{"acme/api:.cikit.yml"}, f.pipelines(t, d), "no pull request: the push builds")

	f.vcs.SetPullRequest("acme/api", "feature/x", 7)
	d, _, err = f.in.Ingest(ctx, ingesttest.Push("d2", "feature/x", "c1", "c1", time.Second))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Equal(t, "the push yields to open pull request #7 of feature/x", d.Dropped)

	// The pull request's own event came first: the push of its head
	// yields to it without asking the provider.
	f.vcs.SetPullRequest("acme/api", "feature/y", 0)
	pr := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "p1", Kind: ingest.KindPullRequest, Org: "acme", Repo: "api",
		RefType: ingest.RefBranch, RefName: "feature/y", SHA: "c1", PRNumber: 9, BaseRef: "main", DefaultBranch: "main"}
	d, _, err = f.in.Ingest(ctx, pr)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/api:.cikit.yml"}, f.pipelines(t, d), "the pull request builds")
	d, _, err = f.in.Ingest(ctx, ingesttest.Push("d3", "feature/y", "c0", "c1", 0))
	require.NoError(t, err)
	require.Equal(t, "the push yields to pull request #9, which builds c1", d.Dropped)
}

func TestIngestDebounceCancelled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := f.in.Ingest(ctx, ingesttest.Push("d1", "feature/x", "c0", "c1", 0))
	require.ErrorIs(t, err, context.Canceled)
	d, _, err := f.in.Ingest(context.Background(), ingesttest.Push("d1", "feature/x", "c0", "c1", 0))
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 1, "nothing was recorded: the redelivery builds")
}

// failing is a provider that fails until healed.
type failing struct {
	vcs.Provider
	mu     sync.Mutex
	broken bool
}

func (f *failing) ReadFile(ctx context.Context, repo, sha, p string) ([]byte, error) {
	f.mu.Lock()
	broken := f.broken
	f.mu.Unlock()
	if broken {
		return nil, errors.New("connection reset")
	}
	return f.Provider.ReadFile(ctx, repo, sha, p)
}

func TestIngestTransientFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, -1)
	p := &failing{Provider: f.vcs, broken: true}
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(f.dag, nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	ev := ingesttest.Push("d1", "main", "c0", "c1", 0)
	_, _, err = in.Ingest(ctx, ev)
	require.ErrorContains(t, err, "connection reset")
	p.mu.Lock()
	p.broken = false
	p.mu.Unlock()
	d, _, err := in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 2, "the retry builds")
}

func TestIngestSupersedes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, -1)
	f.vcs.AddCommit("acme/api", "c2", map[string]string{".cikit.yml": native})
	first, _, err := f.in.Ingest(ctx, ingesttest.Push("d1", "feature/x", "c0", "c1", 0))
	require.NoError(t, err)
	_, _, err = f.in.Ingest(ctx, ingesttest.Push("d2", "feature/x", "c1", "c2", time.Second))
	require.NoError(t, err)
	run, err := f.dag.RunGet(ctx, first.RunIDs[0])
	require.NoError(t, err)
	require.Equal(t, cikit.RunCancelled, run.State, "a newer push to a feature branch supersedes the older run")
}

func TestIngestRefusesMalformedEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, -1)
	for _, ev := range []*ingest.Event{nil, {}, {Provider: ingest.GitHub, DeliveryID: "x"}} {
		_, _, err := f.in.Ingest(context.Background(), ev)
		require.Error(t, err)
	}
	_, err := ingest.NewIngester(ingest.IngesterConfig{})
	require.True(t, strings.Contains(err.Error(), "needs Runs and VCS"))
}

func TestIngestConcurrentCopies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, -1)
	ev := ingesttest.Push("d1", "main", "c0", "c1", 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	ids := map[string]bool{}
	for range 50 {
		wg.Go(func() {
			c := *ev
			d, ok, err := f.in.Ingest(context.Background(), &c)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created++
			}
			ids[strings.Join(d.RunIDs, ",")] = true
		})
	}
	wg.Wait()
	require.Equal(t, 1, created, "one copy creates, the others are told it exists")
	require.Len(t, ids, 1, "all see the same runs")
}

// TestIngestPipelineLimits: a pipeline file over the size limit, or a run
// over the jobs limit, makes no run, and the delivery's reason is the
// diagnostic, naming the limit; raised limits build them.
func TestIngestPipelineLimits(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	many.WriteString("jobs:\n")
	for i := range 1001 {
		fmt.Fprintf(&many, "  j%d: {steps: [x]}\n", i)
	}
	big := native + "# " + strings.Repeat("x", 1<<20) + "\n"
	f := newFixture(t, 0)
	f.vcs.AddCommit("acme/api", "c2", map[string]string{".cikit.yml": big})
	f.vcs.AddCommit("acme/api", "c3", map[string]string{".cikit.yml": many.String()})
	d, _, err := f.in.Ingest(context.Background(), ingesttest.Push("d1", "main", "c1", "c2", 0))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Contains(t, d.Dropped, fmt.Sprintf(".cikit.yml does not compile: .cikit.yml:1:1: the pipeline file is %d bytes, more than the limit of 1 MiB", len(big)))
	d, _, err = f.in.Ingest(context.Background(), ingesttest.Push("d2", "main", "c2", "c3", time.Second))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Contains(t, d.Dropped, `job "j1000" takes the run to 1001 jobs, more than the limit of 1000 jobs per run`)

	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(f.dag, nil), VCS: f.vcs,
		Debounce: -1, MaxJobs: 2000, MaxFileBytes: 2 << 20})
	require.NoError(t, err)
	for i, sha := range []string{"c2", "c3"} {
		d, _, err := in.Ingest(context.Background(), ingesttest.Push(fmt.Sprintf("raised-%d", i), "main", "c1", sha, time.Duration(i+5)*time.Second))
		require.NoError(t, err)
		require.Len(t, d.RunIDs, 1, d.Dropped)
	}
}

// sizedVCS is a vcs.MaxReader over Memory that records the plain reads of
// files larger than a pipeline may be: those a bounded fetch never makes.
type sizedVCS struct {
	*vcs.Memory
	mu        sync.Mutex
	unbounded []string
}

func (s *sizedVCS) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	data, err := s.Memory.ReadFile(ctx, repo, sha, path)
	if len(data) > compiler.DefaultMaxFileBytes {
		s.mu.Lock()
		s.unbounded = append(s.unbounded, path)
		s.mu.Unlock()
	}
	return data, err
}

func (s *sizedVCS) ReadFileMax(ctx context.Context, repo, sha, path string, max int64) ([]byte, error) {
	data, err := s.Memory.ReadFile(ctx, repo, sha, path)
	if err == nil && int64(len(data)) > max {
		return nil, &vcs.FileTooLargeError{Path: path, Size: int64(len(data)), Max: max}
	}
	return data, err
}

// TestIngestBoundsPipelineReads: the ingester reads pipeline files at a
// commit with the compiler's bound, so a provider that knows a file's size
// (vcs.MaxReader) never fetches a huge one whole; the delivery is dropped
// with the diagnostic.
func TestIngestBoundsPipelineReads(t *testing.T) {
	t.Parallel()
	p := &sizedVCS{Memory: &vcs.Memory{}}
	big := native + "# " + strings.Repeat("x", 2<<20) + "\n"
	p.AddCommit("acme/api", "c1", map[string]string{".cikit.yml": big})
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	d, _, err := in.Ingest(context.Background(), ingesttest.Push("d1", "main", "c0", "c1", 0))
	require.NoError(t, err)
	require.Empty(t, d.RunIDs)
	require.Contains(t, d.Dropped, fmt.Sprintf("the pipeline file is %d bytes, more than the limit of 1 MiB", len(big)))
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.unbounded, "no unbounded read of a file over the limit")
}

// TestIngestRecordsTheRunContext: each run the Ingester creates records
// the event's context, the event named as the run's pipeline format names
// it, and the payload as received.
func TestIngestRecordsTheRunContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 0)
	ev := ingesttest.Push("d1", "main", "c0", "c1", 0)
	ev.Actor, ev.Raw = "octocat", []byte(`{"ref":"refs/heads/main","after":"c1"}`)
	d, _, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 2)
	for _, id := range d.RunIDs {
		run, err := f.dag.RunGet(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, run.Context, run.Pipeline)
		require.JSONEq(t, string(ev.Raw), string(run.Context.Payload))
		run.Context.Payload = nil
		require.Equal(t, &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main",
			RefName: "main", RefType: "branch", SHA: "c1", DefaultBranch: "main", Actor: "octocat"}, run.Context, run.Pipeline)
	}
}
