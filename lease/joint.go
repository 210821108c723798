package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/groupcommit"
)

// joint is a lease PostgresStore and a dag.PostgresStore over one pool:
// their tables are in one database, so a claim records its lease in the
// transaction that starts the job, and a completion deletes it in the
// transaction that completes the job. A claim is then a Redis round trip
// and the job store's transaction, which commits without waiting for the
// disk; a completion that transaction alone, which checks the leases as
// it deletes them, with the hints' release beside it.
type joint struct {
	jobs   *dag.PostgresStore
	leases *PostgresStore
}

// jointStores returns the joint of the stores when they share a pool.
func jointStores(jobs dag.Store, leases Store) *joint {
	js, ok := jobs.(*dag.PostgresStore)
	if !ok {
		return nil
	}
	ls, ok := leases.(*PostgresStore)
	if !ok || js.Pool() != ls.pool {
		return nil
	}
	return &joint{jobs: js, leases: ls}
}

// claimJoint is ClaimMany on joint stores. Round by round, each round
// holding at most one claim per job in the order asked, it sets the Redis
// hints, then starts the jobs whose hints it set with their leases in the
// start's transaction. The job store alone decides: a claim it refuses
// writes nothing, and the hint it set is released. A claim of a job an
// earlier round started is refused without a round trip, as it would be
// after that claim.
func (m *Manager) claimJoint(ctx context.Context, reqs []ClaimRequest, todo []int, out []ClaimResult) {
	started := make(map[[2]string]bool)
	for _, round := range groupcommit.Rounds(todo, func(i int) [2]string { return [2]string{reqs[i].RunID, reqs[i].JobID} }) {
		var claims []*Lease
		var idx []int // into reqs, of claims
		for _, i := range round {
			a := reqs[i].Attempt
			if started[[2]string{a.RunID, a.JobID}] {
				out[i].Err = fmt.Errorf("lease: %s is claimed by another request of the same batch: %w", a, ErrNotClaimed)
				continue
			}
			claims = append(claims, &Lease{Attempt: a, Token: m.newToken(), Runner: reqs[i].Runner, Expires: m.expiry()})
			idx = append(idx, i)
		}
		inRedis := m.acquireRedis(ctx, claims)
		var starts []*dag.JobEvent
		var startN []int // into claims, of starts
		byEvent := make(map[*dag.JobEvent]*Lease, len(claims))
		for n, l := range claims {
			if inRedis[n] == redisHeld {
				out[idx[n]].Err = fmt.Errorf("lease: %s is held by another runner: %w", l.Attempt, ErrNotClaimed)
				continue
			}
			e := &dag.JobEvent{Kind: dag.EventStart, RunID: l.RunID, JobID: l.JobID, Attempt: l.Attempt.Attempt, Runner: l.Runner}
			starts, startN = append(starts, e), append(startN, n)
			byEvent[e] = l
		}
		if len(starts) == 0 {
			continue
		}
		res, err := m.joint.jobs.JobApplyWith(ctx, starts, func(b *pgx.Batch, applied []*dag.JobEvent) {
			ls := make([]*Lease, len(applied))
			for x, e := range applied {
				ls[x] = byEvent[e]
			}
			m.joint.leases.queueStarts(b, ls)
			// The runner's first Renew makes the claim durable before
			// the job starts (see the package's documentation).
			b.Queue(sqlAsyncCommit)
		})
		var undo []*Lease
		for x, n := range startN {
			i, l := idx[n], claims[n]
			switch {
			case err != nil:
				// The transaction may have committed: the hint stays,
				// to expire with a lease nobody renews.
				out[i].Err = err
			case res[x].Err != nil:
				out[i].Err = res[x].Err
				if !errors.Is(res[x].Err, cikit.ErrNotFound) {
					out[i].Err = fmt.Errorf("lease: cannot claim %s: %w: %w", l.Attempt, ErrNotClaimed, res[x].Err)
				}
				if inRedis[n] == redisSet {
					undo = append(undo, l)
				}
			default:
				out[i].Lease = l
				started[[2]string{l.RunID, l.JobID}] = true
			}
		}
		m.releaseRedisMany(ctx, undo)
	}
}

// completeJoint is the end of CompleteMany on joint stores, for the
// completions evs of the leases ls: the jobs complete and the leases are
// deleted in one transaction, while the Redis hints are released. With
// verify (the leases were not read), the transaction fails with
// errNotHeld unless each completion held its lease. A hint released for
// a completion that does not complete belonged to an attempt that no
// longer runs, or is only missed: the Store still holds the lease.
func (m *Manager) completeJoint(ctx context.Context, evs []*dag.JobEvent, ls []*Lease, verify bool) ([]*dag.JobEventResult, error) {
	byEvent := make(map[*dag.JobEvent]*Lease, len(evs))
	for x, e := range evs {
		byEvent[e] = ls[x]
	}
	var wg sync.WaitGroup
	if m.rdb != nil {
		wg.Go(func() { m.releaseRedisMany(context.WithoutCancel(ctx), ls) })
	}
	defer wg.Wait()
	return m.joint.jobs.JobApplyWith(ctx, evs, func(b *pgx.Batch, applied []*dag.JobEvent) {
		ended := make([]*Lease, len(applied))
		for x, e := range applied {
			ended[x] = byEvent[e]
		}
		m.joint.leases.queueEnds(b, ended, verify)
	})
}

// notHeld reports whether err is a completion transaction of completeJoint
// failing because a completion did not hold its lease.
func notHeld(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == errNotHeld
}
