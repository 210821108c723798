package ingest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cikit/cikit/dag"
)

// RunStore records deliveries and creates their pipeline runs, each
// delivery once: the delivery's record and its runs commit together.
type RunStore interface {
	// CreateRuns records the delivery of p.Event (with its RawDigest)
	// and creates p.Runs, in one transaction, unless the delivery (provider, hook, delivery id)
	// or its semantic key (see SemanticKey) was recorded before: then it
	// returns that record, created false, and writes nothing. An event
	// older than the newest one recorded for its ref (see OrderKey) is
	// recorded as dropped, with no runs. A pull request event records its
	// head (see PullRequestHead).
	CreateRuns(ctx context.Context, p *CreateRunsParams) (d *Delivery, created bool, err error)
	// Seen returns the record of ev's delivery or semantic key, or nil:
	// the cheap check before any work is done for a delivery.
	Seen(ctx context.Context, ev *Event) (*Delivery, error)
	// PullRequestHead returns the number of a pull request seen with head
	// branch at commit sha in repository org/repo.
	PullRequestHead(ctx context.Context, org, repo, branch, sha string) (number int, ok bool, err error)
	// PruneDeliveries deletes the delivery records made before t, and
	// the pull request heads seen before it, and returns how many
	// deliveries it deleted.
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// CreateRunsParams are the arguments of RunStore.CreateRuns.
type CreateRunsParams struct {
	Event *Event
	// Runs are the runs the event starts, one per pipeline it triggers.
	Runs []*dag.RunCreateParams
	// Reason says why there are no runs (no pipeline triggered, the push
	// yields to a pull request); it is recorded as Delivery.Dropped.
	Reason string
}

// Delivery is the record of a delivery taken in.
type Delivery struct {
	Provider    Provider
	HookID      string
	DeliveryID  string
	SemanticKey string
	// RunIDs are the runs the delivery created.
	RunIDs []string
	// Dropped says why it created none.
	Dropped string
	// RawDigest is the Event.RawDigest of the delivery recorded: another
	// delivery with its key (provider, hook, delivery id) and another
	// digest is a conflicting redelivery. Empty when unknown (an event
	// without a body, a record made before digests were kept).
	RawDigest string
	CreatedAt time.Time
}

// SemanticKey identifies what a delivery asks for, whatever its delivery
// id: a push of a ref from one commit to another, a tag at a commit, a
// pull request at a head commit. A replayed body under a forged delivery
// id has the key of the original and creates nothing. Dispatches have
// none: each is its own request.
func SemanticKey(ev *Event) string {
	repo := ev.Org + "/" + ev.Repo
	switch ev.Kind {
	case KindPush:
		return "push " + repo + " " + ev.RefName + " " + ev.Before + ".." + ev.SHA
	case KindTag:
		return "tag " + repo + " " + ev.RefName + " " + ev.SHA
	case KindPullRequest:
		return "pr " + repo + " #" + strconv.Itoa(ev.PRNumber) + " " + ev.SHA
	}
	return ""
}

// OrderKey names the sequence an event belongs to for ordering: its ref,
// or its pull request. An event older than the newest of its sequence is
// out of order.
func OrderKey(ev *Event) string {
	if ev.Kind == KindPullRequest {
		return ev.Org + "/" + ev.Repo + "/pr/" + strconv.Itoa(ev.PRNumber)
	}
	return ev.Key()
}

// outOfOrder is the reason an event older than its sequence's newest is
// dropped.
func outOfOrder(ev *Event, newest time.Time) string {
	return fmt.Sprintf("out of order: %s happened at %s, before %s, the newest event of %s",
		ev.SHA, ev.EventTime.UTC().Format(time.RFC3339Nano), newest.UTC().Format(time.RFC3339Nano), OrderKey(ev))
}

// runKey is the idempotency key of the i-th run of a delivery.
func runKey(ev *Event, i int) string {
	return string(ev.Provider) + "/" + ev.HookID + "/" + ev.DeliveryID + "#" + strconv.Itoa(i)
}

// MemoryRunStore is a RunStore in process memory, creating runs in a dag
// store (a dag.MemoryStore in the embedded platform).
type MemoryRunStore struct {
	dag dag.Store
	now func() time.Time

	mu         sync.Mutex
	deliveries map[[3]string]*Delivery
	semantic   map[string]*Delivery
	refs       map[string]time.Time
	heads      map[[4]string]head
}

// head is a pull request head seen.
type head struct {
	number int
	seen   time.Time
}

var _ RunStore = (*MemoryRunStore)(nil)

// NewMemoryRunStore returns a MemoryRunStore creating runs in runs; now
// is its clock (time.Now when nil).
func NewMemoryRunStore(runs dag.Store, now func() time.Time) *MemoryRunStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryRunStore{dag: runs, now: now, deliveries: make(map[[3]string]*Delivery),
		semantic: make(map[string]*Delivery), refs: make(map[string]time.Time), heads: make(map[[4]string]head)}
}

