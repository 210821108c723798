package fleet

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/lease"
)

// Offer is a QUEUED job attempt waiting for a runner.
type Offer struct {
	RunID   string
	JobID   string
	Attempt int
	// Spec is the job as compiled; its RunsOn labels decide which runners
	// may take it.
	Spec *cikit.JobSpec
	// Tenant is who the job runs for, for the dispatcher's tenant
	// limit; empty: no tenant, no limit.
	Tenant string
}

// attemptKey names an attempt the Dispatcher handed out.
type attemptKey struct {
	run, job string
	attempt  int
}

// Dispatcher hands offers to runners waiting for work whose labels
// include every label an offer's job runs on and, for a job whose
// Admission restricts the runners that may take it
// (cikit.Admission.RunnerLabelsAllowed), whose every label the Admission
// allows (cikit.LabelsAllowed). Offers of one label set are
// taken first come, first served; a runner matching several label sets
// takes the offer that has waited longest among their heads. A waiting
// runner is woken by the offer itself, not by polling.
//
// The Dispatcher is memory only: it holds what was offered in this
// process. It is safe for concurrent use.
type Dispatcher struct {
	mu      sync.Mutex
	queues  map[string]*offerQueue // by labelKey of the offers' RunsOn
	waiters []*waiter              // oldest first
	seq     uint64
	timers  map[*time.Timer]struct{}
	closed  bool

	// limit, when set, bounds each tenant's offers taken and not yet
	// released.
	limit   func(tenant string) int
	running map[string]int        // per tenant, offers taken and not released
	held    map[attemptKey]string // the tenant of each of those
	// queued holds the attempts waiting in queues: an attempt offered
	// again while it waits, or while its tenant's place is held, is
	// dropped, so that each is taken and released once.
	queued map[attemptKey]bool
}

// offerQueue holds the offers of one label set, oldest first.
type offerQueue struct {
	labels []string // sorted, unique
	offers []queuedOffer
}

type queuedOffer struct {
	*Offer
	seq uint64 // order of arrival over all queues
}

// waiter is a runner blocked in Take.
type waiter struct {
	claimant
	got chan *Offer // buffered 1; receives at most one offer
}

// claimant is the labels of a runner asking for work.
type claimant struct {
	labels map[string]bool
	list   []string
}

// mayTake reports whether claimant r may run offer o: it has every label
// o runs on and o's Admission allows each of its labels.
func (r claimant) mayTake(o *Offer, runsOn []string) bool {
	return matches(r.labels, runsOn) && mayRun(o.Spec, r.list)
}

// mayRun reports whether a runner with labels may run a job of spec, as
// far as the job's Admission says (cikit.LabelsAllowed); nil spec: any.
func mayRun(spec *cikit.JobSpec, labels []string) bool {
	return spec == nil || spec.Admission == nil || cikit.LabelsAllowed(spec.Admission.RunnerLabelsAllowed, labels)
}

// restricted reports whether spec's Admission restricts which runners
// may run it.
func restricted(spec *cikit.JobSpec) bool {
	return spec != nil && spec.Admission != nil && spec.Admission.RunnerLabelsAllowed != nil
}

// NewDispatcher returns an empty Dispatcher.
func NewDispatcher() *Dispatcher {
	return &Dispatcher{queues: map[string]*offerQueue{}, timers: map[*time.Timer]struct{}{},
		running: map[string]int{}, held: map[attemptKey]string{}, queued: map[attemptKey]bool{}}
}

// LimitTenants bounds how many offers of each tenant may be taken and not
// yet released (Release): limit returns a tenant's bound, 0 or less for
// none. An offer of a tenant at its bound waits, and the offers behind it
// of other tenants go first. limit is called with the Dispatcher's lock
// held, so it must not call the Dispatcher; a bound it raises takes
// effect at the next offer, take or release.
func (d *Dispatcher) LimitTenants(limit func(tenant string) int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.limit = limit
	d.matchLocked()
}

// atLimitLocked reports whether tenant may not take another offer.
func (d *Dispatcher) atLimitLocked(tenant string) bool {
	if tenant == "" || d.limit == nil {
		return false
	}
	n := d.limit(tenant)
	return n > 0 && d.running[tenant] >= n
}

// handLocked records that o is taken.
func (d *Dispatcher) handLocked(o *Offer) {
	if o.Tenant != "" && d.limit != nil {
		d.running[o.Tenant]++
		d.held[attemptKey{o.RunID, o.JobID, o.Attempt}] = o.Tenant
	}
}

// Release says that the attempt of an offer taken earlier no longer runs
// (it ended, was refused or given back), which frees its place in its
// tenant's limit. Releasing an attempt not taken, or twice, does nothing.
func (d *Dispatcher) Release(runID, jobID string, attempt int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := attemptKey{runID, jobID, attempt}
	t, ok := d.held[k]
	if !ok {
		return
	}
	delete(d.held, k)
	if d.running[t]--; d.running[t] <= 0 {
		delete(d.running, t)
	}
	d.matchLocked()
}

