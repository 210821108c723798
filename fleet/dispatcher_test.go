package fleet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/cikit/cikit"
)

func offer(id string, labels ...string) *Offer {
	return &Offer{RunID: "run", JobID: id, Attempt: 1, Spec: &cikit.JobSpec{ID: id, RunsOn: labels}}
}

func take(t *testing.T, d *Dispatcher, labels ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := d.Take(ctx, labels)
	require.NoError(t, err)
	return o.JobID
}

func TestDispatcherMatchesLabels(t *testing.T) {
	t.Parallel()
	d := NewDispatcher()
	d.Offer(offer("gpu", "linux", "gpu"))
	d.Offer(offer("any"))
	d.Offer(offer("linux", "linux"))
	require.Equal(t, 3, d.Len())
	d.Offer(offer("gpu-2", "gpu", "linux"))
	require.Equal(t, []Queue{{Labels: nil, Len: 1}, {Labels: []string{"gpu", "linux"}, Len: 2}, {Labels: []string{"linux"}, Len: 1}}, d.Queues())
	require.Equal(t, "gpu", take(t, d, "gpu", "linux"))

	// A runner without gpu takes the oldest job it can run.
	require.Equal(t, "any", take(t, d, "linux", "x64"))
	require.Equal(t, "linux", take(t, d, "linux", "x64"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := d.Take(ctx, []string{"linux"})
	require.ErrorIs(t, err, context.DeadlineExceeded, "the gpu job is not for it")
	require.Equal(t, "gpu-2", take(t, d, "gpu", "linux", "x64"))
	require.Zero(t, d.Len())
	require.Empty(t, d.Queues())
}

func TestDispatcherWakesWaitingRunner(t *testing.T) {
	t.Parallel()
	d := NewDispatcher()
	got := make(chan string, 2)
	var wg sync.WaitGroup
	for _, labels := range [][]string{{"windows"}, {"linux"}} {
		wg.Go(func() {
			o, err := d.Take(context.Background(), labels)
			if err == nil {
				got <- fmt.Sprint(labels, o.JobID)
			}
		})
	}
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.waiters) == 2
	}, time.Minute, time.Millisecond)
	d.Offer(offer("l", "linux"))
	require.Equal(t, "[linux]l", <-got, "the offer goes to the runner it matches, not the first waiting")
	d.Offer(offer("w", "windows"))
	require.Equal(t, "[windows]w", <-got)
	wg.Wait()
	require.Zero(t, d.Len())
}

func TestDispatcherOfferAfter(t *testing.T) {
	t.Parallel()
	d := NewDispatcher()
	d.OfferAfter(offer("dropped"), time.Hour)
	require.Zero(t, d.Len(), "not offered before its delay")
	d.OfferAfter(offer("soon"), time.Millisecond)
	require.Equal(t, "soon", take(t, d), "offered once its delay passed")

	d.Close()
	d.Offer(offer("ignored"))
	require.Zero(t, d.Len())
	d.mu.Lock()
	require.Empty(t, d.timers, "Close stops the delayed offers")
	d.mu.Unlock()
}

