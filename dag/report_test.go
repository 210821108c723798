package dag_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// t0 is the time reports are measured from; at(m) is m minutes later.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// reportJob is job id of run-1, on its first attempt, with its ready,
// start and finish times in minutes after t0; -1 leaves a time unset.
func reportJob(id string, state cikit.JobState, ready, started, finished int) *dag.Job {
	j := &dag.Job{RunID: "run-1", Spec: &cikit.JobSpec{ID: id}, State: state, Attempt: 1}
	for _, f := range []struct {
		m int
		t *time.Time
	}{{ready, &j.ReadyAt}, {started, &j.StartedAt}, {finished, &j.FinishedAt}} {
		if f.m >= 0 {
			*f.t = at(f.m)
		}
	}
	return j
}

func graph(t *testing.T, needs ...[]string) *dag.Graph {
	t.Helper()
	var nodes []dag.Node
	for _, n := range needs {
		nodes = append(nodes, dag.Node{ID: n[0], Needs: n[1:]})
	}
	g, err := dag.NewGraph(nodes)
	require.NoError(t, err)
	return g
}

func TestReportDiamond(t *testing.T) {
	t.Parallel()
	g := graph(t, []string{"build"}, []string{"fast", "build"}, []string{"slow", "build"}, []string{"deploy", "fast", "slow"})
	s := cikit.JobSucceeded
	slow := reportJob("slow", s, 3, 3, 13)
	slow.Attempt = 2
	jobs := []*dag.Job{reportJob("build", s, 0, 1, 3), reportJob("fast", s, 3, 4, 5), slow, reportJob("deploy", s, 13, 14, 16)}
	run := &dag.Run{ID: "run-1", State: cikit.RunSucceeded, CreatedAt: at(0), FinishedAt: at(16)}

	require.Equal(t, &dag.RunReport{
		RunID:      "run-1",
		State:      cikit.RunSucceeded,
		CreatedAt:  at(0),
		FinishedAt: at(16),
		Duration:   16 * time.Minute, // to the end, not to now
		Jobs: []dag.JobReport{
			{ID: "build", State: s, Attempt: 1, QueueDuration: time.Minute, RunDuration: 2 * time.Minute},
			{ID: "fast", State: s, Attempt: 1, QueueDuration: time.Minute, RunDuration: time.Minute},
			{ID: "slow", State: s, Attempt: 2, QueueDuration: 0, RunDuration: 10 * time.Minute},
			{ID: "deploy", State: s, Attempt: 1, QueueDuration: time.Minute, RunDuration: 2 * time.Minute},
		},
		CriticalPath:         []string{"build", "slow", "deploy"},
		CriticalPathDuration: 14 * time.Minute, // 2 + 10 + 2: the queueing is not on it
		Counts:               map[cikit.JobState]int{s: 4},
	}, dag.Report(g, run, jobs, at(60)))
}

// TestReportJobs: the graph comes from the jobs' specs, and specs that
// make none are an error.
func TestReportJobs(t *testing.T) {
	t.Parallel()
	s := cikit.JobSucceeded
	build, deploy := reportJob("build", s, 0, 1, 3), reportJob("deploy", s, 3, 4, 9)
	deploy.Spec.Needs = []string{"build"}
	run := &dag.Run{ID: "run-1", State: cikit.RunSucceeded, CreatedAt: at(0), FinishedAt: at(9)}
	rep, err := dag.ReportJobs(run, []*dag.Job{build, deploy}, at(60))
	require.NoError(t, err)
	require.Equal(t, []string{"build", "deploy"}, rep.CriticalPath)
	require.Equal(t, 7*time.Minute, rep.CriticalPathDuration)

	deploy.Spec.Needs = []string{"nothing"}
	_, err = dag.ReportJobs(run, []*dag.Job{build, deploy}, at(60))
	require.ErrorContains(t, err, `dag: run "run-1": its jobs do not form a graph`)
}

// runningReport is build -> [test, lint] -> deploy at minute 12: build
// succeeded, test is running since minute 5, lint waits, deploy is
// pending.
func runningReport(t *testing.T) *dag.RunReport {
	t.Helper()
	g := graph(t, []string{"build"}, []string{"test", "build"}, []string{"lint", "build"}, []string{"deploy", "test", "lint"})
	jobs := []*dag.Job{
		reportJob("build", cikit.JobSucceeded, 0, 1, 3),
		reportJob("test", cikit.JobRunning, 3, 5, -1),
		reportJob("lint", cikit.JobReady, 3, -1, -1),
		reportJob("deploy", cikit.JobPending, -1, -1, -1),
	}
	return dag.Report(g, &dag.Run{ID: "run-1", State: cikit.RunRunning, CreatedAt: at(0)}, jobs, at(12))
}