// TenantRunning returns how many offers of tenant are taken and not yet
// released, and its limit (0: none).
func (d *Dispatcher) TenantRunning(tenant string) (running, limit int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.limit != nil && tenant != "" {
		limit = max(d.limit(tenant), 0)
	}
	return d.running[tenant], limit
}

// Withdraw drops the waiting offers of attempts that can no longer run:
// their job ended or was cancelled, or a later attempt replaced them. A
// runner is then never handed one only to have its claim refused, which
// after a large run was cancelled cost a refused claim per job. Attempts
// without a waiting offer are ignored, at no cost; withdrawing any costs
// one pass over the waiting offers, however many are withdrawn at once.
func (d *Dispatcher) Withdraw(attempts ...lease.Attempt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	gone := make(map[attemptKey]bool)
	for _, a := range attempts {
		if k := (attemptKey{a.RunID, a.JobID, a.Attempt}); d.queued[k] {
			gone[k] = true
			delete(d.queued, k)
		}
	}
	if len(gone) == 0 {
		return
	}
	for key, q := range d.queues {
		q.offers = slices.DeleteFunc(q.offers, func(o queuedOffer) bool { return gone[attemptKey{o.RunID, o.JobID, o.Attempt}] })
		if len(q.offers) == 0 {
			delete(d.queues, key)
		}
	}
}

// matchLocked hands waiting offers to waiting runners, as far as they
// match: after a tenant's place was freed.
func (d *Dispatcher) matchLocked() {
	for i := 0; i < len(d.waiters); {
		w := d.waiters[i]
		o := d.takeLocked(w.claimant)
		if o == nil {
			i++
			continue
		}
		d.waiters = slices.Delete(d.waiters, i, i+1)
		w.got <- o
	}
}

// labelKey is the canonical form of a label set.
func labelKey(labels []string) (string, []string) {
	ls := slices.Clone(labels)
	slices.Sort(ls)
	ls = slices.Compact(ls)
	return strings.Join(ls, "\x00"), ls
}

// Offer adds o, handing it at once to the longest-waiting runner it
// matches.
func (d *Dispatcher) Offer(o *Offer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.offerLocked(o)
}

// OfferAfter adds o once delay has passed: a retried attempt waits out its
// backoff without holding anything.
func (d *Dispatcher) OfferAfter(o *Offer, delay time.Duration) {
	if delay <= 0 {
		d.Offer(o)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.timers, t)
		if !d.closed {
			d.offerLocked(o)
		}
	})
	d.timers[t] = struct{}{}
}

func (d *Dispatcher) offerLocked(o *Offer) {
	var runsOn []string
	if o.Spec != nil {
		runsOn = o.Spec.RunsOn
	}
	ak := attemptKey{o.RunID, o.JobID, o.Attempt}
	if _, held := d.held[ak]; held || d.queued[ak] {
		return
	}
	key, labels := labelKey(runsOn)
	for i, w := range d.waiters {
		if w.mayTake(o, labels) && !d.atLimitLocked(o.Tenant) {
			d.waiters = slices.Delete(d.waiters, i, i+1)
			d.handLocked(o)
			w.got <- o
			return
		}
	}
	q := d.queues[key]
	if q == nil {
		q = &offerQueue{labels: labels}
		d.queues[key] = q
	}
	d.seq++
	q.offers = append(q.offers, queuedOffer{Offer: o, seq: d.seq})
	d.queued[ak] = true
}

// Waiting returns the offers waiting in the queue of the label set
// labels (a Queue's Labels), oldest first.
func (d *Dispatcher) Waiting(labels []string) []Offer {
	d.mu.Lock()
	defer d.mu.Unlock()
	key, _ := labelKey(labels)
	q := d.queues[key]
	if q == nil {
		return nil
	}
	out := make([]Offer, len(q.offers))
	for i, o := range q.offers {
		out[i] = *o.Offer
	}
	return out
}

func matches(have map[string]bool, need []string) bool {
	for _, l := range need {
		if !have[l] {
			return false
		}
	}
	return true
}