// TestDispatcherProperties: whatever the interleaving of offers and takes
// by runners of random labels, every offer is taken at most once, only by
// a runner having all its labels and whose every label the offer's
// Admission allows (SAFETY), and none is lost: what was not taken is
// still there.
func TestDispatcherProperties(t *testing.T) {
	t.Parallel()
	labels := []string{"linux", "windows", "gpu", "arm"}
	tenants := []string{"", "acme", "beta"}
	allowances := [][]string{nil, nil, {"*"}, {"*", "!gpu"}, {"linux", "arm"}, {}}
	rapid.Check(t, func(t *rapid.T) {
		d := NewDispatcher()
		limit := rapid.IntRange(0, 2).Draw(t, "tenant limit")
		d.LimitTenants(func(string) int { return limit })
		offered := map[string][]string{}
		tenantOf := map[string]string{}
		allowedOf := map[string][]string{}
		taken := map[string]bool{}
		running := map[string]int{}
		var unreleased []string
		n := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := range n {
			set := rapid.SliceOfNDistinct(rapid.SampledFrom(labels), 0, 3, rapid.ID[string]).Draw(t, "labels")
			if len(unreleased) > 0 && rapid.IntRange(0, 3).Draw(t, "release?") == 0 {
				k := rapid.IntRange(0, len(unreleased)-1).Draw(t, "release")
				id := unreleased[k]
				unreleased = slices.Delete(unreleased, k, k+1)
				d.Release("run", id, 1)
				running[tenantOf[id]]--
				continue
			}
			if rapid.Bool().Draw(t, "offer") {
				id := fmt.Sprint(i)
				offered[id] = set
				o := offer(id, set...)
				o.Tenant = rapid.SampledFrom(tenants).Draw(t, "tenant")
				tenantOf[id] = o.Tenant
				if allowed := rapid.SampledFrom(allowances).Draw(t, "allowed"); allowed != nil {
					o.Spec.Admission = &cikit.Admission{RunnerLabelsAllowed: allowed}
					allowedOf[id] = allowed
				}
				d.Offer(o)
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // only what is there already
			d.mu.Lock()
			have := map[string]bool{}
			for _, l := range set {
				have[l] = true
			}
			o := d.takeLocked(claimant{labels: have, list: set})
			d.mu.Unlock()
			if o == nil {
				_, err := d.Take(ctx, set)
				if err == nil {
					t.Fatalf("Take found an offer takeLocked did not")
				}
				continue
			}
			if taken[o.JobID] {
				t.Fatalf("offer %s taken twice", o.JobID)
			}
			taken[o.JobID] = true
			unreleased = append(unreleased, o.JobID)
			if tn := o.Tenant; tn != "" {
				running[tn]++
				if limit > 0 && running[tn] > limit {
					t.Fatalf("tenant %s has %d offers taken, beyond its limit of %d", tn, running[tn], limit)
				}
			}
			for id := range offered {
				// Nothing it could take waits ahead of it, except a
				// tenant's at its limit.
				if !taken[id] && id != o.JobID && atoi(id) < atoi(o.JobID) && hasAll(set, offered[id]) && cikit.LabelsAllowed(allowedOf[id], set) &&
					(tenantOf[id] == "" || limit == 0 || running[tenantOf[id]] < limit || tenantOf[id] == o.Tenant && running[o.Tenant] <= limit) {
					t.Fatalf("runner with %v took %s while %s, older and allowed, waited", set, o.JobID, id)
				}
			}
			for _, l := range offered[o.JobID] {
				if !have[l] {
					t.Fatalf("offer %s needs %v, taken by a runner with %v", o.JobID, offered[o.JobID], set)
				}
			}
			if !cikit.LabelsAllowed(allowedOf[o.JobID], set) {
				t.Fatalf("offer %s allows runners labelled %v only, taken by a runner with %v", o.JobID, allowedOf[o.JobID], set)
			}
		}
		if want := len(offered) - len(taken); d.Len() != want {
			t.Fatalf("%d offers left, want %d", d.Len(), want)
		}
	})
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func tenantOffer(id, tenant string) *Offer {
	o := offer(id)
	o.Tenant = tenant
	return o
}

// TestDispatcherTenantLimit: a tenant at its limit waits while other
// tenants' offers behind it go first, and a release hands its next offer
// to a waiting runner.
func TestDispatcherTenantLimit(t *testing.T) {
	t.Parallel()
	d := NewDispatcher()
	d.LimitTenants(func(tenant string) int {
		if tenant == "acme" {
			return 1
		}
		return 0
	})
	d.Offer(tenantOffer("a1", "acme"))
	d.Offer(tenantOffer("a2", "acme"))
	d.Offer(tenantOffer("a2", "acme")) // offered again while it waits: dropped
	d.Offer(tenantOffer("b1", "beta"))
	d.Offer(offer("n1"))
	require.Equal(t, []Queue{{Len: 4, Held: 1}}, d.Queues(), "a2 is held back behind a1")
	require.Equal(t, "a1", take(t, d))
	d.Offer(tenantOffer("a1", "acme")) // offered again while it runs: dropped
	require.Equal(t, []Queue{{Len: 3, Held: 1}}, d.Queues())
	running, limit := d.TenantRunning("acme")
	require.Equal(t, 1, running)
	require.Equal(t, 1, limit)
	require.Equal(t, "b1", take(t, d), "a2 waits for a1; beta's job goes first")
	require.Equal(t, "n1", take(t, d))

	got := make(chan string, 1)
	go func() { got <- take(t, d) }()
	select {
	case id := <-got:
		t.Fatalf("a runner took %s while acme is at its limit", id)
	case <-time.After(50 * time.Millisecond):
	}
	d.Release("run", "b1", 1) // not a limited tenant's: nothing changes
	d.Release("run", "a1", 1)
	require.Equal(t, "a2", <-got, "the release hands a2 to the waiting runner")
	d.Release("run", "a1", 1) // twice: nothing more
	running, _ = d.TenantRunning("acme")
	require.Equal(t, 1, running)
}

// TestDispatcherRunnerLabelsAllowed: a job whose Admission allows
// runners of some labels only goes to such a runner, though others
// matching its runs_on wait, and the offers behind it go to those.
func TestDispatcherRunnerLabelsAllowed(t *testing.T) {
	t.Parallel()
	d := NewDispatcher()
	fork := offer("fork", "linux")
	fork.Spec.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, RunnerLabelsAllowed: []string{"*", "!self-hosted"}}
	d.Offer(fork)
	d.Offer(offer("trusted", "linux"))
	require.Equal(t, []Queue{{Labels: []string{"linux"}, Len: 2, Restricted: 1}}, d.Queues())
	require.Equal(t, "trusted", take(t, d, "linux", "self-hosted"), "the self-hosted runner skips the fork's job")

	got := make(chan string, 1)
	go func() { got <- take(t, d, "linux", "self-hosted") }()
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.waiters) == 1
	}, time.Minute, time.Millisecond)
	fork2 := offer("fork-2", "linux")
	fork2.Spec.Admission = fork.Spec.Admission
	d.Offer(fork2)
	require.Equal(t, 2, d.Len(), "the waiting self-hosted runner is not handed the fork's job")
	d.Offer(offer("next", "linux"))
	require.Equal(t, "next", <-got, "a waiting self-hosted runner is handed the next job, not the fork's")
	require.Equal(t, "fork", take(t, d, "linux", "hosted"))
	require.Equal(t, "fork-2", take(t, d, "linux"))
	require.Zero(t, d.Len())
}
