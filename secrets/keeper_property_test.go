package secrets_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cikit/cikit/secrets"
)

// keeperModel drives a Keeper over the memory store and a fakeDynamic
// with random holds, heartbeats, ends, sweeps, clock moves and failing
// revocations, and checks it against what it must guarantee:
//
//   - SAFETY: no lease is revoked while its owner is live and the lease
//     unexpired; the keeper never forgets a lease it did not revoke.
//   - After an End that returned nil, none of its owner's leases is
//     unrevoked; after a Sweep at t that returned nil, no lease of an
//     ended owner, nor any lease expired before t, is.
//   - LIVENESS: once revocations stop failing, End and Sweep revoke
//     every lease.
type keeperModel struct {
	b          *fakeKeeper
	owners     []string
	ended      map[string]bool
	leaseOwner map[string]string
	ids        []string
	violations []string
}

func newKeeperModel(t *testing.T) *keeperModel {
	m := &keeperModel{b: newFakeKeeper(t), ended: map[string]bool{}, leaseOwner: map[string]string{}}
	for i := range 3 {
		m.owners = append(m.owners, fmt.Sprintf("run1/job%d/1", i))
	}
	m.b.p.onRevoke = func(id string) {
		owner := m.leaseOwner[id]
		if exp := m.expiry(id); !m.ended[owner] && !exp.Before(m.b.clock.Now()) {
			m.violations = append(m.violations, fmt.Sprintf("lease %s of live %s revoked at %v, expiring %v", id, owner, m.b.clock.Now(), exp))
		}
	}
	return m
}

func (m *keeperModel) expiry(id string) time.Time {
	m.b.p.mu.Lock()
	defer m.b.p.mu.Unlock()
	return m.b.p.leases[id].expires
}

func (m *keeperModel) owner(t *rapid.T) string { return rapid.SampledFrom(m.owners).Draw(t, "owner") }

func (m *keeperModel) unrevoked(pred func(id, owner string) bool) []string {
	var out []string
	for _, id := range m.ids {
		if owner := m.leaseOwner[id]; !m.b.p.revoked(id) && pred(id, owner) {
			out = append(out, id)
		}
	}
	return out
}

func (m *keeperModel) actions(t *testing.T) map[string]func(*rapid.T) {
	ctx := t.Context()
	k := m.b.keeper
	return map[string]func(*rapid.T){
		"Hold": func(rt *rapid.T) {
			owner := m.owner(rt)
			if m.ended[owner] {
				rt.Skip("the attempt ended")
			}
			var leases []secrets.Lease
			for range rapid.IntRange(1, 3).Draw(rt, "leases") {
				ttl := time.Duration(rapid.IntRange(1, 20).Draw(rt, "ttl minutes")) * time.Minute
				l := m.b.p.grant(ttl)
				m.leaseOwner[l.ID] = owner
				m.ids = append(m.ids, l.ID)
				leases = append(leases, l)
			}
			if err := k.Hold(ctx, owner, leases); err != nil {
				rt.Fatalf("Hold: %v", err)
			}
		},
		"Renew": func(rt *rapid.T) {
			owner := m.owner(rt)
			if m.ended[owner] {
				rt.Skip("the attempt ended")
			}
			if err := k.Renew(ctx, owner); err != nil {
				rt.Fatalf("Renew: %v", err)
			}
		},
		"End": func(rt *rapid.T) {
			owner := m.owner(rt)
			m.ended[owner] = true
			err := k.End(ctx, owner)
			if err != nil {
				if !errors.Is(err, errFakeDown) {
					rt.Fatalf("End: %v", err)
				}
				return
			}
			if left := m.unrevoked(func(_, o string) bool { return o == owner }); len(left) > 0 {
				rt.Fatalf("End(%s) returned nil, leaving %v unrevoked", owner, left)
			}
		},
		"Advance": func(rt *rapid.T) {
			m.b.clock.Advance(time.Duration(rapid.IntRange(0, 900).Draw(rt, "seconds")) * time.Second)
		},
		"FailRevokes": func(rt *rapid.T) {
			m.b.p.mu.Lock()
			m.b.p.failRevokes = rapid.IntRange(1, 3).Draw(rt, "failures")
			m.b.p.mu.Unlock()
		},
		"Sweep": func(rt *rapid.T) {
			now := m.b.clock.Now()
			_, err := k.Sweep(ctx)
			if err != nil {
				if !errors.Is(err, errFakeDown) {
					rt.Fatalf("Sweep: %v", err)
				}
				return
			}
			if left := m.unrevoked(func(id, o string) bool { return m.ended[o] || m.expiry(id).Before(now) }); len(left) > 0 {
				rt.Fatalf("Sweep at %v returned nil, leaving %v unrevoked", now, left)
			}
		},
		"": func(rt *rapid.T) {
			if len(m.violations) > 0 {
				rt.Fatalf("SAFETY: %v", m.violations)
			}
			for _, id := range m.unrevoked(func(string, string) bool { return true }) {
				owned, err := m.b.store.Owned(ctx, m.leaseOwner[id])
				if err != nil {
					rt.Fatal(err)
				}
				if !slices.ContainsFunc(owned, func(l secrets.Lease) bool { return l.ID == id }) {
					rt.Fatalf("SAFETY: lease %s is not revoked, and the keeper forgot it", id)
				}
			}
		},
	}
}

func TestKeeperProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		m := newKeeperModel(t)
		rt.Repeat(m.actions(t))

		// LIVENESS: with revocations working again, ending every
		// attempt and sweeping revokes everything, and the store is empty.
		m.b.p.mu.Lock()
		m.b.p.failRevokes = 0
		m.b.p.mu.Unlock()
		for _, o := range m.owners {
			m.ended[o] = true
			if err := m.b.keeper.End(t.Context(), o); err != nil {
				rt.Fatalf("End(%s) with working revocations: %v", o, err)
			}
		}
		if _, err := m.b.keeper.Sweep(t.Context()); err != nil {
			rt.Fatalf("Sweep: %v", err)
		}
		if left := m.unrevoked(func(string, string) bool { return true }); len(left) > 0 {
			rt.Fatalf("LIVENESS: %v never revoked", left)
		}
		due, err := m.b.store.Due(t.Context(), m.b.clock.Now().Add(24*time.Hour), 1000)
		if err != nil || len(due) > 0 {
			rt.Fatalf("the store still holds %v (%v)", due, err)
		}
		if len(m.violations) > 0 {
			rt.Fatalf("SAFETY: %v", m.violations)
		}
	})
}
