package platform

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
)

// revocations records what a sourceRevoker revoked.
type revocations struct {
	mu    sync.Mutex
	urls  []string
	fails map[string]bool
}

func (rv *revocations) revoke(_ context.Context, src *cikit.CheckoutSource) error {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.fails[src.URL] {
		return errors.New("the forge refused")
	}
	rv.urls = append(rv.urls, src.URL)
	return nil
}

func (rv *revocations) list() []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Sorted(slices.Values(rv.urls))
}

// TestSourceRevokerRevokesEndedAttempts: a credential is revoked when an
// event says its attempt ended (the job completed, or a later attempt
// began), when a second claim of the attempt replaces it, and, by the
// sweep, when its attempt ended unseen; one that expired on its own is
// forgotten unrevoked, one of a running attempt kept, and a failed
// revocation reported.
func TestSourceRevokerRevokesEndedAttempts(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rv := &revocations{fails: map[string]bool{"failing": true}}
	ended := map[string]bool{"unseen": true}
	var failed []string
	r := newSourceRevoker(func(_ context.Context, m *mintedSource) (bool, error) {
		if m.src.URL == "store down" {
			return false, errors.New("the lease store failed")
		}
		return !ended[m.src.URL], nil
	}, func() time.Time { return now }, func(m *mintedSource, err error) { failed = append(failed, m.src.URL) })
	add := func(url, job string, attempt int, expires time.Time) {
		r.add(&mintedSource{src: &cikit.CheckoutSource{URL: url, Token: "t", ExpiresAt: expires}, repo: "acme/app",
			job: fleet.JobRef{RunID: "run", JobID: job, Attempt: attempt, Token: "job-token"}, revoke: rv.revoke})
	}
	later := now.Add(time.Hour)
	add("completed", "a", 1, later)
	add("retried", "b", 1, later)
	add("running", "c", 1, later)
	add("unseen", "d", 1, later)
	add("expired", "e", 1, now)
	add("store down", "f", 1, later)
	add("failing", "g", 1, later)
	add("replaced", "h", 1, later)
	add("replacement", "h", 1, later)

	ctx := context.Background()
	r.observe(&dag.OutboxEvent{Type: dag.EventJobCompleted, RunID: "run", JobID: "a", Attempt: 1})
	r.observe(&dag.OutboxEvent{Type: dag.EventJobReady, RunID: "run", JobID: "b", Attempt: 2})
	r.observe(&dag.OutboxEvent{Type: dag.EventJobStarted, RunID: "run", JobID: "c", Attempt: 1})
	r.observe(&dag.OutboxEvent{Type: dag.EventJobCompleted, RunID: "other", JobID: "c", Attempt: 1})
	r.observe(&dag.OutboxEvent{Type: dag.EventJobCompleted, RunID: "run", JobID: "g", Attempt: 1})
	r.observe(&dag.OutboxEvent{Type: dag.EventPipelineCompleted, RunID: "run"})
	r.revokeDue(ctx)
	require.Equal(t, []string{"completed", "replaced", "retried"}, rv.list())
	require.Equal(t, []string{"failing"}, failed)

	r.sweep(ctx)
	r.revokeDue(ctx)
	require.Equal(t, []string{"completed", "replaced", "retried", "unseen"}, rv.list(), "the sweep found the attempt that ended unseen")
	r.mu.Lock()
	var live []string
	for _, m := range r.live {
		live = append(live, m.src.URL)
	}
	r.mu.Unlock()
	require.ElementsMatch(t, []string{"running", "store down", "replacement"}, live, "the expired credential is forgotten, the others kept")
}
