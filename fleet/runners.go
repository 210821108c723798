package fleet

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit/lease"
)

// RunnerState is what a runner is doing, as far as the Server saw.
type RunnerState string

// The states of a runner.
const (
	// RunnerIdle: waiting in a claim's long poll.
	RunnerIdle RunnerState = "idle"
	// RunnerBusy: running a job it claimed, or being handed one.
	RunnerBusy RunnerState = "busy"
	// RunnerAway: neither, such as between two claims, or gone.
	RunnerAway RunnerState = "away"
)

// RunnerInfo is what a Server knows of a runner: from its registration and
// from the calls it has made to this Server since.
type RunnerInfo struct {
	ID     string
	Name   string
	Labels []string
	State  RunnerState
	// Job is the attempt a busy runner runs.
	Job *lease.Attempt
	// Jobs counts the attempts the runner was handed: a single-use
	// runner with one that is not busy is ending.
	Jobs int
	// LastSeen is the time of the runner's latest call, or now for a
	// runner waiting in a claim.
	LastSeen time.Time
}

// runnerForget is how long after its last call a runner is forgotten, in
// multiples of the longest claim wait.
const runnerForget = 3

// runners tracks the runners that call a Server.
type runners struct {
	mu sync.Mutex
	m  map[string]*runnerEntry
	// forget is how long after its last call a runner is forgotten;
	// pruneAt is the size at which the next new runner prunes the map
	// (single-use runners come and go).
	forget  time.Duration
	pruneAt int
}

type runnerEntry struct {
	info    RunnerInfo
	waiting int // claims in progress
	// last is the attempt the runner was handed last, counted in
	// info.Jobs once however often it is recorded busy with it.
	last lease.Attempt
}

func (rs *runners) entry(c *runnerClaims, now time.Time) *runnerEntry {
	e, ok := rs.m[c.RunnerID]
	if !ok {
		if len(rs.m) >= rs.pruneAt {
			rs.pruneLocked(now)
			rs.pruneAt = max(64, 2*len(rs.m))
		}
		e = &runnerEntry{info: RunnerInfo{ID: c.RunnerID, Name: c.Name, Labels: c.Labels, State: RunnerAway}}
		if rs.m == nil {
			rs.m = map[string]*runnerEntry{}
		}
		rs.m[c.RunnerID] = e
	}
	e.info.LastSeen = now
	return e
}

// seen records a call of runner c.
func (rs *runners) seen(c *runnerClaims, now time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.entry(c, now)
}

// waiting records that runner c starts (+1) or ends (-1) a claim; a
// runner that claims runs no job.
func (rs *runners) waiting(c *runnerClaims, now time.Time, delta int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e := rs.entry(c, now)
	e.waiting += delta
	e.info.Job = nil
	e.info.State = RunnerAway
	if e.waiting > 0 {
		e.info.State = RunnerIdle
	}
}

// busy records that runner c holds, or is being handed, attempt a.
func (rs *runners) busy(c *runnerClaims, now time.Time, a lease.Attempt) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e := rs.entry(c, now)
	if e.last != a {
		e.info.Jobs++
		e.last = a
	}
	e.info.Job, e.info.State = &a, RunnerBusy
}

// jobCall records a job-scoped call of runner id about attempt a; ended
// says the runner no longer runs it.
func (rs *runners) jobCall(id string, a lease.Attempt, now time.Time, ended bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e, ok := rs.m[id]
	if !ok {
		return // registered with another server; it shows at its next claim
	}
	e.info.LastSeen = now
	if ended && e.info.Job != nil && *e.info.Job == a {
		e.info.Job, e.info.State = nil, RunnerAway
	}
}

// drop forgets runner id: it was revoked.
func (rs *runners) drop(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, id)
}

// pruneLocked forgets the runners not seen for longer than forget.
func (rs *runners) pruneLocked(now time.Time) {
	for id, e := range rs.m {
		if e.waiting > 0 {
			e.info.LastSeen = now
		} else if now.Sub(e.info.LastSeen) > rs.forget {
			delete(rs.m, id)
		}
	}
}

// list returns the runners seen within forget, by ID, and forgets the
// others.
func (rs *runners) list(now time.Time) []RunnerInfo {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.pruneLocked(now)
	out := make([]RunnerInfo, 0, len(rs.m))
	for _, e := range rs.m {
		info := e.info
		info.Labels = slices.Clone(info.Labels)
		if info.Job != nil {
			j := *info.Job
			info.Job = &j
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b RunnerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Runners lists the runners that registered with or called this Server
// and were seen within the last three claim waits (ServerConfig.MaxWait),
// by ID. A busy runner heartbeats, an idle one waits in a claim, so a
// runner that is neither for that long has gone.
//
// Like the Dispatcher, this is what one process saw: with several
// servers, a runner shows on the ones it calls.
func (s *Server) Runners() []RunnerInfo {
	return s.runners.list(s.cfg.Now())
}
