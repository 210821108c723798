package dag

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cikit/cikit"
)

// counters are the dependency counters of the PostgreSQL store's fast
// path, in Redis: for every job that needs others, how many of its needs
// are not yet satisfied, and the set of needs already counted. They are
// derived state: PostgreSQL decides alone when they are missing, and a
// write never trusts them further than to decide that a job is worth
// checking.
//
// Keys, per job: <prefix>deps:{<run>}:<job> holds the count and
// <prefix>depsdone:{<run>}:<job> the counted needs. The braces keep a
// run's keys in one Redis Cluster slot.
type counters struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

func (c *counters) countKey(run, job string) string {
	return c.prefix + "deps:{" + run + "}:" + job
}

func (c *counters) doneKey(run, job string) string {
	return c.prefix + "depsdone:{" + run + "}:" + job
}

// decrScript counts a satisfied need of a job once: if the need is not yet
// in the job's done set, it is added and the count decremented. It
// returns the count, or nil when the counter is missing (never made, or
// lost), which leaves the decision to PostgreSQL.
var decrScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
	return false
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
	redis.call('PEXPIRE', KEYS[2], ARGV[2])
	return redis.call('DECR', KEYS[1])
end
return tonumber(redis.call('GET', KEYS[1]))
`)

// edge is a need: Child needs Parent.
type edge struct {
	Run, Child, Parent string
}

// countDown counts each edge's parent as satisfied for its child, once
// per edge however often it is called, and returns the children worth
// checking: those whose count reached zero or less, or is missing. A
// Redis failure makes every child worth checking.
func (c *counters) countDown(ctx context.Context, edges []edge) []edge {
	cmds := make([]*redis.Cmd, len(edges))
	for try := 0; try < 2; try++ {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, e := range edges {
				cmds[i] = decrScript.EvalSha(ctx, p, []string{c.countKey(e.Run, e.Child), c.doneKey(e.Run, e.Child)},
					e.Parent, c.ttl.Milliseconds())
			}
			return nil
		})
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") || decrScript.Load(ctx, c.rdb).Err() != nil {
			break
		}
	}
	var check []edge
	for i, e := range edges {
		n, err := cmds[i].Int64()
		if err != nil || n <= 0 {
			check = append(check, e) // zero, missing (redis.Nil) or failed
		}
	}
	return check
}

// rebuild sets the counters of a run's jobs from their states: the count
// of each job's needs not satisfied, and the set of those satisfied. It
// is atomic against countDown (MULTI/EXEC), so a count running
// concurrently either comes before it and is overwritten by the same
// truth, or after it and finds its need already counted.
func (c *counters) rebuild(ctx context.Context, runID string, g *Graph, states []cikit.JobState) error {
	all := make([]int, g.Len())
	for i := range all {
		all[i] = i
	}
	return c.rebuildJobs(ctx, runID, g, func(i int) cikit.JobState { return states[i] }, all)
}

// rebuildJobs is rebuild for some jobs of a run (indexes of g), on the
// states state gives their needs.
func (c *counters) rebuildJobs(ctx context.Context, runID string, g *Graph, state func(int) cikit.JobState, jobs []int) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range jobs {
			parents := g.Parents(i)
			if len(parents) == 0 {
				continue
			}
			id := g.Node(i).ID
			ck, dk := c.countKey(runID, id), c.doneKey(runID, id)
			var done []any
			for _, pi := range parents {
				if Satisfied(state(pi), g.allowsFailure(pi)) {
					done = append(done, g.Node(pi).ID)
				}
			}
			p.Del(ctx, dk)
			p.Set(ctx, ck, len(parents)-len(done), c.ttl)
			if len(done) > 0 {
				p.SAdd(ctx, dk, done...)
				p.PExpire(ctx, dk, c.ttl)
			}
		}
		return nil
	})
	return err
}

// forget deletes a run's counters, so that the store decides without them
// until they are rebuilt: the safe state after a rebuild failed.
func (c *counters) forget(ctx context.Context, runID string, g *Graph) error {
	keys := make([]string, 0, 2*g.Len())
	for i := range g.Len() {
		keys = append(keys, c.countKey(runID, g.Node(i).ID), c.doneKey(runID, g.Node(i).ID))
	}
	return c.rdb.Del(ctx, keys...).Err()
}

// read returns the counters present for a run's jobs.
func (c *counters) read(ctx context.Context, runID string, g *Graph) (map[string]int, error) {
	var ids []string
	var keys []string
	for i := range g.Len() {
		if len(g.Parents(i)) > 0 {
			ids = append(ids, g.Node(i).ID)
			keys = append(keys, c.countKey(runID, g.Node(i).ID))
		}
	}
	out := make(map[string]int)
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := c.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		out[ids[i]] = n
	}
	return out, nil
}