func TestReportRunning(t *testing.T) {
	t.Parallel()
	require.Equal(t, &dag.RunReport{
		RunID:     "run-1",
		State:     cikit.RunRunning,
		CreatedAt: at(0),
		Duration:  12 * time.Minute, // to now
		Jobs: []dag.JobReport{
			{ID: "build", State: cikit.JobSucceeded, Attempt: 1, QueueDuration: time.Minute, RunDuration: 2 * time.Minute},
			{ID: "test", State: cikit.JobRunning, Attempt: 1, QueueDuration: 2 * time.Minute, RunDuration: 7 * time.Minute},
			{ID: "lint", State: cikit.JobReady, Attempt: 1, QueueDuration: 9 * time.Minute},
			{ID: "deploy", State: cikit.JobPending, Attempt: 1},
		},
		CriticalPath:         []string{"build", "test"},
		CriticalPathDuration: 9 * time.Minute,
		Counts:               map[cikit.JobState]int{cikit.JobSucceeded: 1, cikit.JobRunning: 1, cikit.JobReady: 1, cikit.JobPending: 1},
	}, runningReport(t))
}

func TestReportSkippedAndExpiredJobsRanNothing(t *testing.T) {
	t.Parallel()
	g := graph(t, []string{"build"}, []string{"test", "build"}, []string{"docs"})
	build := reportJob("build", cikit.JobFailed, 0, 1, 4)
	build.Reason = "exit 1"
	test := reportJob("test", cikit.JobSkipped, -1, -1, 4)
	test.Reason = "needs build, which failed"
	docs := reportJob("docs", cikit.JobFailed, 0, -1, 61)
	docs.Reason = "queue_timeout: waited 1h1m0s in the queue, longer than the max queue time of 1h0m0s"
	run := &dag.Run{ID: "run-1", State: cikit.RunFailed, CreatedAt: at(0), FinishedAt: at(61)}

	r := dag.Report(g, run, []*dag.Job{build, test, docs}, at(90))
	require.Equal(t, []dag.JobReport{
		{ID: "build", State: cikit.JobFailed, Attempt: 1, QueueDuration: time.Minute, RunDuration: 3 * time.Minute, Reason: "exit 1"},
		{ID: "test", State: cikit.JobSkipped, Attempt: 1, Reason: "needs build, which failed"},
		{ID: "docs", State: cikit.JobFailed, Attempt: 1, QueueDuration: 61 * time.Minute, Reason: docs.Reason},
	}, r.Jobs, "a job that never started waited until it ended")
	require.Equal(t, []string{"build"}, r.CriticalPath, "test and docs ran nothing")
	require.Equal(t, 3*time.Minute, r.CriticalPathDuration)
	require.Equal(t, 61*time.Minute, r.Duration)
	require.Equal(t, map[cikit.JobState]int{cikit.JobFailed: 2, cikit.JobSkipped: 1}, r.Counts)
}

func TestReportBeforeAnythingRan(t *testing.T) {
	t.Parallel()
	g := graph(t, []string{"build"}, []string{"test", "build"})
	jobs := []*dag.Job{reportJob("build", cikit.JobReady, 0, -1, -1), reportJob("test", cikit.JobPending, -1, -1, -1)}
	r := dag.Report(g, &dag.Run{ID: "run-1", State: cikit.RunPending, CreatedAt: at(0)}, jobs, at(2))
	require.Equal(t, []string{}, r.CriticalPath, "no path until a job has run")
	require.Zero(t, r.CriticalPathDuration)
	require.Equal(t, 2*time.Minute, r.Jobs[0].QueueDuration)
}

func TestReportOddInput(t *testing.T) {
	t.Parallel()
	g := graph(t, []string{"build"})
	jobs := []*dag.Job{reportJob("build", cikit.JobRunning, 0, 10, -1), reportJob("ghost", cikit.JobSucceeded, 0, 0, 5)}
	r := dag.Report(g, &dag.Run{ID: "run-1", State: cikit.RunRunning, CreatedAt: at(0)}, jobs, at(5))
	require.Zero(t, r.Jobs[0].RunDuration, "a start after now counts zero, not less")
	require.Equal(t, 5*time.Minute, r.Jobs[1].RunDuration, "a job the graph lacks is reported")
	require.Empty(t, r.CriticalPath, "but is on no path")
	require.Equal(t, 5*time.Minute, r.Duration)
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(runningReport(t))
	require.NoError(t, err)
	require.JSONEq(t, `{
		"run_id": "run-1",
		"state": "running",
		"created_at": "2026-01-01T12:00:00Z",
		"duration_ns": 720000000000,
		"jobs": [
			{"id": "build", "state": "succeeded", "attempt": 1, "queue_duration_ns": 60000000000, "run_duration_ns": 120000000000},
			{"id": "test", "state": "running", "attempt": 1, "queue_duration_ns": 120000000000, "run_duration_ns": 420000000000},
			{"id": "lint", "state": "ready", "attempt": 1, "queue_duration_ns": 540000000000, "run_duration_ns": 0},
			{"id": "deploy", "state": "pending", "attempt": 1, "queue_duration_ns": 0, "run_duration_ns": 0}
		],
		"critical_path": ["build", "test"],
		"critical_path_ns": 540000000000,
		"counts": {"succeeded": 1, "running": 1, "ready": 1, "pending": 1}
	}`, string(data), "finished_at is absent until the run ends")
	var back dag.RunReport
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, runningReport(t), &back, "the JSON form reads back whole")
}
