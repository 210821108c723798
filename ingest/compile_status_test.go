package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/vcs"
)

// TestNotCompilingIsAFailureStatus: a push whose GitLab file does not
// compile (a trigger: job, not supported) creates no run and says why in
// a failure status of the file on the commit, instead of nothing at all;
// a workflow of the same commit that compiles runs. A GitLab file whose
// rules leave out every job for the event is no failure: no status.
func TestNotCompilingIsAFailureStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &vcs.Memory{}
	p.AddCommit("acme/api", "head", map[string]string{
		".gitlab-ci.yml":           "build:\n  script: [echo built]\nchild:\n  trigger:\n    include: child.yml\n",
		".github/workflows/ci.yml": "on: push\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps: [{run: make lint}]\n",
	})
	p.AddCommit("acme/api", "quiet", map[string]string{
		".gitlab-ci.yml":           "release:\n  rules: [{if: $CI_COMMIT_TAG}]\n  script: [echo released]\n",
		".github/workflows/ci.yml": "on: push\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps: [{run: make lint}]\n",
	})
	p.SetRef("acme/api", "main", "head")
	reporter := runReporter(t, p)

	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Statuses: reporter})
	require.NoError(t, err)
	d, created, err := in.Ingest(ctx, &ingest.Event{Provider: ingest.GitHub, DeliveryID: "d1", Kind: ingest.KindPush,
		Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", SHA: "head", DefaultBranch: "main",
		EventTime: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), Raw: []byte(`{}`)})
	require.NoError(t, err)
	require.True(t, created)
	require.Len(t, d.RunIDs, 1, "the workflow runs")
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	require.NoError(t, reporter.Flush(fctx))
	sts := p.Statuses("acme/api", "head")
	require.Len(t, sts, 1, "%+v", sts)
	require.Equal(t, "cikit/.gitlab-ci.yml", sts[0].Context)
	require.Equal(t, vcs.StateFailure, sts[0].State)
	require.True(t, strings.HasPrefix(sts[0].Description, "does not compile: "), sts[0].Description)
	require.Contains(t, sts[0].Description, "trigger: (child/multi-project pipelines) is not supported yet")

	d, _, err = in.Ingest(ctx, &ingest.Event{Provider: ingest.GitHub, DeliveryID: "d2", Kind: ingest.KindPush,
		Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", SHA: "quiet", DefaultBranch: "main",
		EventTime: time.Date(2026, 12, 2, 12, 0, 1, 0, time.UTC), Raw: []byte(`{}`)})
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 1)
	require.NoError(t, reporter.Flush(fctx))
	require.Empty(t, p.Statuses("acme/api", "quiet"))
}

// TestRulesExistsGlobs: the ingester lets the compiler list the commit's
// files, so a rules:exists glob decides whether a job is created (one
// under a folder the commit does not have matches nothing) instead of
// keeping every job it guards.
func TestRulesExistsGlobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &vcs.Memory{}
	p.AddCommit("acme/api", "head", map[string]string{
		".gitlab-ci.yml": `present:
  rules: [{exists: ["**/*.go"]}]
  script: [echo present]
absent:
  rules: [{exists: ["missing/**/*.go"]}]
  script: [echo absent]
`,
		"cmd/app/main.go": "package main",
	})
	p.SetRef("acme/api", "main", "head")
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p})
	require.NoError(t, err)
	d, _, err := in.Ingest(ctx, &ingest.Event{Provider: ingest.GitHub, DeliveryID: "d1", Kind: ingest.KindPush,
		Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", SHA: "head", DefaultBranch: "main",
		EventTime: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), Raw: []byte(`{}`)})
	require.NoError(t, err)
	require.Len(t, d.RunIDs, 1, "%+v", d)
	jobs, err := store.JobList(ctx, d.RunIDs[0])
	require.NoError(t, err)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.Spec.ID)
	}
	require.Equal(t, []string{"present"}, ids)
}
