package platform

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
)

// revokeTimeout bounds the revocation of one forge credential.
const revokeTimeout = 10 * time.Second

// revokeSweepInterval is how often the revoker checks that the attempts
// of the credentials it holds are still running: the safety net for an
// attempt whose end this server did not see (its events went to another
// server of the group, or came while it was down).
const revokeSweepInterval = time.Minute

// attemptKey names one attempt of a job.
type attemptKey struct {
	run, job string
	attempt  int
}

// mintedSource is a forge credential handed to an attempt: the job token
// of the attempt, which tells whether it still runs, and how the
// credential is revoked.
type mintedSource struct {
	src    *cikit.CheckoutSource
	repo   string
	job    fleet.JobRef
	revoke func(context.Context, *cikit.CheckoutSource) error
}

// sourceRevoker revokes the forge credentials this server minted (a
// GitHub installation token, a GitLab deploy token) when their attempts
// end, so that a credential works while its job runs and not after. It
// runs apart from the completion of the attempt, which never waits for a
// forge: the end of an attempt (a pipeline event) marks its credential
// due, and the revoker's loop revokes it. The platform's own git server
// needs no revocation: the job token stops working with its attempt.
type sourceRevoker struct {
	mu   sync.Mutex
	live map[attemptKey]*mintedSource
	due  []*mintedSource
	wake chan struct{}

	// stillRuns reports whether the attempt of a credential still runs
	// (fleet.Server.AuthorizeFetch): false once it has ended.
	stillRuns func(ctx context.Context, m *mintedSource) (bool, error)
	now       func() time.Time
	onError   func(m *mintedSource, err error)
}

func newSourceRevoker(stillRuns func(context.Context, *mintedSource) (bool, error), now func() time.Time, onError func(*mintedSource, error)) *sourceRevoker {
	return &sourceRevoker{live: map[attemptKey]*mintedSource{}, wake: make(chan struct{}, 1), stillRuns: stillRuns, now: now, onError: onError}
}

// add remembers the credential minted for attempt m.job.
func (r *sourceRevoker) add(m *mintedSource) {
	k := attemptKey{m.job.RunID, m.job.JobID, m.job.Attempt}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.live[k]; old != nil {
		r.due = append(r.due, old) // a second claim of one attempt: the first credential is done
		r.signal()
	}
	r.live[k] = m
}

// observe marks due the credentials of the attempts ev says have ended:
// the attempt of a completed job, and the attempts before ev's of a job
// that was retried.
func (r *sourceRevoker) observe(ev *dag.OutboxEvent) {
	if ev.JobID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	marked := false
	for k, m := range r.live {
		if k.run != ev.RunID || k.job != ev.JobID {
			continue
		}
		if k.attempt < ev.Attempt || (k.attempt == ev.Attempt && ev.Type == dag.EventJobCompleted) {
			delete(r.live, k)
			r.due = append(r.due, m)
			marked = true
		}
	}
	if marked {
		r.signal()
	}
}

// signal wakes the loop; r.mu is held.
func (r *sourceRevoker) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run revokes the credentials that are due as they become so, and every
// revokeSweepInterval those whose attempts have ended unseen, until ctx
// ends; then it revokes what is due once more, within revokeTimeout.
func (r *sourceRevoker) Run(ctx context.Context) error {
	t := time.NewTicker(revokeSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// What ended before the shutdown is revoked, within one
			// revokeTimeout for all.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
			r.revokeDue(sctx)
			cancel()
			return nil
		case <-r.wake:
			r.revokeDue(ctx)
		case <-t.C:
			r.sweep(ctx)
			r.revokeDue(ctx)
		}
	}
}

// revokeDue revokes the credentials that are due, one after the other.
func (r *sourceRevoker) revokeDue(ctx context.Context) {
	r.mu.Lock()
	due := r.due
	r.due = nil
	r.mu.Unlock()
	for _, m := range due {
		rctx, cancel := context.WithTimeout(ctx, revokeTimeout)
		err := m.revoke(rctx, m.src)
		cancel()
		if err != nil {
			r.onError(m, err)
		}
	}
}

// sweep marks due the credentials whose attempts have ended, and forgets
// those that expired on their own.
func (r *sourceRevoker) sweep(ctx context.Context) {
	r.mu.Lock()
	live := make(map[attemptKey]*mintedSource, len(r.live))
	for k, m := range r.live {
		live[k] = m
	}
	r.mu.Unlock()
	now := r.now()
	for k, m := range live {
		expired := !m.src.ExpiresAt.IsZero() && !now.Before(m.src.ExpiresAt)
		if !expired {
			// An error is the lease store failing: ask again next time.
			if running, err := r.stillRuns(ctx, m); err != nil || running {
				continue
			}
		}
		r.mu.Lock()
		if r.live[k] == m {
			delete(r.live, k)
			if !expired {
				r.due = append(r.due, m)
			}
		}
		r.mu.Unlock()
	}
}

// attemptRuns reports, with the attempt's job token, whether the attempt
// of m still runs.
func (p *Platform) attemptRuns(ctx context.Context, m *mintedSource) (bool, error) {
	_, err := p.fleet.AuthorizeFetch(ctx, m.job.Token, m.repo)
	switch {
	case errors.Is(err, fleet.ErrFetchRefused):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
