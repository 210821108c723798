package secrets_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/secrets"
)

// fakeDynamic is a Dynamic whose leases are entries of a map, counting
// the calls it gets and failing revocations on demand.
type fakeDynamic struct {
	name string
	now  func() time.Time
	ttl  time.Duration

	mu          sync.Mutex
	leases      map[string]*fakeLease
	next        int
	renews      map[string]int
	revokes     map[string]int
	failRevokes int  // fail this many revocations next
	down        bool // fail every revocation
	onRevoke    func(id string)
}

type fakeLease struct {
	expires time.Time
	revoked bool
}

var errFakeDown = errors.New("fake provider: down")

func newFakeDynamic(name string, now func() time.Time) *fakeDynamic {
	return &fakeDynamic{name: name, now: now, ttl: 10 * time.Minute,
		leases: map[string]*fakeLease{}, renews: map[string]int{}, revokes: map[string]int{}}
}

func (f *fakeDynamic) Name() string { return f.name }

func (f *fakeDynamic) Fetch(ctx context.Context, r secrets.Request) ([]secrets.Secret, error) {
	var out []secrets.Secret
	for _, n := range r.Names {
		l := f.grant(r.TTL)
		out = append(out, secrets.Secret{Name: n, Value: "value-" + l.ID, Lease: &l})
	}
	return out, nil
}

// grant makes a lease lasting ttl (zero: the provider's TTL).
func (f *fakeDynamic) grant(ttl time.Duration) secrets.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("%s-%d", f.name, f.next)
	exp := f.now().Add(cmpDur(ttl, f.ttl))
	f.leases[id] = &fakeLease{expires: exp}
	return secrets.Lease{ID: id, Provider: f.name, Expires: exp}
}

func (f *fakeDynamic) grantN(n int) []secrets.Lease {
	var out []secrets.Lease
	for range n {
		out = append(out, f.grant(0))
	}
	return out
}

func cmpDur(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

func (f *fakeDynamic) Renew(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews[id]++
	l := f.leases[id]
	if l == nil || l.revoked {
		return time.Time{}, fmt.Errorf("fake lease %s: %w", id, secrets.ErrNotFound)
	}
	l.expires = f.now().Add(cmpDur(ttl, f.ttl))
	return l.expires, nil
}

func (f *fakeDynamic) Revoke(ctx context.Context, id string) error {
	f.mu.Lock()
	if f.down || f.failRevokes > 0 {
		if f.failRevokes > 0 {
			f.failRevokes--
		}
		f.revokes[id]++
		f.mu.Unlock()
		return errFakeDown
	}
	f.revokes[id]++
	if l := f.leases[id]; l != nil {
		l.revoked = true
	}
	hook := f.onRevoke
	f.mu.Unlock()
	if hook != nil {
		hook(id)
	}
	return nil
}

func (f *fakeDynamic) revoked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.leases[id]
	return l != nil && l.revoked
}

func (f *fakeDynamic) counts(id string) (renews, revokes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renews[id], f.revokes[id]
}

// forget makes the provider lose a lease, as a database restored from
// a backup would.
func (f *fakeDynamic) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases, id)
}

type fakeKeeper struct {
	clock  *clocktest.Clock
	store  *secrets.MemoryLeaseStore
	p, p2  *fakeDynamic
	keeper *secrets.Keeper
}

func newFakeKeeper(t *testing.T) *fakeKeeper {
	t.Helper()
	b := &fakeKeeper{clock: clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), store: secrets.NewMemoryLeaseStore()}
	b.p, b.p2 = newFakeDynamic("fake", b.clock.Now), newFakeDynamic("other", b.clock.Now)
	k, err := secrets.NewKeeper(secrets.KeeperConfig{
		Leases: b.store, Providers: []secrets.Dynamic{b.p, b.p2}, TTL: 10 * time.Minute, Now: b.clock.Now,
	})
	require.NoError(t, err)
	b.keeper = k
	return b
}

func (b *fakeKeeper) owned(t *testing.T, owner string) []secrets.Lease {
	t.Helper()
	ls, err := b.store.Owned(t.Context(), owner)
	require.NoError(t, err)
	return ls
}

// pgKeeper is a Keeper over PostgresRoles and a PostgresLeaseStore.
type pgKeeper struct {
	*dynBundle
	store  *secrets.PostgresLeaseStore
	keeper *secrets.Keeper
}

