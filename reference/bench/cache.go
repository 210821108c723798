package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cikit/cikit"
)

// cachedInstall is a pipeline whose job "installs" its dependencies, a
// tree of files under deps/, when its cache misses: the install costs
// installSleep and writes the tree; a restored tree skips it. The key
// holds the round, so that each round's first run misses.
func cachedInstall(round int) string {
	return fmt.Sprintf(`jobs:
  deps:
    cache:
      key: deps-%d-{{ hash("deps.lock") }}
      paths: [deps/]
    steps:
      - |
        if [ -f deps/.installed ]; then
          echo "CIKIT_BENCH_CACHE=hit"
        else
          echo "CIKIT_BENCH_CACHE=miss"
          sleep %s
          mkdir -p deps
          for i in $(seq 1 %d); do head -c %d /dev/urandom > deps/file$i; done
          touch deps/.installed
        fi
`, round, installSleep, installFiles, installFileBytes)
}

// The install a miss pays: a download's wait and the files it writes.
const (
	installSleep     = "1"
	installFiles     = 200
	installFileBytes = 64 << 10
)

// cacheHit pushes, each round, a commit whose job misses its cache (a
// key new to the round), installs and saves the tree, then the same
// commit again, whose job restores the tree (an exact hit) and skips the
// install. The latency is the job's run time on a hit; the time saved is
// the miss's run time less the hit's, per round.
func cacheHit(ctx context.Context, b *bencher) (_ *Result, err error) {
	e, err := b.newEnv(ctx, "cache-hit", envOptions{pipeline: cachedInstall(-1), files: map[string]string{"deps.lock": "v1\n"}, localRunners: 1})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	n := b.sizes.cacheRounds
	var (
		hits, misses, saved []time.Duration
		total               time.Duration
		restoredMS          []time.Duration
	)
	prev := e.sha
	for round := range n {
		sha, err := e.commitFiles(ctx, "round "+strconv.Itoa(round), map[string]string{".cikit.yml": cachedInstall(round)})
		if err != nil {
			return nil, err
		}
		var times [2]time.Duration
		for i, want := range []string{"miss", "hit"} {
			id := fmt.Sprintf("cache-%d-%s", round, want)
			sent := time.Now()
			before := prev
			if i == 1 {
				before = e.fakeBefore()
			}
			if err := e.deliver(ctx, id, pushBody("main", before, sha)); err != nil {
				return nil, err
			}
			prev = sha
			runIDs, err := e.waitRuns(ctx, id, 2*time.Millisecond)
			if err != nil {
				return nil, err
			}
			job, err := e.waitJob(ctx, runIDs[0], "deps")
			if err != nil {
				return nil, err
			}
			total += time.Since(sent)
			if job.State != cikit.JobSucceeded {
				return nil, fmt.Errorf("run %s: job deps %s: %s", runIDs[0], job.State, job.Reason)
			}
			if job.Result == nil || len(job.Result.Caches) != 1 {
				return nil, fmt.Errorf("run %s: job deps reported no cache result", runIDs[0])
			}
			c := job.Result.Caches[0]
			if c.Hit != (want == "hit") || want == "hit" && !c.Exact {
				return nil, fmt.Errorf("run %s (round %d, the %s): the cache reported hit %t exact %t", runIDs[0], round, want, c.Hit, c.Exact)
			}
			if want == "miss" && !c.Saved {
				return nil, fmt.Errorf("run %s (round %d): the miss did not save the cache: %s", runIDs[0], round, c.Note)
			}
			times[i] = job.FinishedAt.Sub(job.StartedAt)
			if want == "hit" {
				restoredMS = append(restoredMS, time.Duration(c.RestoredInMS)*time.Millisecond)
			}
		}
		misses, hits = append(misses, times[0]), append(hits, times[1])
		saved = append(saved, times[0]-times[1])
	}
	missP50, _, _ := percentiles(misses)
	savedP50, _, _ := percentiles(saved)
	restoreP50, _, _ := percentiles(restoredMS)
	r := result(2*n, total, "runs/s", hits, fmt.Sprintf("%d rounds of a job whose install (sleep %ss, %d files of %d KiB) runs on a cache miss and is skipped on a hit; "+
		"latency: the job's run time on an exact hit (restore of %s included: p50 %d ms); on the miss, install and save: p50 %d ms; "+
		"time saved per job p50 %d ms (miss − hit), hit/miss ×%.2f; 1 local runner, isolation %s",
		n, installSleep, installFiles, installFileBytes>>10, cikit.FormatBytes(installFiles*installFileBytes), restoreP50.Milliseconds(),
		missP50.Milliseconds(), savedP50.Milliseconds(), ratio(percentile50(hits), missP50), e.p.Isolation()))
	return r, nil
}

func percentile50(d []time.Duration) time.Duration {
	p, _, _ := percentiles(d)
	return p
}
