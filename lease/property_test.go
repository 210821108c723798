package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/lease"
)

// modelJob is what the model expects of one job.
type modelJob struct {
	state   cikit.JobState
	attempt int
	holder  *lease.Lease // the current lease, nil when none
	expires time.Time
	tokens  []string // every token ever issued for the job
}

// machine drives a Manager and a Reaper over two independent jobs and
// compares them with a model after every action.
type machine struct {
	ctx   context.Context
	b     *bundle
	r     *lease.Reaper
	ns    *redistest.NS
	keys  string // Redis key prefix of this check
	jobs  map[string]*modelJob
	names []string
}

func (m *machine) job(t *rapid.T) (string, *modelJob) {
	name := rapid.SampledFrom(m.names).Draw(t, "job")
	return name, m.jobs[name]
}

func (m *machine) attempt(name string, n int) lease.Attempt { return m.b.attempt(name, n) }

// endAttempt applies the model of a failure of class infrastructure.
func (j *modelJob) failInfra() {
	j.holder = nil
	if j.attempt <= dag.DefaultInfrastructureRetries {
		j.state, j.attempt = cikit.JobReady, j.attempt+1
		return
	}
	j.state = cikit.JobFailed
}

func fenced(t *rapid.T, err error, what string) {
	if !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("%s: want ErrFenced, got %v", what, err)
	}
}

