package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults of KeeperConfig.
const (
	// DefaultKeeperSweepInterval is how often Run sweeps.
	DefaultKeeperSweepInterval = 30 * time.Second
	// DefaultKeeperRenewBefore is RenewBefore when neither it nor TTL
	// is set.
	DefaultKeeperRenewBefore = 5 * time.Minute
)

const (
	// keeperSweepBatch is how many due leases a sweep reads at a time.
	keeperSweepBatch = 100
	// keeperProviderFailures is how many revocations of one provider a
	// sweep tries after they fail: the rest of that provider's due
	// leases wait for the next sweep, and the other providers' are not
	// held up behind a provider that is down.
	keeperProviderFailures = 3
)

// keeperRevokeNow is the expiry End gives a lease it failed to revoke:
// long past, so that the next sweep finds it first.
var keeperRevokeNow = time.Unix(0, 0).UTC()

// KeeperConfig configures a Keeper.
type KeeperConfig struct {
	// Leases records the leases held; required. Several processes may
	// keep leases in one PostgresLeaseStore: whichever sweeps first
	// revokes an abandoned lease.
	Leases LeaseStore
	// Providers are the dynamic providers whose leases the Keeper
	// renews and revokes, by Name; at least one.
	Providers []Dynamic
	// RenewBefore: Renew renews a lease expiring within RenewBefore.
	// Default: a third of TTL when TTL is set, else
	// DefaultKeeperRenewBefore. Heartbeats must come more often than
	// RenewBefore, or leases expire and are revoked while their job runs.
	RenewBefore time.Duration
	// TTL is what a renewal asks for; zero: each provider's default.
	TTL time.Duration
	// SweepInterval is how often Run sweeps; default
	// DefaultKeeperSweepInterval.
	SweepInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives what fails in the background (a revocation, a
	// lease a provider lost); default: discarded. It is given owners,
	// providers and lease IDs, never secret values.
	Logger *slog.Logger
}

// Keeper keeps the leases of the dynamic secrets given to job attempts:
// it records them (Hold), renews them while their attempt heartbeats
// (Renew), revokes them when the attempt ends (End), and revokes those
// whose attempt stopped renewing without ending — its runner was killed
// and reaped — once they expire (Sweep, Run).
//
// # Guarantees
//
//   - A lease is removed from the LeaseStore only after its provider's
//     Revoke returned nil: a revocation that fails is retried by every
//     sweep until it succeeds. One that fails in End is due at once.
//   - A lease is revoked only when its owner ended (End) or it expired
//     (Sweep). A lease past its expiry is never renewed: the sweeper
//     revokes it, also if its owner still heartbeats.
//   - Revocations are idempotent (Dynamic.Revoke): End and Sweep may
//     race on one lease, in one process or several. In one process,
//     concurrent revocations of a lease share one call.
//
// A Keeper is safe for concurrent use.
type Keeper struct {
	cfg         KeeperConfig
	providers   map[string]Dynamic
	renewBefore time.Duration
	revoking    singleflight.Group
}

// NewKeeper returns a Keeper configured by cfg.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	if cfg.Leases == nil {
		return nil, fmt.Errorf("%w: KeeperConfig.Leases is nil: give a LeaseStore (NewPostgresLeaseStore)", ErrInvalid)
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("%w: KeeperConfig.Providers is empty: give the dynamic providers whose leases it keeps", ErrInvalid)
	}
	providers := make(map[string]Dynamic, len(cfg.Providers))
	for i, p := range cfg.Providers {
		if p == nil {
			return nil, fmt.Errorf("%w: KeeperConfig.Providers[%d] is nil", ErrInvalid, i)
		}
		if _, dup := providers[p.Name()]; dup {
			return nil, fmt.Errorf("%w: KeeperConfig.Providers holds two providers named %q", ErrInvalid, p.Name())
		}
		providers[p.Name()] = p
	}
	switch {
	case cfg.RenewBefore < 0:
		return nil, fmt.Errorf("%w: KeeperConfig.RenewBefore (%v) is negative", ErrInvalid, cfg.RenewBefore)
	case cfg.TTL < 0:
		return nil, fmt.Errorf("%w: KeeperConfig.TTL (%v) is negative", ErrInvalid, cfg.TTL)
	case cfg.SweepInterval < 0:
		return nil, fmt.Errorf("%w: KeeperConfig.SweepInterval (%v) is negative", ErrInvalid, cfg.SweepInterval)
	case cfg.TTL > 0 && cfg.RenewBefore >= cfg.TTL:
		return nil, fmt.Errorf("%w: KeeperConfig.RenewBefore (%v) must be shorter than TTL (%v), or every heartbeat renews every lease", ErrInvalid, cfg.RenewBefore, cfg.TTL)
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultKeeperSweepInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	k := &Keeper{cfg: cfg, providers: providers, renewBefore: cfg.RenewBefore}
	if k.renewBefore == 0 {
		k.renewBefore = DefaultKeeperRenewBefore
		if cfg.TTL > 0 {
			k.renewBefore = cfg.TTL / 3
		}
	}
	return k, nil
}

