package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet/process"
)

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", "run [flags]\n\nRuns the pipeline of a directory on this machine: every job in a fresh copy of\nthe directory, its steps as `sh -e -c` processes, jobs in parallel where their\nneeds allow. Ctrl-C cancels the run.\n\nA manual job (GitLab's when: manual) runs only when named with -job; otherwise\nit is reported as not run, and fails the run only if it blocks it (a manual job\nwithout allow_failure). A delayed job (when: delayed) waits its start_in, unless\n-no-delay.", stderr)
	dir := fs.String("dir", ".", "the directory whose pipeline runs; each job works in a copy of it")
	file := fs.String("file", "", "the pipeline file, relative to -dir (default: .cikit.yml)")
	parallel := fs.Int("parallel", runtime.NumCPU(), "the most jobs run at once")
	grace := fs.Duration("grace", process.DefaultGrace, "how long a cancelled step gets between SIGTERM and SIGKILL")
	keep := fs.Bool("keep-workspaces", false, "keep job workspaces after the run, for debugging")
	report := fs.String("report", "", "write the run's result as JSON to this file")
	passEnv := fs.String("pass-env", "", "comma-separated names of more variables of this environment that jobs get, besides\nPATH, HOME, USER, LOGNAME, TMPDIR, LANG, LANGUAGE, LC_* and TZ (nothing else of it reaches them)")
	var play jobNames
	fs.Var(&play, "job", "start this manual job once its needs are satisfied (repeatable)")
	noDelay := fs.Bool("no-delay", false, "start delayed jobs as soon as their needs are satisfied, ignoring start_in")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cikit run: unexpected arguments %q; use -dir and -file\n", fs.Args())
		return ExitInvalid
	}
	if *parallel < 1 {
		fmt.Fprintf(stderr, "cikit run: -parallel must be at least 1, got %d\n", *parallel)
		return ExitInvalid
	}
	if *file == "" {
		f, err := findPipeline(*dir)
		if err != nil {
			fmt.Fprintf(stderr, "cikit run: %v\n", err)
			return ExitInvalid
		}
		*file = f
	}

	plan, diags, err := compiler.Compile(ctx, compiler.DirSource(*dir), filepath.ToSlash(*file), compiler.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	for _, d := range diags {
		d.File = filepath.Join(*dir, d.File)
		fmt.Fprintln(stderr, d)
	}
	if compiler.HasErrors(diags) {
		fmt.Fprintf(stderr, "cikit run: %s is invalid (%d finding(s)); nothing ran\n", filepath.Join(*dir, *file), len(diags))
		return ExitInvalid
	}
	if err := checkManual(plan, play); err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	if *noDelay {
		plan.Jobs = withoutDelays(plan.Jobs)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	con := &console{w: stdout}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := &localRun{con: con, plan: plan, width: prefixWidth(plan)}
	var expander process.Expander
	if plan.Format == compiler.FormatGitHub {
		abs, _ := filepath.Abs(*dir)
		expander = newGitHubExpander(abs)
	}
	exec, err := process.New(process.Config{
		Source:         *dir,
		Grace:          *grace,
		KeepWorkspaces: *keep,
		PassEnv:        splitList(*passEnv),
		Output:         r.output,
		Logger:         logger,
		Expander:       expander,
	})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	driver, err := dag.NewDriver(dag.DriverConfig{
		Store:    store,
		Parallel: *parallel,
		Logger:   logger,
		OnChange: r.onChange,
		Play:     play,
		Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
			res := exec.Run(ctx, j.Spec)
			r.flush(j.ID())
			return dag.Outcome{State: res.State, ExitCode: res.ExitCode, Reason: res.Reason, FailureClass: res.FailureClass}
		}),
	})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: plan.Jobs})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	finished := make(chan struct{})
	var announced sync.WaitGroup
	announced.Go(func() {
		select {
		case <-ctx.Done():
			con.printf("cikit: interrupted; cancelling the run (running steps get SIGTERM, then SIGKILL after %s)\n", *grace)
		case <-finished:
		}
	})
	started := time.Now()
	final, err := driver.Drive(ctx, run.ID)
	close(finished)
	announced.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitFailed
	}
	jobs, err := store.JobList(context.WithoutCancel(ctx), run.ID)
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitFailed
	}
	res := summarize(plan, final, jobs, time.Since(started))
	res.print(stdout)
	if *report != "" {
		if err := res.write(*report); err != nil {
			fmt.Fprintf(stderr, "cikit run: -report: %v\n", err)
			return ExitFailed
		}
	}
	switch final.State {
	case cikit.RunSucceeded:
		return ExitOK
	case cikit.RunCancelled:
		return ExitInterrupted
	case cikit.RunBlocked:
		fmt.Fprintf(stderr, "cikit run: the run is blocked: %s\n", blockedBy(jobs))
	}
	return ExitFailed
}

// localRun renders one run's live output.
type localRun struct {
	con   *console
	plan  *compiler.Plan
	width int

	mu      sync.Mutex
	writers map[string]*prefixWriter
}

func prefixWidth(plan *compiler.Plan) int {
	w := 0
	for _, j := range plan.Jobs {
		w = max(w, len(j.ID))
	}
	return w + 2
}

