package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/lease"
)

// Defaults of ServerConfig's runner checks.
const (
	// DefaultRunnerCheckTTL is how long a Server trusts what it read of a
	// runner's record: a revocation on another Server over the same
	// RunnerStore is refused here within it.
	DefaultRunnerCheckTTL = 5 * time.Second
	// DefaultRunnerSeenInterval is how often at most a Server writes a
	// runner's LastSeen.
	DefaultRunnerSeenInterval = 30 * time.Second
)

// Codes of the 401 answers to a refused runner (errorBody.Code), which a
// runner acts on: a revoked runner stops; an unknown one registers again.
const (
	codeRunnerRevoked = "runner_revoked"
	codeRunnerUnknown = "runner_unknown"
)

// RunnerRefusedError is why a Server refuses a runner's calls: it was
// revoked (Record says by whom and why) or its record is gone from the
// RunnerStore (Record is nil).
type RunnerRefusedError struct {
	ID     string
	Record *RunnerRecord
}

func (e *RunnerRefusedError) Error() string {
	if r := e.Record; r != nil {
		msg := fmt.Sprintf("runner revoked by %s at %s", r.RevokedBy, r.RevokedAt.UTC().Format(time.RFC3339))
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		return msg
	}
	return "runner " + e.ID + " is not registered with this platform; register it again"
}

// code is the answer's errorBody.Code.
func (e *RunnerRefusedError) code() string {
	if e.Record != nil {
		return codeRunnerRevoked
	}
	return codeRunnerUnknown
}

// runnerChecks caches what a Server read of runners' records.
type runnerChecks struct {
	mu      sync.Mutex
	m       map[string]*runnerCheck
	pruneAt int
}

type runnerCheck struct {
	checked time.Time           // when the record was read
	written time.Time           // the LastSeen last written, or read
	refused *RunnerRefusedError // nil: the runner may call
}

// checkRunner refuses the calls of a runner that was revoked or whose
// record is gone, with a *RunnerRefusedError; any other error is the
// store failing. It reads the record at most every RunnerCheckTTL, and
// writes its LastSeen at most every RunnerSeenInterval.
func (s *Server) checkRunner(ctx context.Context, id string) error {
	now := s.cfg.Now()
	rc := &s.checks
	rc.mu.Lock()
	e := rc.m[id]
	if e != nil && (e.refused != nil && e.refused.Record != nil || now.Sub(e.checked) < s.cfg.RunnerCheckTTL) {
		refused, write := e.refused, e.refused == nil && now.Sub(e.written) >= s.cfg.RunnerSeenInterval
		if write {
			e.written = now
		}
		rc.mu.Unlock()
		if refused != nil {
			return refused
		}
		if write {
			s.writeSeen(ctx, id, now)
		}
		return nil
	}
	rc.mu.Unlock()

	rec, err := s.cfg.Runners.RunnerGet(ctx, id)
	c := &runnerCheck{checked: now}
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		c.refused = &RunnerRefusedError{ID: id}
	case err != nil:
		return err
	case rec.Revoked():
		c.refused = &RunnerRefusedError{ID: id, Record: rec}
	default:
		c.written = rec.LastSeen
		if now.Sub(rec.LastSeen) >= s.cfg.RunnerSeenInterval {
			c.written = now
			s.writeSeen(ctx, id, now)
		}
	}
	rc.mu.Lock()
	if old := rc.m[id]; old == nil || old.refused == nil || old.refused.Record == nil {
		// A revocation is never replaced by a read that began before it.
		if rc.m == nil || len(rc.m) >= rc.pruneAt {
			rc.pruneLocked(now, s.cfg.RunnerCheckTTL)
		}
		rc.m[id] = c
	} else {
		c = old
	}
	rc.mu.Unlock()
	if c.refused != nil {
		return c.refused
	}
	return nil
}

// pruneLocked forgets the checks older than ttl.
func (rc *runnerChecks) pruneLocked(now time.Time, ttl time.Duration) {
	if rc.m == nil {
		rc.m = map[string]*runnerCheck{}
	}
	for id, c := range rc.m {
		if now.Sub(c.checked) >= ttl {
			delete(rc.m, id)
		}
	}
	rc.pruneAt = max(1024, 2*len(rc.m))
}

// writeSeen writes a runner's LastSeen; a failure costs only the record's
// freshness.
func (s *Server) writeSeen(ctx context.Context, id string, now time.Time) {
	if err := s.cfg.Runners.RunnerSeen(context.WithoutCancel(ctx), id, now); err != nil && !errors.Is(err, cikit.ErrNotFound) {
		s.log.Warn("fleet: recording when a runner was last seen", "runner", id, "error", err)
	}
}

