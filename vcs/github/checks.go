package github

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"

	gh "github.com/google/go-github/v62/github"

	"github.com/cikit/cikit/vcs"
)

// checkRunCacheSize is how many check runs a Provider remembers: enough
// for the contexts of the commits being reported on at once.
const checkRunCacheSize = 4096

// setCheckRun reports st as the check run named st.Context on commit sha:
// it updates the App's run of that name, found in the cache or by
// listing the commit's runs, or creates one.
func (p *Provider) setCheckRun(ctx context.Context, repo, sha string, st *vcs.Status) error {
	status, conclusion := checkRunState(st.State)
	key := runKey{repo: strings.ToLower(repo), sha: sha, name: st.Context}
	_, err := call(ctx, p, repo, fmt.Sprintf("check run %s of commit %s", st.Context, sha), func(c *gh.Client, owner, name string) (struct{}, error) {
		run, ok := p.runs.get(key)
		if !ok {
			var err error
			if run, ok, err = p.findCheckRun(ctx, c, owner, name, sha, st.Context); err != nil {
				return struct{}{}, err
			}
		}
		now := &gh.Timestamp{Time: p.now()}
		var completedAt *gh.Timestamp
		if status == "completed" {
			completedAt = now
		}
		// An empty description or target URL is left out, so an update
		// keeps the run's: GitHub wants an output's title and summary,
		// and "" for no details URL.
		var output *gh.CheckRunOutput
		if st.Description != "" {
			output = &gh.CheckRunOutput{Title: &st.Description, Summary: &st.Description}
		}
		var cr *gh.CheckRun
		var err error
		// A run that completed is not reopened: a job run again on the
		// commit is a new check run, the one GitHub then shows.
		if ok && !(run.completed && status != "completed") {
			cr, _, err = c.Checks.UpdateCheckRun(ctx, owner, name, run.id, gh.UpdateCheckRunOptions{
				Name: st.Context, DetailsURL: optional(st.TargetURL), Status: &status, Conclusion: optional(conclusion),
				CompletedAt: completedAt, Output: output,
			})
		} else {
			cr, _, err = c.Checks.CreateCheckRun(ctx, owner, name, gh.CreateCheckRunOptions{
				Name: st.Context, HeadSHA: sha, DetailsURL: optional(st.TargetURL), Status: &status,
				Conclusion: optional(conclusion), StartedAt: now, CompletedAt: completedAt, Output: output,
			})
		}
		if err != nil {
			return struct{}{}, err
		}
		p.runs.put(key, checkRun{id: cr.GetID(), completed: cr.GetStatus() == "completed"})
		return struct{}{}, nil
	})
	return err
}

// findCheckRun returns the App's newest check run named checkName on
// commit sha; ok is false when there is none.
func (p *Provider) findCheckRun(ctx context.Context, c *gh.Client, owner, name, sha, checkName string) (run checkRun, ok bool, err error) {
	res, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, sha, &gh.ListCheckRunsOptions{
		CheckName: &checkName, AppID: &p.app.id, ListOptions: gh.ListOptions{PerPage: 100},
	})
	if err != nil {
		return checkRun{}, false, err
	}
	for _, cr := range res.CheckRuns {
		if cr.GetName() == checkName && cr.GetID() > run.id {
			run, ok = checkRun{id: cr.GetID(), completed: cr.GetStatus() == "completed"}, true
		}
	}
	return run, ok, nil
}

// checkRunState maps a vcs.State onto a check run's status and, when
// completed, conclusion.
func checkRunState(s vcs.State) (status, conclusion string) {
	switch s {
	case vcs.StatePending:
		return "queued", ""
	case vcs.StateRunning:
		return "in_progress", ""
	default: // success, failure, cancelled and skipped are conclusions
		return "completed", string(s)
	}
}

type runKey struct{ repo, sha, name string }

// checkRun is what the Provider remembers of a check run.
type checkRun struct {
	id        int64
	completed bool
}

// runCache keeps the check runs last used, at most size of them, so a
// reporter's updates of a run do not list the commit's runs each time.
type runCache struct {
	size int

	mu      sync.Mutex
	lru     *list.List // of *runEntry, most recently used first
	entries map[runKey]*list.Element
}

type runEntry struct {
	key runKey
	run checkRun
}

func newRunCache(size int) *runCache {
	return &runCache{size: size, lru: list.New(), entries: map[runKey]*list.Element{}}
}

func (c *runCache) get(k runKey) (checkRun, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return checkRun{}, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*runEntry).run, true
}

func (c *runCache) put(k runKey, run checkRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value.(*runEntry).run = run
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k] = c.lru.PushFront(&runEntry{key: k, run: run})
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*runEntry).key)
	}
}