func (r *localRun) prefix(id string) string {
	return fmt.Sprintf("%-*s ", r.width, "["+id+"]")
}

func (r *localRun) output(spec *cikit.JobSpec) io.Writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writers == nil {
		r.writers = map[string]*prefixWriter{}
	}
	w := r.con.prefixed(r.prefix(spec.ID))
	r.writers[spec.ID] = w
	return w
}

func (r *localRun) flush(id string) {
	r.mu.Lock()
	w := r.writers[id]
	r.mu.Unlock()
	if w != nil {
		w.Flush()
	}
}

func (r *localRun) onChange(j *dag.Job) {
	p := r.prefix(j.ID())
	switch j.State {
	case cikit.JobRunning:
		r.con.printf("%s▶ started\n", p)
	case cikit.JobCancelRequested:
		r.con.printf("%s■ stopping\n", p)
	case cikit.JobSucceeded:
		r.con.printf("%s✔ succeeded in %s\n", p, round(j.Duration()))
	case cikit.JobFailed:
		allowed := ""
		if j.Spec.AllowFailure {
			allowed = " (allowed to fail)"
		}
		r.con.printf("%s✘ failed%s in %s: %s\n", p, allowed, round(j.Duration()), j.Reason)
	case cikit.JobSkipped:
		r.con.printf("%s○ skipped: %s\n", p, j.Reason)
	case cikit.JobCancelled:
		r.con.printf("%s■ cancelled: %s\n", p, j.Reason)
	case cikit.JobManual:
		r.con.printf("%s⏸ manual: waiting for a person (start with -job %s)\n", p, j.ID())
	case cikit.JobDelayed:
		r.con.printf("%s⏲ delayed until %s\n", p, j.ReadyAt.Format(time.TimeOnly))
	}
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// result is the outcome of a local run, printed as a table and written
// as JSON by -report.
type result struct {
	State        cikit.RunState `json:"state"`
	Duration     time.Duration  `json:"duration_ns"`
	Jobs         []jobResult    `json:"jobs"`
	CriticalPath []string       `json:"critical_path"`
	// CriticalLength is the sum of the durations along the critical path:
	// the least time the run could take with unlimited parallelism.
	CriticalLength time.Duration `json:"critical_path_ns"`
}

type jobResult struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	State        cikit.JobState `json:"state"`
	AllowFailure bool           `json:"allow_failure,omitempty"`
	ExitCode     int            `json:"exit_code"`
	Reason       string         `json:"reason,omitempty"`
	StartedAt    *time.Time     `json:"started_at,omitempty"`
	FinishedAt   *time.Time     `json:"finished_at,omitempty"`
	Duration     time.Duration  `json:"duration_ns"`
	// WaitsFor names, for a job left PENDING, the manual job it needs
	// (directly or not) that did not run.
	WaitsFor string `json:"waits_for,omitempty"`
}

func summarize(plan *compiler.Plan, run *dag.Run, jobs []*dag.Job, elapsed time.Duration) *result {
	res := &result{State: run.State, Duration: elapsed}
	for _, j := range jobs {
		jr := jobResult{ID: j.ID(), Name: j.Spec.DisplayName(), State: j.State, AllowFailure: j.Spec.AllowFailure,
			ExitCode: j.ExitCode, Reason: j.Reason, Duration: j.Duration()}
		if !j.StartedAt.IsZero() {
			jr.StartedAt = &j.StartedAt
		}
		if !j.FinishedAt.IsZero() && !j.StartedAt.IsZero() {
			jr.FinishedAt = &j.FinishedAt
		}
		res.Jobs = append(res.Jobs, jr)
	}
	g := plan.Graph()
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			if jobs[i].State != cikit.JobPending || res.Jobs[i].WaitsFor != "" {
				break
			}
			switch {
			case jobs[p].State == cikit.JobManual:
				res.Jobs[i].WaitsFor = g.Node(p).ID
			case res.Jobs[p].WaitsFor != "":
				res.Jobs[i].WaitsFor = res.Jobs[p].WaitsFor
			}
		}
	}
	path, total := g.CriticalPath(func(i int) time.Duration { return jobs[i].Duration() })
	for _, i := range path {
		res.CriticalPath = append(res.CriticalPath, g.Node(i).ID)
	}
	res.CriticalLength = total
	return res
}

func (res *result) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tDURATION\tNOTE")
	for _, j := range res.Jobs {
		dur := "-"
		if j.StartedAt != nil && j.FinishedAt != nil {
			dur = round(j.Duration).String()
		}
		note := j.Reason
		switch {
		case j.State == cikit.JobFailed && j.AllowFailure:
			note = "allowed to fail: " + note
		case j.State == cikit.JobManual:
			note = fmt.Sprintf("manual: not run (start with -job %s)", j.ID)
		case j.State == cikit.JobPending && j.WaitsFor != "":
			note = fmt.Sprintf("not run: needs %s, a manual job that did not run", j.WaitsFor)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, strings.ToUpper(string(j.State)), dur, note)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\ncritical path: %s (%s)\n", strings.Join(res.CriticalPath, " → "), round(res.CriticalLength))
	fmt.Fprintf(w, "run %s in %s\n", res.State, round(res.Duration))
}

func (res *result) write(path string) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
