package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

const (
	srcOnly = `on:
  pull_request:
    branches: [main]
    paths: ['src/**']
jobs:
  test:
    runs-on: ubuntu-latest
    steps: [{run: go test ./...}]
`
	always = `on: pull_request
jobs:
  lint:
    runs-on: ubuntu-latest
    steps: [{run: make lint}]
`
)

// TestPathFiltersAndRequiredChecks: a pull request that changes only docs
// starts no run of the path-filtered workflow, and that workflow's check
// is reported as a success "skipped: no matching paths", so a branch
// protection requiring it does not wait forever. The changed files come
// from the provider: pull request payloads do not list them.
func TestPathFiltersAndRequiredChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &vcs.Memory{}
	base := map[string]string{".github/workflows/src.yml": srcOnly, ".github/workflows/lint.yml": always,
		"src/main.go": "package main", "docs/guide.md": "v1"}
	p.AddCommit("acme/api", "base", base)
	p.SetRef("acme/api", "main", "base")
	docs := map[string]string{}
	for k, v := range base {
		docs[k] = v
	}
	docs["docs/guide.md"] = "v2"
	p.AddCommit("acme/api", "docs-head", docs)
	code := map[string]string{}
	for k, v := range docs {
		code[k] = v
	}
	code["src/main.go"] = "package main // changed"
	p.AddCommit("acme/api", "code-head", code)

	reporter := runReporter(t, p)

	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Statuses: reporter})
	require.NoError(t, err)
	pr := func(id, sha string, n int) *ingest.Event {
		return &ingest.Event{Provider: ingest.GitHub, DeliveryID: id, Kind: ingest.KindPullRequest, Org: "acme", Repo: "api",
			RefType: ingest.RefBranch, RefName: "docs", SHA: sha, PRNumber: n, BaseRef: "main", DefaultBranch: "main",
			EventTime: time.Date(2026, 11, 30, 12, 0, n, 0, time.UTC), Raw: []byte(`{"action":"opened"}`)}
	}
	pipelines := func(d *ingest.Delivery) []string {
		var out []string
		for _, id := range d.RunIDs {
			run, err := store.RunGet(ctx, id)
			require.NoError(t, err)
			out = append(out, run.Pipeline)
		}
		return out
	}

	d, created, err := in.Ingest(ctx, pr("d1", "docs-head", 1))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, []string{"acme/api:.github/workflows/lint.yml"}, pipelines(d), "only the workflow without path filters runs")
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	require.NoError(t, reporter.Flush(fctx))
	require.Equal(t, []vcs.Status{{Context: "cikit/.github/workflows/src.yml", State: vcs.StateSuccess,
		Description: "skipped: no matching paths"}}, p.Statuses("acme/api", "docs-head"))

	d, _, err = in.Ingest(ctx, pr("d2", "code-head", 2))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"acme/api:.github/workflows/lint.yml", "acme/api:.github/workflows/src.yml"}, pipelines(d))
	run, err := store.RunGet(ctx, d.RunIDs[0])
	require.NoError(t, err)
	require.Equal(t, "code-head", run.SHA, "a run records the commit it builds")
	require.NoError(t, reporter.Flush(fctx))
	require.Empty(t, p.Statuses("acme/api", "code-head"), "nothing skipped")
}

// countingVCS counts the file reads that reach the provider.
type countingVCS struct {
	*vcs.Memory
	mu    sync.Mutex
	reads int
}

func (c *countingVCS) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Memory.ReadFile(ctx, repo, sha, path)
}

// TestConfigCache: the pipelines of a commit are read from the forge once,
// however many events are about that commit.
func TestConfigCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const head = "0123456789abcdef0123456789abcdef01234567"
	p := &countingVCS{Memory: &vcs.Memory{}}
	p.AddCommit("acme/api", head, map[string]string{".github/workflows/lint.yml": always, ".cikit.yml": native})
	p.AddCommit("acme/api", "base", map[string]string{})
	p.SetRef("acme/api", "main", "base")
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(dag.NewMemoryStore(dag.MemoryConfig{}), nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	for i := range 3 {
		ev := &ingest.Event{Provider: ingest.GitHub, DeliveryID: fmt.Sprint("pr-", i), Kind: ingest.KindPullRequest, Org: "acme", Repo: "api",
			RefType: ingest.RefBranch, RefName: "feature", SHA: head, PRNumber: i + 1, BaseRef: "main", DefaultBranch: "main",
			EventTime: time.Date(2026, 11, 30, 12, 0, i, 0, time.UTC)}
		_, created, err := in.Ingest(ctx, ev)
		require.NoError(t, err)
		require.True(t, created)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, 3, p.reads, "each file looked for at the commit read once: .cikit.yml, .gitlab-ci.yml (missing) and the workflow")
}

// TestForcedPushPathsUnknown: after a forced push the branch's changes are
// not what the new head adds since the merge base; the path filters are
// not judged on them (the pipeline runs) rather than skipped by them.
func TestForcedPushPathsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &vcs.Memory{}
	pipeline := `on: {push: {paths: ['src/**']}}
jobs:
  test:
    runs-on: ubuntu-latest
    steps: [{run: go test ./...}]
`
	p.AddCommit("acme/api", "base", map[string]string{".github/workflows/src.yml": pipeline, "src/a.go": "v1"})
	p.AddCommit("acme/api", "bad", map[string]string{".github/workflows/src.yml": pipeline, "src/a.go": "v2"})
	p.SetParents("acme/api", "bad", "base")
	p.SetParents("acme/api", "base")
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	// main is forced back from bad to base: nothing is new since the
	// merge base, yet src/a.go differs from what main held.
	d, _, err := in.Ingest(ctx, &ingest.Event{Provider: ingest.GitHub, DeliveryID: "f1", Kind: ingest.KindPush, Org: "acme", Repo: "api",
		RefType: ingest.RefBranch, RefName: "main", Before: "bad", SHA: "base", DefaultBranch: "main"})
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 1, "the path-filtered pipeline runs: %s", d.Dropped)
}

// runReporter returns a status reporter posting to p, running until the
// test ends.
func runReporter(t *testing.T, p vcs.Provider) *status.Reporter {
	t.Helper()
	reporter, err := status.New(status.Config{Provider: p, Rate: 1000, Burst: 1000})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = reporter.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return reporter
}
