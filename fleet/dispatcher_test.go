package fleet

import (
	"context"
	"fmt"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	}, 5*time.Second, time.Millisecond)
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
	d.OfferAfter(offer("later"), 50*time.Millisecond)
	require.Zero(t, d.Len(), "not offered before its delay")
	require.Equal(t, "later", take(t, d))

	d.OfferAfter(offer("dropped"), time.Hour)
	d.Close()
	d.Offer(offer("ignored"))
	require.Zero(t, d.Len())
	d.mu.Lock()
	require.Empty(t, d.timers, "Close stops the delayed offers")
	d.mu.Unlock()
}

// TestDispatcherProperties: whatever the interleaving of offers and takes
// by runners of random labels, every offer is taken at most once, only by
// a runner having all its labels, and none is lost: what was not taken is
// still there.
func TestDispatcherProperties(t *testing.T) {
	t.Parallel()
	labels := []string{"linux", "windows", "gpu", "arm"}
	rapid.Check(t, func(t *rapid.T) {
		d := NewDispatcher()
		offered := map[string][]string{}
		taken := map[string]bool{}
		n := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := range n {
			set := rapid.SliceOfNDistinct(rapid.SampledFrom(labels), 0, 3, rapid.ID[string]).Draw(t, "labels")
			if rapid.Bool().Draw(t, "offer") {
				id := fmt.Sprint(i)
				offered[id] = set
				d.Offer(offer(id, set...))
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // only what is there already
			d.mu.Lock()
			have := map[string]bool{}
			for _, l := range set {
				have[l] = true
			}
			o := d.takeLocked(have)
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
			for _, l := range offered[o.JobID] {
				if !have[l] {
					t.Fatalf("offer %s needs %v, taken by a runner with %v", o.JobID, offered[o.JobID], set)
				}
			}
		}
		if want := len(offered) - len(taken); d.Len() != want {
			t.Fatalf("%d offers left, want %d", d.Len(), want)
		}
	})
}