// newPGKeeper's wrap, if given, returns the provider the keeper uses,
// given the PostgresRoles the test fetches from.
func newPGKeeper(t *testing.T, wrap func(*secrets.PostgresRoles) secrets.Dynamic) *pgKeeper {
	t.Helper()
	b := newDynBundle(t, func(c *secrets.PostgresRolesConfig) { c.DefaultTTL, c.MaxTTL = 10*time.Minute, time.Hour })
	store, err := secrets.NewPostgresLeaseStore(b.db.Pool)
	require.NoError(t, err)
	require.NoError(t, store.Migrate(t.Context()))
	var p secrets.Dynamic = b.p
	if wrap != nil {
		p = wrap(b.p)
	}
	k, err := secrets.NewKeeper(secrets.KeeperConfig{Leases: store, Providers: []secrets.Dynamic{p}, TTL: 10 * time.Minute, Now: b.clock.Now})
	require.NoError(t, err)
	return &pgKeeper{dynBundle: b, store: store, keeper: k}
}

func (b *pgKeeper) grant(t *testing.T, owner string, n int) []secrets.Secret {
	t.Helper()
	var out []secrets.Secret
	var leases []secrets.Lease
	for range n {
		s := b.fetch(t, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}})[0]
		out = append(out, s)
		leases = append(leases, *s.Lease)
	}
	require.NoError(t, b.keeper.Hold(t.Context(), owner, leases))
	return out
}

func (b *pgKeeper) roleExists(t *testing.T, role string) bool {
	t.Helper()
	_, ok := b.validUntil(t, role)
	return ok
}

func TestKeeperHoldRenewEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newPGKeeper(t, nil)
	const owner = "run1/build/1"
	granted := b.grant(t, owner, 2)
	created := b.clock.Now()

	// Not yet within RenewBefore (a third of the TTL): nothing changes.
	b.clock.Advance(time.Minute)
	require.NoError(t, b.keeper.Renew(ctx, owner))
	for _, s := range granted {
		until, _ := b.validUntil(t, s.Lease.ID)
		require.Equal(t, created.Add(10*time.Minute).UTC(), until)
	}

	b.clock.Advance(6*time.Minute + 40*time.Second) // 3m20s before expiry
	require.NoError(t, b.keeper.Renew(ctx, owner))
	want := b.clock.Now().Add(10 * time.Minute).UTC()
	owned, err := b.store.Owned(ctx, owner)
	require.NoError(t, err)
	require.Len(t, owned, 2)
	for _, l := range owned {
		require.Equal(t, want, l.Expires, "the store has the renewed expiry")
		until, _ := b.validUntil(t, l.ID)
		require.Equal(t, want, until, "and so has the role")
	}

	conn, err := pgx.Connect(ctx, granted[0].Value)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	// Success, failure and cancellation of the attempt all end it so.
	require.NoError(t, b.keeper.End(ctx, owner))
	for _, s := range granted {
		require.False(t, b.roleExists(t, s.Lease.ID), "role %s revoked", s.Lease.ID)
		_, err := pgx.Connect(ctx, s.Value)
		require.Error(t, err)
	}
	_, err = conn.Exec(ctx, `SELECT 1`)
	require.Error(t, err, "the job's open session is ended")
	owned, err = b.store.Owned(ctx, owner)
	require.NoError(t, err)
	require.Empty(t, owned)
	require.NoError(t, b.keeper.End(ctx, owner), "ending twice")
	require.NoError(t, b.keeper.Renew(ctx, owner), "a heartbeat after the end renews nothing")
}

// TestKeeperSweepRevokesAbandoned is the runner killed with SIGKILL: its
// attempt neither heartbeats nor ends, and its leases are revoked once
// they expire. A live attempt's leases are kept.
func TestKeeperSweepRevokesAbandoned(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newPGKeeper(t, nil)
	killed := b.grant(t, "run1/killed/1", 1)[0]
	live := b.grant(t, "run1/live/1", 1)[0]

	n, err := b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing expired")

	b.clock.Advance(8 * time.Minute)
	require.NoError(t, b.keeper.Renew(ctx, "run1/live/1"))
	b.clock.Advance(2*time.Minute + time.Second)
	n, err = b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.False(t, b.roleExists(t, killed.Lease.ID), "the abandoned lease is revoked")
	require.True(t, b.roleExists(t, live.Lease.ID), "the renewed lease is kept")
	owned, err := b.store.Owned(ctx, "run1/killed/1")
	require.NoError(t, err)
	require.Empty(t, owned)

	n, err = b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, b.keeper.End(ctx, "run1/live/1"))
	require.False(t, b.roleExists(t, live.Lease.ID))
}