// refuseRunner answers a call of a runner checkRunner refused, or 503
// when the store failed; false when err is nil.
func (s *Server) refuseRunner(w http.ResponseWriter, id string, err error) bool {
	if err == nil {
		return false
	}
	if re, ok := errors.AsType[*RunnerRefusedError](err); ok {
		writeJSON(w, http.StatusUnauthorized, errorBody{Error: re.Error(), Code: re.code()})
		return true
	}
	s.log.Error("fleet: reading a runner's record", "runner", id, "error", err)
	writeError(w, http.StatusServiceUnavailable, "the runner store is unavailable; try again")
	return true
}

// RunnerRevoke revokes runner id for good: by (a user name) and reason
// are kept with its record. Its every call after is refused 401 "runner
// revoked" (claims, heartbeats, log writes, completions, artifact and
// secrets calls, fetches): at once on this Server, and within
// ServerConfig.RunnerCheckTTL on the others sharing its RunnerStore. The
// job it runs is not ended here: its heartbeats are refused, so its lease
// expires, and the lease reaper tries the job again as it does a lost
// runner's (reason "runner_lost"), after the grace in which the runner's
// supervisor kills it. Revoking a revoked runner returns its first
// revocation; an unknown id is cikit.ErrNotFound.
func (s *Server) RunnerRevoke(ctx context.Context, id, by, reason string) (*RunnerRecord, error) {
	switch {
	case strings.TrimSpace(by) == "" || len(by) > 256:
		return nil, fmt.Errorf("fleet: revoking runner %s: who revokes it must be named, in at most 256 bytes", id)
	case len(reason) > 1024:
		return nil, fmt.Errorf("fleet: revoking runner %s: the reason is %d bytes; at most 1024 are kept", id, len(reason))
	}
	rec, err := s.cfg.Runners.RunnerRevoke(ctx, &RunnerRevokeParams{ID: id, By: by, Reason: reason, At: s.cfg.Now().UTC()})
	if err != nil {
		return nil, err
	}
	s.checks.mu.Lock()
	if s.checks.m == nil {
		s.checks.pruneLocked(s.cfg.Now(), s.cfg.RunnerCheckTTL)
	}
	s.checks.m[id] = &runnerCheck{checked: s.cfg.Now(), refused: &RunnerRefusedError{ID: id, Record: rec}}
	s.checks.mu.Unlock()
	s.runners.drop(id)
	s.log.Warn("fleet: runner revoked", "runner", id, "by", rec.RevokedBy, "reason", rec.Reason)
	return rec, nil
}

// RunnerRevoked is the state of a revoked runner in RunnerList.
const RunnerRevoked RunnerState = "revoked"

// RunnerStatus is a runner's record merged with what this Server saw of
// it (RunnerInfo).
type RunnerStatus struct {
	RunnerRecord
	// State is RunnerRevoked for a revoked runner; otherwise what this
	// Server saw, RunnerAway for a runner it has not seen lately.
	State RunnerState
	// Job is the attempt a busy runner runs; Jobs counts those it was
	// handed by this Server.
	Job  *lease.Attempt
	Jobs int
}

// RunnerList returns the registered runners, revoked ones included, by
// ID, at most MaxRunnerList of them, each with what this Server saw of
// it: its state, its job and its latest call (LastSeen is the later of
// the stored one and that).
func (s *Server) RunnerList(ctx context.Context) ([]RunnerStatus, error) {
	recs, err := s.cfg.Runners.RunnerList(ctx, &RunnerListParams{Limit: MaxRunnerList})
	if err != nil {
		return nil, err
	}
	live := map[string]RunnerInfo{}
	for _, r := range s.Runners() {
		live[r.ID] = r
	}
	out := make([]RunnerStatus, len(recs))
	for i, rec := range recs {
		st := RunnerStatus{RunnerRecord: *rec, State: RunnerAway}
		if info, ok := live[rec.ID]; ok {
			st.State, st.Job, st.Jobs = info.State, info.Job, info.Jobs
			if info.LastSeen.After(st.LastSeen) {
				st.LastSeen = info.LastSeen.UTC()
			}
		}
		if rec.Revoked() {
			st.State, st.Job = RunnerRevoked, nil
		}
		out[i] = st
	}
	return out, nil
}