// Hold records leases as owner's, the job attempt "RUN/JOB/ATTEMPT"
// they were granted to. A lease of a provider the Keeper does not have
// is an error (ErrInvalid), which Hold returns after recording the
// others, so that End revokes them.
func (k *Keeper) Hold(ctx context.Context, owner string, leases []Lease) error {
	if owner == "" {
		return fmt.Errorf("%w: Hold needs the owner of the leases, its job attempt RUN/JOB/ATTEMPT", ErrInvalid)
	}
	known := make([]Lease, 0, len(leases))
	var errs []error
	for _, l := range leases {
		if k.providers[l.Provider] == nil {
			errs = append(errs, fmt.Errorf("%w: lease %s of %s: the keeper has no provider %q, so could not renew or revoke it", ErrInvalid, l.ID, owner, l.Provider))
			continue
		}
		known = append(known, l)
	}
	if len(known) > 0 {
		if err := k.cfg.Leases.Add(ctx, owner, known); err != nil {
			errs = append([]error{err}, errs...)
		}
	}
	return errors.Join(errs...)
}

// leasesToRenew returns the leases of ls that expire within before of
// now and have not expired yet.
func leasesToRenew(ls []Lease, now time.Time, before time.Duration) []Lease {
	var out []Lease
	for _, l := range ls {
		if !l.Expires.Before(now) && l.Expires.Sub(now) <= before {
			out = append(out, l)
		}
	}
	return out
}