func TestKeeperRevokeFailureRetried(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newFakeKeeper(t)
	leases := b.p.grantN(2)
	require.NoError(t, b.keeper.Hold(ctx, "r/j/1", leases))

	b.p.failRevokes = 1
	err := b.keeper.End(ctx, "r/j/1")
	require.ErrorIs(t, err, errFakeDown)
	require.ErrorContains(t, err, leases[0].ID)
	require.False(t, b.p.revoked(leases[0].ID))
	require.True(t, b.p.revoked(leases[1].ID))
	kept := b.owned(t, "r/j/1")
	require.Len(t, kept, 1, "the lease not revoked is kept")
	require.Equal(t, leases[0].ID, kept[0].ID)
	require.True(t, kept[0].Expires.Before(b.clock.Now()), "and due at once")

	require.NoError(t, b.keeper.Renew(ctx, "r/j/1"))
	renews, _ := b.p.counts(leases[0].ID)
	require.Zero(t, renews, "a lease End failed to revoke is not renewed")

	n, err := b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the sweeper retries it without waiting for its expiry")
	require.True(t, b.p.revoked(leases[0].ID))
	require.Empty(t, b.owned(t, "r/j/1"))
	require.NoError(t, b.keeper.End(ctx, "r/j/1"))
}

// TestKeeperSweepProviderDown: a provider that is down holds up neither
// the other providers' revocations nor the sweep, and its leases are
// revoked once it is back.
func TestKeeperSweepProviderDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newFakeKeeper(t)
	down := b.p.grantN(10)
	require.NoError(t, b.keeper.Hold(ctx, "r/j/1", down))
	up := b.p2.grantN(1)
	require.NoError(t, b.keeper.Hold(ctx, "r/j/1", up))
	b.p.down = true
	b.clock.Advance(11 * time.Minute)

	n, err := b.keeper.Sweep(ctx)
	require.ErrorIs(t, err, errFakeDown)
	require.ErrorContains(t, err, "10 due leases not revoked")
	require.Equal(t, 1, n)
	require.True(t, b.p2.revoked(up[0].ID))
	calls := 0
	for _, l := range down {
		_, r := b.p.counts(l.ID)
		calls += r
	}
	require.Equal(t, 3, calls, "a failing provider is tried three times a sweep")

	b.p.mu.Lock()
	b.p.down = false
	b.p.mu.Unlock()
	n, err = b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	for _, l := range down {
		require.True(t, b.p.revoked(l.ID))
	}
	require.Empty(t, b.owned(t, "r/j/1"))
}

func TestKeeperSweepManyDue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newFakeKeeper(t)
	for i := range 25 {
		require.NoError(t, b.keeper.Hold(ctx, fmt.Sprintf("r/j/%d", i), b.p.grantN(10)))
	}
	b.p.failRevokes = 2
	b.clock.Advance(time.Hour)
	n, err := b.keeper.Sweep(ctx)
	require.ErrorIs(t, err, errFakeDown)
	require.Equal(t, 248, n, "more than a batch, past the failures")
	n, err = b.keeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestKeeperRenewForgetsLostLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newFakeKeeper(t)
	leases := b.p.grantN(2)
	require.NoError(t, b.keeper.Hold(ctx, "r/j/1", leases))
	b.p.forget(leases[0].ID)
	b.clock.Advance(8 * time.Minute)
	require.NoError(t, b.keeper.Renew(ctx, "r/j/1"))
	owned := b.owned(t, "r/j/1")
	require.Len(t, owned, 1, "the lost lease is forgotten")
	require.Equal(t, leases[1].ID, owned[0].ID)
	require.Equal(t, b.clock.Now().Add(10*time.Minute), owned[0].Expires)

	// Past its expiry a lease is the sweeper's, not renewed.
	b.clock.Advance(11 * time.Minute)
	require.NoError(t, b.keeper.Renew(ctx, "r/j/1"))
	renews, _ := b.p.counts(leases[1].ID)
	require.Equal(t, 1, renews)
}