func (m *machine) queue(t *rapid.T) {
	name, j := m.job(t)
	_, err := m.b.jobs.JobQueue(m.ctx, &dag.JobTransitionParams{RunID: m.b.run.ID, JobID: name, Attempt: j.attempt})
	if j.state != cikit.JobReady {
		if err == nil {
			t.Fatalf("queued %s in state %s", name, j.state)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	j.state = cikit.JobQueued
}

func (m *machine) claim(t *rapid.T) {
	name, j := m.job(t)
	n := j.attempt + rapid.IntRange(-1, 1).Draw(t, "attempt offset")
	if n < 1 {
		n = 1
	}
	l, err := m.b.m.Claim(m.ctx, m.attempt(name, n), "runner")
	if l != nil {
		j.tokens = append(j.tokens, l.Token)
	}
	ok := n == j.attempt && j.state == cikit.JobQueued && j.holder == nil
	if !ok {
		if !errors.Is(err, lease.ErrNotClaimed) {
			t.Fatalf("claim of %s attempt %d (model: %s attempt %d): want ErrNotClaimed, got %v", name, n, j.state, j.attempt, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("claim of %s attempt %d: %v", name, n, err)
	}
	j.state, j.holder, j.expires = cikit.JobRunning, l, l.Expires
}

// claimMany claims a batch of attempts at once; the model takes them one
// after the other.
func (m *machine) claimMany(t *rapid.T) {
	var reqs []lease.ClaimRequest
	for range rapid.IntRange(1, 4).Draw(t, "claims") {
		name, j := m.job(t)
		n := max(1, j.attempt+rapid.IntRange(-1, 1).Draw(t, "attempt offset"))
		reqs = append(reqs, lease.ClaimRequest{Attempt: m.attempt(name, n), Runner: "runner"})
	}
	for i, r := range m.b.m.ClaimMany(m.ctx, reqs) {
		a, j := reqs[i].Attempt, m.jobs[reqs[i].JobID]
		if r.Lease != nil {
			j.tokens = append(j.tokens, r.Lease.Token)
		}
		if a.Attempt != j.attempt || j.state != cikit.JobQueued || j.holder != nil {
			if !errors.Is(r.Err, lease.ErrNotClaimed) {
				t.Fatalf("claim %d of %s (model: %s attempt %d): want ErrNotClaimed, got %v", i, a, j.state, j.attempt, r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Fatalf("claim %d of %s: %v", i, a, r.Err)
		}
		j.state, j.holder, j.expires = cikit.JobRunning, r.Lease, r.Lease.Expires
	}
}

// completeMany completes the attempts of every holder at once, some
// twice: the repeats are fenced.
func (m *machine) completeMany(t *rapid.T) {
	var reqs []lease.CompleteRequest
	for _, name := range m.names {
		j := m.jobs[name]
		if j.holder == nil {
			continue
		}
		outcome := rapid.SampledFrom([]cikit.JobState{cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled}).Draw(t, "outcome")
		r := lease.CompleteRequest{Attempt: j.holder.Attempt, Token: j.holder.Token, Params: &dag.JobCompleteParams{Outcome: outcome, FailureClass: cikit.FailureScript}}
		reqs = append(reqs, r)
		if rapid.Bool().Draw(t, "twice") {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		t.Skip("no holder")
	}
	for i, r := range m.b.m.CompleteMany(m.ctx, reqs) {
		j := m.jobs[reqs[i].JobID]
		if j.holder == nil {
			fenced(t, r.Err, "a repeated completion")
			continue
		}
		if r.Err != nil {
			t.Fatalf("the holder of %s cannot complete: %v", reqs[i].JobID, r.Err)
		}
		j.state, j.holder = reqs[i].Params.Outcome, nil
	}
}

func (m *machine) renew(t *rapid.T) {
	name, j := m.job(t)
	if j.holder == nil {
		t.Skip("no holder")
	}
	r, err := m.b.m.Renew(m.ctx, j.holder.Attempt, j.holder.Token)
	if err != nil {
		t.Fatalf("the holder of %s cannot renew: %v", name, err)
	}
	if r.CancelRequested != (j.state == cikit.JobCancelRequested) {
		t.Fatalf("CancelRequested %v in state %s", r.CancelRequested, j.state)
	}
	j.expires = r.Expires
}

func (m *machine) complete(t *rapid.T) {
	name, j := m.job(t)
	if j.holder == nil {
		t.Skip("no holder")
	}
	outcome := rapid.SampledFrom([]cikit.JobState{cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled}).Draw(t, "outcome")
	_, err := m.b.m.Complete(m.ctx, j.holder.Attempt, j.holder.Token, &dag.JobCompleteParams{Outcome: outcome, FailureClass: cikit.FailureScript})
	if err != nil {
		t.Fatalf("the holder of %s cannot complete: %v", name, err)
	}
	j.state, j.holder = outcome, nil
}

func (m *machine) giveBack(t *rapid.T) {
	name, j := m.job(t)
	if j.holder == nil {
		t.Skip("no holder")
	}
	if _, err := m.b.m.Return(m.ctx, j.holder.Attempt, j.holder.Token, "shutdown"); err != nil {
		t.Fatalf("the holder of %s cannot return it: %v", name, err)
	}
	if j.state == cikit.JobCancelRequested {
		j.state, j.holder = cikit.JobCancelled, nil
		return
	}
	j.failInfra()
}

// intruder calls with a token or attempt that is not the holder's.
func (m *machine) intruder(t *rapid.T) {
	name, j := m.job(t)
	tokens := append([]string{"forged"}, j.tokens...)
	token := rapid.SampledFrom(tokens).Draw(t, "token")
	n := max(1, j.attempt+rapid.IntRange(-2, 1).Draw(t, "attempt offset"))
	if j.holder != nil && token == j.holder.Token && n == j.attempt {
		t.Skip("that is the holder")
	}
	a := m.attempt(name, n)
	_, err := m.b.m.Renew(m.ctx, a, token)
	fenced(t, err, "Renew")
	fenced(t, m.b.m.Check(m.ctx, a, token), "Check")
	_, err = m.b.m.Complete(m.ctx, a, token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
	fenced(t, err, "Complete")
	_, err = m.b.m.Return(m.ctx, a, token, "")
	fenced(t, err, "Return")
	fenced(t, m.b.store.LeaseRenew(m.ctx, a, token, m.b.clock.Now().Add(time.Hour)), "Store.LeaseRenew")
}

func (m *machine) advance(t *rapid.T) {
	m.b.clock.Advance(time.Duration(rapid.IntRange(1, 60).Draw(t, "seconds")) * time.Second)
}

func (m *machine) reap(t *rapid.T) {
	if _, err := m.r.Reap(m.ctx); err != nil {
		t.Fatal(err)
	}
	cutoff := m.b.clock.Now().Add(-m.r.Grace())
	for _, j := range m.jobs {
		if j.holder == nil || j.expires.After(cutoff) {
			continue
		}
		if j.state == cikit.JobCancelRequested {
			j.state, j.holder = cikit.JobCancelled, nil
		} else {
			j.failInfra()
		}
	}
}

func (m *machine) cancel(t *rapid.T) {
	if _, err := m.b.jobs.RunCancel(m.ctx, m.b.run.ID); err != nil {
		t.Fatal(err)
	}
	for _, j := range m.jobs {
		switch {
		case j.state == cikit.JobRunning:
			j.state = cikit.JobCancelRequested
		case !j.state.Terminal() && j.state != cikit.JobCancelRequested:
			j.state = cikit.JobCancelled
		}
	}
}

func (m *machine) flush(t *rapid.T) {
	if m.ns == nil {
		t.Skip("no Redis")
	}
	for _, name := range m.names {
		if err := m.ns.Client.Del(m.ctx, m.keys+m.b.run.ID+"/"+name).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// check is the invariant, after every action:
//   - SAFETY: the store holds exactly the model's current lease of each
//     job (so at most one), and no other token is accepted by Check;
//   - the dag job's state and attempt are the model's.
func (m *machine) check(t *rapid.T) {
	for _, name := range m.names {
		j := m.jobs[name]
		dj, err := m.b.jobs.JobGet(m.ctx, m.b.run.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		if dj.State != j.state || dj.Attempt != j.attempt {
			t.Fatalf("%s: dag has %s attempt %d, the model %s attempt %d", name, dj.State, dj.Attempt, j.state, j.attempt)
		}
		l, err := m.b.store.LeaseGet(m.ctx, m.b.run.ID, name)
		switch {
		case j.holder == nil && !errors.Is(err, cikit.ErrNotFound):
			t.Fatalf("%s: the store has a lease %+v (err %v), the model none", name, l, err)
		case j.holder != nil && (err != nil || l.Token != j.holder.Token || l.Attempt != j.holder.Attempt || !l.Expires.Equal(j.expires)):
			t.Fatalf("%s: the store has %+v (err %v), the model %+v until %s", name, l, err, j.holder, j.expires)
		}
		for _, tok := range j.tokens {
			for n := max(1, j.attempt-1); n <= j.attempt; n++ {
				err := m.b.m.Check(m.ctx, m.attempt(name, n), tok)
				holder := j.holder != nil && tok == j.holder.Token && n == j.attempt
				if holder != (err == nil) {
					t.Fatalf("%s: Check of attempt %d token %s: %v (holder %v)", name, n, tok, err, holder)
				}
			}
		}
	}
}

// TestPropertyLeases runs the lease state machine on the memory stores,
// alone and with Redis, and on PostgreSQL with Redis, where claims and
// completions write leases in the job store's transactions.
func TestPropertyLeases(t *testing.T) {
	t.Parallel()
	for _, st := range []stack{{name: "Memory"}, {name: "Memory+Redis", redis: true}, {name: "Postgres+Redis", pg: true, redis: true}} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			var ns *redistest.NS
			if st.redis {
				ns = redistest.New(t)
			}
			var db *pgtest.DB
			var leases *lease.PostgresStore
			if st.pg {
				db = pgtest.New(t)
				leases = newPostgresStore(t, db)
				js, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool})
				if err != nil {
					t.Fatal(err)
				}
				if err := js.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			var checks atomic.Int64
			rapid.Check(t, func(t *rapid.T) {
				c := newClock()
				b := &bundle{clock: c}
				if !st.pg {
					b.jobs, b.store = dag.NewMemoryStore(dag.MemoryConfig{Now: c.Now}), lease.NewMemoryStore()
				} else {
					// Each check starts from empty tables: the reaper
					// scans them all.
					if _, err := db.Pool.Exec(t.Context(), `DELETE FROM job_leases; DELETE FROM pipeline_runs`); err != nil {
						t.Fatal(err)
					}
					js, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: c.Now})
					if err != nil {
						t.Fatal(err)
					}
					b.jobs, b.store = js, leases
				}
				var tokens atomic.Int64
				cfg := lease.Config{Store: b.store, Jobs: b.jobs, TTL: ttl, Now: c.Now, Logger: quiet,
					NewToken: func() string { return fmt.Sprintf("tok%d", tokens.Add(1)) }}
				m := &machine{ctx: context.Background(), b: b, ns: ns, names: []string{"a", "b"}}
				if ns != nil {
					m.keys = fmt.Sprintf("%s%d:", ns.Prefix, checks.Add(1))
					cfg.Redis, cfg.KeyPrefix = ns.Client, m.keys
				}
				var err error
				if b.m, err = lease.NewManager(cfg); err != nil {
					t.Fatal(err)
				}
				if lease.Joint(b.m) != st.pg {
					t.Fatalf("joint stores: %v, want %v", lease.Joint(b.m), st.pg)
				}
				if m.r, err = lease.NewReaper(lease.ReaperConfig{Manager: b.m, BatchSize: 1}); err != nil {
					t.Fatal(err)
				}
				step := []cikit.Step{{Run: "true"}}
				if b.run, err = b.jobs.RunCreate(m.ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "a", Steps: step}, {ID: "b", Steps: step}}}); err != nil {
					t.Fatal(err)
				}
				m.jobs = map[string]*modelJob{"a": {state: cikit.JobReady, attempt: 1}, "b": {state: cikit.JobReady, attempt: 1}}
				t.Repeat(map[string]func(*rapid.T){
					"queue": m.queue, "claim": m.claim, "claimMany": m.claimMany, "completeMany": m.completeMany, "renew": m.renew, "complete": m.complete,
					"return": m.giveBack, "intruder": m.intruder, "advance": m.advance, "reap": m.reap,
					"cancel": func(t *rapid.T) {
						if rapid.IntRange(0, 9).Draw(t, "rarely") == 0 {
							m.cancel(t)
						}
					},
					"flush": m.flush,
					"":      m.check,
				})
			})
		})
	}
}