// Renew renews owner's leases that expire within RenewBefore, asking for
// TTL. The platform calls it at each heartbeat of the attempt. A lease
// its provider lost (ErrNotFound) is forgotten and logged; a renewal
// that fails is returned, and retried at the next heartbeat.
func (k *Keeper) Renew(ctx context.Context, owner string) error {
	owned, err := k.cfg.Leases.Owned(ctx, owner)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range leasesToRenew(owned, k.cfg.Now(), k.renewBefore) {
		p := k.providers[l.Provider]
		if p == nil {
			errs = append(errs, fmt.Errorf("secrets: renew lease %s of %s: the keeper has no provider %q", l.ID, owner, l.Provider))
			continue
		}
		expires, err := p.Renew(ctx, l.ID, k.cfg.TTL)
		switch {
		case errors.Is(err, ErrNotFound):
			k.cfg.Logger.WarnContext(ctx, "secrets: the provider lost a lease; it is forgotten",
				"owner", owner, "provider", l.Provider, "lease", l.ID, "err", err)
			if err := k.cfg.Leases.Remove(ctx, owner, l.ID); err != nil {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("secrets: renew lease %s/%s of %s: %w", l.Provider, l.ID, owner, err))
		default:
			// ErrNotFound: End or Sweep removed it meanwhile.
			if err := k.cfg.Leases.SetExpires(ctx, owner, l.ID, expires); err != nil && !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// End revokes all of owner's leases and forgets them: the platform calls
// it when the attempt ends, however it ends (completed, failed,
// canceled, reaped). Ending an owner without leases, or twice, does
// nothing. A lease whose revocation fails is kept, due at once, for the
// sweeper to retry, and End returns the error.
func (k *Keeper) End(ctx context.Context, owner string) error {
	owned, err := k.cfg.Leases.Owned(ctx, owner)
	if err != nil {
		return err
	}
	var done []string
	var errs []error
	for _, l := range owned {
		if err := k.revoke(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("secrets: revoke lease %s/%s of %s: %w", l.Provider, l.ID, owner, err))
			k.cfg.Logger.WarnContext(ctx, "secrets: a lease's revocation failed; the sweeper retries it",
				"owner", owner, "provider", l.Provider, "lease", l.ID, "err", err)
			if err := k.cfg.Leases.SetExpires(ctx, owner, l.ID, keeperRevokeNow); err != nil && !errors.Is(err, ErrNotFound) {
				// It is swept at its own expiry.
				errs = append(errs, err)
			}
			continue
		}
		done = append(done, l.ID)
	}
	if len(done) > 0 {
		if err := k.cfg.Leases.Remove(ctx, owner, done...); err != nil {
			// Revoked all the same; a sweep revokes them again, harmlessly.
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// revoke revokes l through its provider; concurrent calls for one lease
// share the first one's.
func (k *Keeper) revoke(ctx context.Context, l Lease) error {
	p := k.providers[l.Provider]
	if p == nil {
		return fmt.Errorf("the keeper has no provider %q", l.Provider)
	}
	_, err, _ := k.revoking.Do(l.Provider+"\x00"+l.ID, func() (any, error) {
		return nil, p.Revoke(ctx, l.ID)
	})
	return err
}

// Sweep revokes, and forgets, every lease that expired before now — its
// owner stopped renewing it: its runner was killed — and those End
// failed to revoke. It returns how many it revoked; the error reports
// those it did not, which stay for the next sweep.
func (k *Keeper) Sweep(ctx context.Context) (revoked int, err error) {
	now := k.cfg.Now()
	failed := make(map[[2]string]bool)
	failures := make(map[string]int) // by provider
	var first error
	for {
		limit := keeperSweepBatch + len(failed)
		due, err := k.cfg.Leases.Due(ctx, now, limit)
		if err != nil {
			return revoked, errors.Join(err, sweepError(len(failed), first))
		}
		for _, d := range due {
			key := [2]string{d.Lease.Provider, d.Lease.ID}
			if failed[key] {
				continue
			}
			if failures[d.Lease.Provider] >= keeperProviderFailures {
				failed[key] = true
				continue
			}
			if err := k.revoke(ctx, d.Lease); err != nil {
				failed[key] = true
				failures[d.Lease.Provider]++
				err = fmt.Errorf("revoke lease %s/%s of %s: %w", d.Lease.Provider, d.Lease.ID, d.Owner, err)
				if first == nil {
					first = err
				}
				k.cfg.Logger.WarnContext(ctx, "secrets: sweep: a lease's revocation failed; the next sweep retries it",
					"owner", d.Owner, "provider", d.Lease.Provider, "lease", d.Lease.ID, "err", err)
				continue
			}
			if err := k.cfg.Leases.Remove(ctx, d.Owner, d.Lease.ID); err != nil {
				return revoked, errors.Join(err, sweepError(len(failed), first))
			}
			revoked++
		}
		if len(due) < limit || ctx.Err() != nil {
			break
		}
	}
	return revoked, sweepError(len(failed), first)
}

func sweepError(failed int, first error) error {
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("secrets: sweep: %d due leases not revoked; the first: %w", failed, first)
}

// Run sweeps at once and then every SweepInterval, until ctx is done;
// it returns context.Cause(ctx). Sweep failures are logged and retried.
func (k *Keeper) Run(ctx context.Context) error {
	t := time.NewTicker(k.cfg.SweepInterval)
	defer t.Stop()
	for {
		n, err := k.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			k.cfg.Logger.ErrorContext(ctx, "secrets: sweep failed", "revoked", n, "err", err)
		} else if n > 0 {
			k.cfg.Logger.InfoContext(ctx, "secrets: sweep revoked expired leases", "revoked", n)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
