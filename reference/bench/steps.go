package bench

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// firstStep is a pipeline whose job checks the pushed commit out (native
// jobs do by default) and whose first step prints the time it started, in
// nanoseconds since the epoch, the push that commit is, read from the
// checked-out pushed.txt, and whether the work tree borrows the objects of
// the runner's git cache or holds copies, into the job's log.
const firstStep = `jobs:
  first:
    steps:
      - echo "CIKIT_BENCH_STARTED_AT=$(date +%s%N) CIKIT_BENCH_PUSH=$(cat pushed.txt) CIKIT_BENCH_OBJECTS=$(test -f .git/objects/info/alternates && echo borrowed || echo copied)"
`

// firstStepBare is firstStep without the checkout: its step finds no
// pushed.txt and says so.
const firstStepBare = `jobs:
  first:
    checkout: false
    steps:
      - echo "CIKIT_BENCH_STARTED_AT=$(date +%s%N) CIKIT_BENCH_PUSH=$(cat pushed.txt 2>/dev/null || echo none)"
`

// startedAtRE matches the step's output line (not the echo of its
// command): the start time, the push and, after a checkout, whether its
// objects are borrowed.
var startedAtRE = regexp.MustCompile(`(?m)^CIKIT_BENCH_STARTED_AT=(\d+) CIKIT_BENCH_PUSH=(\S+)(?: CIKIT_BENCH_OBJECTS=(borrowed|copied))?$`)

// smallRepository is the rest of the repository the jobs check out: a
// small Go module of 24 files.
func smallRepository() map[string]string {
	files := map[string]string{
		"go.mod":    "module example.com/app\n\ngo 1.22\n",
		"README.md": "# app\n\nA small module the benchmark checks out.\n",
		"main.go":   "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"app\") }\n",
	}
	for i := range 7 {
		pkg := fmt.Sprintf("pkg%d", i)
		files[pkg+"/"+pkg+".go"] = fmt.Sprintf("// Package %s is part of the benchmark's module.\npackage %s\n\n// N is %d.\nconst N = %d\n", pkg, pkg, i, i)
		files[pkg+"/"+pkg+"_test.go"] = fmt.Sprintf("package %s\n\nimport \"testing\"\n\nfunc TestN(t *testing.T) {\n\tif N != %d {\n\t\tt.Fatal(N)\n\t}\n}\n", pkg, i)
		files[pkg+"/doc.txt"] = strings.Repeat(pkg+" ", 200) + "\n"
	}
	return files
}

