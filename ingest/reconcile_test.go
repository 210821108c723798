package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/vcs"
)

// TestReconcile: of the pushes the forge lists, those whose webhook was
// never taken in get their runs; the delivered one, a push still within
// its grace, and a second pass create nothing; a webhook arriving after
// the reconciliation creates nothing either.
func TestReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := &vcs.Memory{}
	for _, sha := range []string{"c1", "c2", "c3", "c4"} {
		p.AddCommit("acme/api", sha, map[string]string{".cikit.yml": native})
	}
	at := func(ago time.Duration) time.Time { return clk.Now().Add(-ago) }
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "c0", SHA: "c1", At: at(30 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "c1", SHA: "c2", At: at(20 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Tag: "v1.0.0", SHA: "c2", At: at(15 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "c2", SHA: "c3", At: at(10 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "c3", SHA: "c4", At: at(30 * time.Second)}) // within the grace
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "cx", SHA: "c0", At: at(2 * time.Hour)})    // outside the window

	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	// The webhook of the first push was delivered.
	webhook := func(id, before, sha string, at time.Time) *ingest.Event {
		return &ingest.Event{Provider: ingest.GitHub, DeliveryID: id, HookID: "hook-1", Kind: ingest.KindPush, Org: "acme", Repo: "api",
			RefType: ingest.RefBranch, RefName: "main", Before: before, SHA: sha, DefaultBranch: "main", EventTime: at}
	}
	_, created, err := in.Ingest(ctx, webhook("w1", "c0", "c1", at(30*time.Minute)))
	require.NoError(t, err)
	require.True(t, created)

	r, err := ingest.NewReconciler(ingest.ReconcilerConfig{Ingester: in, Pushes: p, Provider: ingest.GitHub, Now: clk.Now,
		Repos:         func(context.Context) ([]string, error) { return []string{"acme/api"}, nil },
		DefaultBranch: p.DefaultBranch})
	require.NoError(t, err)
	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, &ingest.ReconcileReport{Pushes: 4, Taken: 3}, rep, "c2, the tag and c3 had no delivery")
	rep, err = r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, &ingest.ReconcileReport{Pushes: 4, Taken: 0}, rep, "a second pass takes in nothing")

	// The late webhook of c3 finds its push taken in.
	_, created, err = in.Ingest(ctx, webhook("w3", "c2", "c3", at(10*time.Minute)))
	require.NoError(t, err)
	require.False(t, created)

	// Once its grace has passed, the last push is taken in too.
	clk.Advance(3 * time.Minute)
	rep, err = r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Taken)
}

func TestNewReconcilerValidates(t *testing.T) {
	t.Parallel()
	_, err := ingest.NewReconciler(ingest.ReconcilerConfig{})
	require.Error(t, err)
}

// TestReconcileDistinctPushes: pushes of a branch and a tag of one name at
// one commit, and a branch moved back to a commit it had, are distinct
// pushes; and a webhook after a reconciled push is not judged against the
// push's time.
func TestReconcileDistinctPushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := &vcs.Memory{}
	for _, sha := range []string{"a", "b", "c"} {
		p.AddCommit("acme/api", sha, map[string]string{".cikit.yml": native})
	}
	at := func(ago time.Duration) time.Time { return clk.Now().Add(-ago) }
	p.AddPush("acme/api", vcs.Push{Branch: "v1", Before: "x", SHA: "a", At: at(50 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Tag: "v1", SHA: "a", At: at(40 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "a", SHA: "b", At: at(30 * time.Minute)})
	p.AddPush("acme/api", vcs.Push{Branch: "main", Before: "b", SHA: "a", At: at(20 * time.Minute)}) // moved back
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p, Debounce: -1})
	require.NoError(t, err)
	r, err := ingest.NewReconciler(ingest.ReconcilerConfig{Ingester: in, Pushes: p, Provider: ingest.GitHub, Now: clk.Now,
		Repos: func(context.Context) ([]string, error) { return []string{"acme/api"}, nil }})
	require.NoError(t, err)
	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Taken, "four distinct pushes")

	// The next push's webhook carries its commit's time, older than the
	// reconciled pushes': it is built all the same.
	d, created, err := in.Ingest(ctx, &ingest.Event{Provider: ingest.GitHub, DeliveryID: "w9", HookID: "hook-1", Kind: ingest.KindPush,
		Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", Before: "a", SHA: "c", DefaultBranch: "main",
		EventTime: at(3 * time.Hour)})
	require.NoError(t, err)
	require.True(t, created)
	require.Empty(t, d.Dropped)
	require.NotEmpty(t, d.RunIDs)
}