func TestKeeperHoldUnknownProvider(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newFakeKeeper(t)
	known := b.p.grant(0)
	err := b.keeper.Hold(ctx, "r/j/1", []secrets.Lease{known, {ID: "x", Provider: "vault", Expires: b.clock.Now()}})
	require.ErrorIs(t, err, secrets.ErrInvalid)
	require.ErrorContains(t, err, `"vault"`)
	owned := b.owned(t, "r/j/1")
	require.Len(t, owned, 1, "the known lease is held, for End to revoke")
	require.ErrorIs(t, b.keeper.Hold(ctx, "", []secrets.Lease{known}), secrets.ErrInvalid)
	require.NoError(t, b.keeper.Hold(ctx, "r/j/2", nil))
}

func TestKeeperConfig(t *testing.T) {
	t.Parallel()
	store := secrets.NewMemoryLeaseStore()
	p := newFakeDynamic("fake", time.Now)
	for name, cfg := range map[string]secrets.KeeperConfig{
		"no store":            {Providers: []secrets.Dynamic{p}},
		"no providers":        {Leases: store},
		"nil provider":        {Leases: store, Providers: []secrets.Dynamic{nil}},
		"two of a name":       {Leases: store, Providers: []secrets.Dynamic{p, newFakeDynamic("fake", time.Now)}},
		"negative TTL":        {Leases: store, Providers: []secrets.Dynamic{p}, TTL: -time.Second},
		"negative interval":   {Leases: store, Providers: []secrets.Dynamic{p}, SweepInterval: -time.Second},
		"renew before ≥ TTL":  {Leases: store, Providers: []secrets.Dynamic{p}, TTL: time.Minute, RenewBefore: time.Minute},
		"negative renew time": {Leases: store, Providers: []secrets.Dynamic{p}, RenewBefore: -time.Minute},
	} {
		_, err := secrets.NewKeeper(cfg)
		require.ErrorIs(t, err, secrets.ErrInvalid, name)
	}
	_, err := secrets.NewKeeper(secrets.KeeperConfig{Leases: store, Providers: []secrets.Dynamic{p}})
	require.NoError(t, err)
}

// countingDynamic counts the revocations reaching a provider.
type countingDynamic struct {
	secrets.Dynamic
	mu      sync.Mutex
	revokes map[string]int
}

func (c *countingDynamic) Revoke(ctx context.Context, id string) error {
	c.mu.Lock()
	c.revokes[id]++
	c.mu.Unlock()
	return c.Dynamic.Revoke(ctx, id)
}

// TestKeeperEndSweepRace ends attempts while sweeps revoke the same,
// expired, leases: every call succeeds and every lease is revoked, at
// least once, harmlessly more.
func TestKeeperEndSweepRace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var counting *countingDynamic
	b := newPGKeeper(t, func(p *secrets.PostgresRoles) secrets.Dynamic {
		counting = &countingDynamic{Dynamic: p, revokes: map[string]int{}}
		return counting
	})
	var all []secrets.Secret
	const owners = 6
	for i := range owners {
		all = append(all, b.grant(t, fmt.Sprintf("run1/job%d/1", i), 2)...)
	}
	b.clock.Advance(11 * time.Minute)

	errs := make(chan error, owners+2)
	var wg sync.WaitGroup
	for i := range owners {
		wg.Go(func() { errs <- b.keeper.End(ctx, fmt.Sprintf("run1/job%d/1", i)) })
	}
	for range 2 {
		wg.Go(func() {
			_, err := b.keeper.Sweep(ctx)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, s := range all {
		require.False(t, b.roleExists(t, s.Lease.ID))
		counting.mu.Lock()
		n := counting.revokes[s.Lease.ID]
		counting.mu.Unlock()
		require.GreaterOrEqual(t, n, 1, s.Lease.ID)
	}
	due, err := b.store.Due(ctx, b.clock.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.Empty(t, due)
}

// TestKeeperRun is not parallel: it checks that Run leaves no goroutine
// behind.
func TestKeeperRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := newFakeKeeper(t)
	revoked := make(chan string, 1)
	b.p.onRevoke = func(id string) { revoked <- id }
	k, err := secrets.NewKeeper(secrets.KeeperConfig{
		Leases: b.store, Providers: []secrets.Dynamic{b.p}, Now: b.clock.Now, SweepInterval: time.Millisecond,
	})
	require.NoError(t, err)
	l := b.p.grant(0)
	require.NoError(t, k.Hold(t.Context(), "r/j/1", []secrets.Lease{l}))

	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	b.clock.Advance(time.Hour)
	require.Equal(t, l.ID, <-revoked, "a sweep of Run revokes the expired lease")
	stop := errors.New("platform stopping")
	cancel(stop)
	require.ErrorIs(t, <-done, stop)
}