// webhookToFirstStep pushes new commits one after the other and times
// each from sending its webhook to the first step of its job starting, as
// the step itself saw it: the `date +%s%N` it printed, read back from the
// job's log. Each push waits for the previous job to end, so a warm
// runner is waiting for it. The pushes alternate between the pipeline
// whose job checks the pushed commit out of a small repository (the
// latency reported) and the same job with `checkout: false` (the
// baseline, in the note); each job's log shows whether it found the
// pushed commit in its workspace, and a job that did not see what its
// pipeline says fails the scenario.
func webhookToFirstStep(ctx context.Context, b *bencher) (_ *Result, err error) {
	e, err := b.newEnv(ctx, "webhook-to-first-step", envOptions{pipeline: firstStep, files: smallRepository(), localRunners: 2})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	n := b.sizes.firstSteps
	lat := make([]time.Duration, 0, n)
	bare := make([]time.Duration, 0, n)
	prev := e.sha
	var total time.Duration
	borrowed := 0
	for i := -2; i < 2*n; i++ { // pushes -2 and -1 warm up
		checkout := i%2 == 0
		pipeline := firstStep
		if !checkout {
			pipeline = firstStepBare
		}
		push := "push" + strconv.Itoa(i)
		sha, err := e.commitFiles(ctx, push, map[string]string{".cikit.yml": pipeline, "pushed.txt": push + "\n"})
		if err != nil {
			return nil, err
		}
		id := "first-step-" + strconv.Itoa(i)
		body := pushBody("main", prev, sha)
		prev = sha
		sent := time.Now()
		if err := e.deliver(ctx, id, body); err != nil {
			return nil, err
		}
		runIDs, err := e.waitRuns(ctx, id, 2*time.Millisecond)
		if err != nil {
			return nil, err
		}
		job, err := e.waitJob(ctx, runIDs[0], "first")
		if err != nil {
			return nil, err
		}
		if job.State != cikit.JobSucceeded {
			return nil, fmt.Errorf("run %s: job first %s: %s", runIDs[0], job.State, job.Reason)
		}
		log, err := e.readLog(ctx, runIDs[0], "first", job.Attempt)
		if err != nil {
			return nil, err
		}
		m := startedAtRE.FindSubmatch(log)
		if m == nil {
			return nil, fmt.Errorf("run %s: no start time in the log of job first: %q", runIDs[0], log)
		}
		ns, err := strconv.ParseInt(string(m[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("run %s: start time %q: %w", runIDs[0], m[1], err)
		}
		want := "none"
		if checkout {
			want = push
		}
		if got := string(m[2]); got != want {
			return nil, fmt.Errorf("run %s of %s (checkout %t): the job's workspace has push %q, want %q: %q", runIDs[0], sha, checkout, got, want, log)
		}
		if i < 0 {
			continue
		}
		if string(m[3]) == "borrowed" {
			borrowed++
		}
		d := time.Unix(0, ns).Sub(sent)
		if checkout {
			lat = append(lat, d)
			total += time.Since(sent)
		} else {
			bare = append(bare, d)
		}
	}
	p50, p95, _ := percentiles(lat)
	bareP50, bareP95, _ := percentiles(bare)
	r := result(n, total, "pushes/s", lat, fmt.Sprintf("sequential pushes of new commits; latency: webhook sent → first step's own `date +%%s%%N`, "+
		"after checking the pushed commit out of a repository of %d files through the runner's git cache (%d of %d work trees borrowed its objects rather than copying them); "+
		"2 warm local runners, isolation %s; target p95 ≤ 150 ms; "+
		"interleaved pushes of the job with `checkout: false`: p50 %s ms, p95 %s ms (with/without checkout: p50 ×%.2f, p95 ×%.2f)",
		len(smallRepository())+2, borrowed, len(lat), e.p.Isolation(), ms(bareP50), ms(bareP95), ratio(p50, bareP50), ratio(p95, bareP95)))
	return r, nil
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// waitJob waits for a job to end and returns it.
func (e *env) waitJob(ctx context.Context, runID, jobID string) (*dag.Job, error) {
	var job *dag.Job
	err := poll(ctx, 60*time.Second, 2*time.Millisecond, "job "+jobID+" of run "+runID+" to end", func() (bool, error) {
		j, err := e.p.Jobs().JobGet(ctx, runID, jobID)
		if err != nil {
			return false, err
		}
		job = j
		return j.State.Terminal(), nil
	})
	return job, err
}

// readLog reads a job attempt's whole log through the follow stream.
func (e *env) readLog(ctx context.Context, runID, jobID string, attempt int) ([]byte, error) {
	var out []byte
	err := poll(ctx, 10*time.Second, 5*time.Millisecond, "the log of job "+jobID+" of run "+runID, func() (bool, error) {
		req, err := e.followRequest(ctx, runID, jobID, attempt)
		if err != nil {
			return false, err
		}
		resp, err := e.client.Do(req)
		if err != nil {
			return false, fmt.Errorf("follow: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return false, nil
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("follow: %s", resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 256<<10), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "log":
				var ev struct {
					Data string `json:"data"`
				}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
					return false, fmt.Errorf("follow: %w", err)
				}
				data, err := base64.StdEncoding.DecodeString(ev.Data)
				if err != nil {
					return false, fmt.Errorf("follow: %w", err)
				}
				out = append(out, data...)
			case strings.HasPrefix(line, "data: ") && event == "end":
				return true, nil
			}
		}
		if err := sc.Err(); err != nil {
			return false, fmt.Errorf("follow: %w", err)
		}
		return false, errors.New("follow: the stream ended without its end event")
	})
	return out, err
}

// fanOutChainFanIn: setup, then eight parallel jobs beside a chain of two,
// then merge; every job sleeps 0.2 s, so the critical path is setup,
// chain1, chain2, merge: 0.8 s of sleep, with nine jobs at once at most.
const fanOutChainFanIn = `jobs:
  setup:
    steps: ["sleep 0.2"]
  fan1: {needs: [setup], steps: ["sleep 0.2"]}
  fan2: {needs: [setup], steps: ["sleep 0.2"]}
  fan3: {needs: [setup], steps: ["sleep 0.2"]}
  fan4: {needs: [setup], steps: ["sleep 0.2"]}
  fan5: {needs: [setup], steps: ["sleep 0.2"]}
  fan6: {needs: [setup], steps: ["sleep 0.2"]}
  fan7: {needs: [setup], steps: ["sleep 0.2"]}
  fan8: {needs: [setup], steps: ["sleep 0.2"]}
  chain1: {needs: [setup], steps: ["sleep 0.2"]}
  chain2: {needs: [chain1], steps: ["sleep 0.2"]}
  merge:
    needs: [fan1, fan2, fan3, fan4, fan5, fan6, fan7, fan8, chain2]
    steps: ["sleep 0.2"]
`

// dagCriticalPath runs the fan-out/chain/fan-in pipeline on nine local
// runners, one run after another, and compares each run's wall clock
// (creation to end, as the store recorded them) with its critical path
// (dag.Report: the longest chain of needs by the jobs' own run times).
// The difference is what scheduling added along the path: the runs'
// queue waits and the gaps between a job's end and its dependents'
// start.
func dagCriticalPath(ctx context.Context, b *bencher) (_ *Result, err error) {
	const runners = 9
	e, err := b.newEnv(ctx, "dag-critical-path", envOptions{pipeline: fanOutChainFanIn, localRunners: runners})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	n := b.sizes.dagRuns
	var (
		overhead, paths, walls []time.Duration
		ratios                 []float64
		wall                   time.Duration
		jobs                   int
	)
	for i := -1; i < n; i++ { // run -1 warms up
		id := "dag-" + strconv.Itoa(i)
		if err := e.deliver(ctx, id, pushBody("dag-"+strconv.Itoa(i), e.fakeBefore(), e.sha)); err != nil {
			return nil, err
		}
		runIDs, err := e.waitRuns(ctx, id, 2*time.Millisecond)
		if err != nil {
			return nil, err
		}
		rep, err := e.waitReport(ctx, runIDs[0])
		if err != nil {
			return nil, err
		}
		if rep.State != cikit.RunSucceeded {
			return nil, fmt.Errorf("run %s %s: %v", rep.RunID, rep.State, rep.Counts)
		}
		if i < 0 {
			continue
		}
		overhead = append(overhead, rep.Duration-rep.CriticalPathDuration)
		paths = append(paths, rep.CriticalPathDuration)
		walls = append(walls, rep.Duration)
		ratios = append(ratios, float64(rep.Duration)/float64(rep.CriticalPathDuration))
		wall += rep.Duration
		jobs += len(rep.Jobs)
	}
	pathP50, _, _ := percentiles(paths)
	wallP50, _, _ := percentiles(walls)
	r := result(n, wall, "jobs/s", overhead, "")
	r.Throughput = float64(jobs) / wall.Seconds()
	r.Note = fmt.Sprintf("12 jobs of `sleep 0.2` on %d local runners, isolation %s; 0.8 s of sleep on the critical path, which measures %d ms p50 "+
		"(job run times, claim to completion, include the runner's work around the step); wall p50 %d ms, wall/critical path p50 %.3f; latency: wall − critical path",
		runners, e.p.Isolation(), pathP50.Milliseconds(), wallP50.Milliseconds(), medianRatio(ratios))
	return r, nil
}

// waitReport waits for a run to end and returns its report.
func (e *env) waitReport(ctx context.Context, runID string) (*dag.RunReport, error) {
	var run *dag.Run
	err := poll(ctx, 120*time.Second, 10*time.Millisecond, "run "+runID+" to end", func() (bool, error) {
		r, err := e.p.Jobs().RunGet(ctx, runID)
		if err != nil {
			return false, err
		}
		run = r
		return r.State.Terminal(), nil
	})
	if err != nil {
		return nil, err
	}
	jobs, err := e.p.Jobs().JobList(ctx, runID)
	if err != nil {
		return nil, err
	}
	return dag.ReportJobs(run, jobs, time.Now())
}

func medianRatio(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