func deliveryKey(ev *Event) [3]string {
	return [3]string{string(ev.Provider), ev.HookID, ev.DeliveryID}
}

func (s *MemoryRunStore) seen(ev *Event) *Delivery {
	if d, ok := s.deliveries[deliveryKey(ev)]; ok {
		return d
	}
	if k := SemanticKey(ev); k != "" {
		if d, ok := s.semantic[k]; ok {
			return d
		}
	}
	return nil
}

func (s *MemoryRunStore) Seen(ctx context.Context, ev *Event) (*Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.seen(ev); d != nil {
		return d.clone(), nil
	}
	return nil, nil
}

func (s *MemoryRunStore) CreateRuns(ctx context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	ev := p.Event
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.seen(ev); d != nil {
		return d.clone(), false, nil
	}
	d := &Delivery{Provider: ev.Provider, HookID: ev.HookID, DeliveryID: ev.DeliveryID, SemanticKey: SemanticKey(ev),
		Dropped: p.Reason, RawDigest: ev.RawDigest(), CreatedAt: s.now()}
	order := OrderKey(ev)
	if newest, ok := s.refs[order]; ok && !ev.EventTime.IsZero() && ev.EventTime.Before(newest) {
		d.Dropped = outOfOrder(ev, newest)
	} else {
		for i, rp := range p.Runs {
			c := *rp
			c.IdempotencyKey = runKey(ev, i)
			// A failure leaves the runs created so far; the delivery is
			// not recorded, and its retry finds them by their keys.
			run, err := s.dag.RunCreate(ctx, &c)
			if err != nil {
				return nil, false, err
			}
			d.RunIDs = append(d.RunIDs, run.ID)
		}
		if len(d.RunIDs) > 0 {
			d.Dropped = ""
		}
		if !ev.EventTime.IsZero() {
			s.refs[order] = ev.EventTime
		}
		if ev.Kind == KindPullRequest {
			s.heads[[4]string{ev.Org, ev.Repo, ev.RefName, ev.SHA}] = head{ev.PRNumber, d.CreatedAt}
		}
	}
	s.deliveries[deliveryKey(ev)] = d
	if d.SemanticKey != "" {
		s.semantic[d.SemanticKey] = d
	}
	return d.clone(), true, nil
}

func (s *MemoryRunStore) PullRequestHead(ctx context.Context, org, repo, branch, sha string) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.heads[[4]string{org, repo, branch, sha}]
	return h.number, ok, nil
}

func (s *MemoryRunStore) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, d := range s.deliveries {
		if d.CreatedAt.Before(before) {
			delete(s.deliveries, k)
			if s.semantic[d.SemanticKey] == d {
				delete(s.semantic, d.SemanticKey)
			}
			n++
		}
	}
	for k, h := range s.heads {
		if h.seen.Before(before) {
			delete(s.heads, k)
		}
	}
	return n, nil
}

func (d *Delivery) clone() *Delivery {
	c := *d
	c.RunIDs = slices.Clone(d.RunIDs)
	return &c
}