// Take returns the oldest offer a runner with labels may run, waiting for
// one until ctx ends; it then returns ctx's error. An offer handed to a
// Take whose context ends at the same moment is offered again.
func (d *Dispatcher) Take(ctx context.Context, labels []string) (*Offer, error) {
	have := make(map[string]bool, len(labels))
	for _, l := range labels {
		have[l] = true
	}
	r := claimant{labels: have, list: slices.Clone(labels)}
	d.mu.Lock()
	if o := d.takeLocked(r); o != nil {
		d.mu.Unlock()
		return o, nil
	}
	w := &waiter{claimant: r, got: make(chan *Offer, 1)}
	d.waiters = append(d.waiters, w)
	d.mu.Unlock()
	select {
	case o := <-w.got:
		return o, nil
	case <-ctx.Done():
		d.mu.Lock()
		defer d.mu.Unlock()
		if i := slices.Index(d.waiters, w); i >= 0 {
			d.waiters = slices.Delete(d.waiters, i, i+1)
			return nil, ctx.Err()
		}
		// An offer was handed over while the context ended: it goes
		// back, to the next runner.
		o := <-w.got
		d.unhandLocked(o)
		if !d.closed {
			d.offerLocked(o)
			// Its tenant's place is free again: an offer it held back
			// may go to another runner.
			d.matchLocked()
		}
		return nil, ctx.Err()
	}
}

// unhandLocked undoes handLocked for an offer going back to its queue.
func (d *Dispatcher) unhandLocked(o *Offer) {
	k := attemptKey{o.RunID, o.JobID, o.Attempt}
	if t, ok := d.held[k]; ok {
		delete(d.held, k)
		if d.running[t]--; d.running[t] <= 0 {
			delete(d.running, t)
		}
	}
}

// takeLocked removes, records as taken and returns the oldest offer
// claimant r may take whose tenant is below its limit, or nil.
func (d *Dispatcher) takeLocked(r claimant) *Offer {
	var best *offerQueue
	var bestKey string
	bestAt := -1
	for key, q := range d.queues {
		if len(q.offers) == 0 || !matches(r.labels, q.labels) {
			continue
		}
		// The first offer of the queue whose tenant may take one and
		// whose Admission lets the runner take it: the head, unless
		// tenant limits or a policy hold it back.
		at := slices.IndexFunc(q.offers, func(o queuedOffer) bool { return !d.atLimitLocked(o.Tenant) && mayRun(o.Spec, r.list) })
		if at < 0 {
			continue
		}
		if best == nil || q.offers[at].seq < best.offers[bestAt].seq {
			best, bestKey, bestAt = q, key, at
		}
	}
	if best == nil {
		return nil
	}
	o := best.offers[bestAt].Offer
	if bestAt == 0 {
		best.offers[0] = queuedOffer{}
		best.offers = best.offers[1:]
	} else {
		best.offers = slices.Delete(best.offers, bestAt, bestAt+1)
	}
	if len(best.offers) == 0 {
		delete(d.queues, bestKey)
	}
	delete(d.queued, attemptKey{o.RunID, o.JobID, o.Attempt})
	d.handLocked(o)
	return o
}

// Queue is the offers of one label set that wait for a runner.
type Queue struct {
	// Labels are the offers' runs_on labels, sorted.
	Labels []string
	// Len is how many offers wait.
	Len int
	// Held is how many of them their tenants' limits hold back: the
	// places their tenants have left do not cover them (counted oldest
	// first, over all queues). A runner could not take them now.
	Held int
	// Restricted is how many of them only some runners with the labels
	// may take: their Admission restricts the runners' labels
	// (cikit.Admission.RunnerLabelsAllowed; see Waiting).
	Restricted int
}

// Queues returns the offers waiting for a runner, a Queue per label set,
// ordered by label set. Delayed offers (OfferAfter) show once offered.
func (d *Dispatcher) Queues() []Queue {
	d.mu.Lock()
	defer d.mu.Unlock()
	type entry struct {
		q   int // index into out
		seq uint64
		t   string
	}
	out := make([]Queue, 0, len(d.queues))
	var limited []entry
	for _, q := range d.queues {
		out = append(out, Queue{Labels: slices.Clone(q.labels), Len: len(q.offers)})
		for _, o := range q.offers {
			if restricted(o.Spec) {
				out[len(out)-1].Restricted++
			}
			if o.Tenant != "" && d.limit != nil && d.limit(o.Tenant) > 0 {
				limited = append(limited, entry{q: len(out) - 1, seq: o.seq, t: o.Tenant})
			}
		}
	}
	slices.SortFunc(limited, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	left := map[string]int{}
	for _, e := range limited {
		n, ok := left[e.t]
		if !ok {
			n = d.limit(e.t) - d.running[e.t]
		}
		if n > 0 {
			left[e.t] = n - 1
			continue
		}
		left[e.t] = 0
		out[e.q].Held++
	}
	slices.SortFunc(out, func(a, b Queue) int { return slices.Compare(a.Labels, b.Labels) })
	return out
}

// Len returns how many offers wait for a runner, for metrics and tests.
func (d *Dispatcher) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, q := range d.queues {
		n += len(q.offers)
	}
	return n
}

// Close drops the offers waiting and the delayed ones; later offers are
// ignored. Runners blocked in Take wait until their contexts end.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for t := range d.timers {
		t.Stop()
	}
	clear(d.timers)
	clear(d.queues)
	clear(d.queued)
}
