package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/cikit/cikit"
)

// A LeaseDeadline is the end of a job's lease as its runner last
// confirmed it, on this machine's monotonic clock. An executor given one
// (RunLeased) hands it to the job's supervisor, a process of its own
// beside the job (or in its sandbox), and passes on every renewal; when
// the deadline passes without a new one, the supervisor kills every
// process of the job and exits, whatever became of the runner (stopped,
// frozen, deadlocked). So a runner that can no longer renew its lease
// cannot leave its job running after the server has handed the job to
// another runner (see docs/runner-protocol.md, "At most one executing
// attempt").
//
// A LeaseDeadline is safe for concurrent use.
type LeaseDeadline struct {
	mu      sync.Mutex
	until   time.Time
	changed chan struct{} // closed, and replaced, by each Renew
}

// NewLeaseDeadline returns a LeaseDeadline that ends at until, which must
// carry a monotonic clock reading: a time from time.Now of this process,
// plus a duration. The runner takes time.Now just before it sends the
// heartbeat that the server answers with the lease's remaining time, and
// adds that, so the deadline is never later than the lease's end.
func NewLeaseDeadline(until time.Time) *LeaseDeadline {
	return &LeaseDeadline{until: until, changed: make(chan struct{})}
}

// Renew moves the deadline to until (see NewLeaseDeadline): the runner's
// latest confirmed renewal, which the supervisor is told at once.
func (l *LeaseDeadline) Renew(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = until
	close(l.changed)
	l.changed = make(chan struct{})
}

// Until returns the deadline.
func (l *LeaseDeadline) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *LeaseDeadline) current() (time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until, l.changed
}

// RunLeased is RunOutput for a job whose runner holds a lease on it:
// the job's supervisor kills the job when lease's deadline passes without
// a renewal (see LeaseDeadline). The supervisor gets the deadline before
// the first step starts. The result of a job killed so is a failure
// whose reason says that its lease ran out.
func (e *Executor) RunLeased(ctx context.Context, spec *cikit.JobSpec, out io.Writer, onStep func(int), lease *LeaseDeadline) Result {
	return e.RunJob(ctx, Job{Spec: spec, Output: out, OnStep: onStep, Lease: lease})
}

// errLeaseExpired is how a step ends when the supervisor killed the job.
var errLeaseExpired = errors.New("the job's lease was not renewed in time: its supervisor killed every process of the job")

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER, which package
// syscall does not name.
const prSetChildSubreaper = 36

// startProcs starts the supervisor of a job: in the sandbox sp says, or,
// without a sandbox, beside the job, its output going to sp.out.
// With a lease, the supervisor has its deadline before startProcs
// returns, and every renewal after.
func (e *Executor) startProcs(ctx context.Context, sp *sandboxSpec, lease *LeaseDeadline) (jobProcs, error) {
	var s *sandboxJob
	var err error
	var procs jobProcs
	if e.sandbox == nil {
		var p *plainSupervised
		p, err = e.startPlain(ctx, sp.out)
		if p != nil {
			s, procs = p.sandboxJob, p
		}
	} else {
		s, err = e.startSandbox(ctx, sp)
		procs = s
	}
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return procs, nil
	}
	w := &watched{jobProcs: procs, done: make(chan struct{})}
	until, changed := lease.current()
	if err := s.renew(until); err != nil {
		close(w.done)
		procs.end(e.cfg.Logger.Warn)
		return nil, err
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-s.stop:
				return
			case <-changed:
			}
			until, changed = lease.current()
			if s.renew(until) != nil {
				return // the supervisor has ended; the step's run says why
			}
		}
	}()
	return w, nil
}

// watched is a job's processes whose lease renewals are passed on to the
// supervisor until the job ends.
type watched struct {
	jobProcs
	done chan struct{}
}

func (w *watched) end(warn func(msg string, args ...any)) {
	w.jobProcs.end(warn)
	<-w.done
}

// renew tells the supervisor that the job may run until until. It writes
// to the connection itself, beside the requests of run: a net.Conn keeps
// each Write whole.
func (s *sandboxJob) renew(until time.Time) error {
	b, err := json.Marshal(supervisorRequest{Lease: true, Remaining: int64(max(time.Until(until), 0))})
	if err != nil {
		return err
	}
	if _, err := s.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("the job's supervisor ended: %w", err)
	}
	return nil
}

// plainSupervised is the supervisor of a job without a sandbox: the same
// program and protocol as in a sandbox, run as a process of the host,
// whose descendants are the job's processes.
type plainSupervised struct {
	*sandboxJob
}

// startPlain starts the supervisor of a job without a sandbox and returns
// once it is ready.
func (e *Executor) startPlain(ctx context.Context, out *os.File) (*plainSupervised, error) {
	s := &sandboxJob{plan: &sandboxPlan{}, grace: e.cfg.Grace, stderr: &prefixBuffer{max: 4 << 10}}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close()
	s.conn, err = net.FileConn(mine)
	_ = mine.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The program running now, even if its file was replaced since.
	s.cmd = exec.Command("/proc/self/exe", supervisorArg)
	s.cmd.Env = []string{supervisorEnv + "=" + supervisorPlain}
	s.cmd.Dir = "/"
	s.cmd.Stderr = s.stderr
	s.cmd.ExtraFiles = []*os.File{theirs, out} // fdControl, fdOutput
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		_ = s.conn.Close()
		return nil, fmt.Errorf("starting the job's supervisor: %w", err)
	}
	fail := func(err error) (*plainSupervised, error) {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.close()
		return nil, fmt.Errorf("the job's supervisor did not start: %w%s", err, s.said())
	}
	if err := s.awaitReady(ctx, sandboxStartTimeout); err != nil {
		return fail(err)
	}
	p := &plainSupervised{s}
	return p, nil
}

// end has the supervisor kill every process of the job, by closing its
// connection, and returns when the supervisor has exited.
func (p *plainSupervised) end(warn func(msg string, args ...any)) {
	p.close()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = p.cmd.Wait()
	}()
	t := time.NewTimer(killWait + time.Second)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		warn("the supervisor of a job did not end; killing it, and the job's processes may outlive it", "pid", p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-exited
	}
}

// bootTime reads CLOCK_BOOTTIME, in nanoseconds: the monotonic clock
// that also counts the time the machine was suspended, which Go's
// monotonic clock (CLOCK_MONOTONIC) and its timers do not.
func bootTime() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("clock_gettime(CLOCK_BOOTTIME): " + errno.Error()) // Linux has it since 2.6.39
	}
	return ts.Nano()
}

const clockBoottime = 7 // CLOCK_BOOTTIME, which package syscall does not name

// bootCheckInterval is how often the supervisor compares its deadline
// with CLOCK_BOOTTIME. The watchdog's timer fires on time while the
// machine runs; after the machine was suspended it would fire late by
// the time it slept (during which the lease ran on at the server), and
// this check catches that within an interval of the machine's waking.
const bootCheckInterval = 100 * time.Millisecond

// watch kills the job once CLOCK_BOOTTIME has passed the deadline.
func (sv *supervisor) watch() {
	t := time.NewTicker(bootCheckInterval)
	defer t.Stop()
	for range t.C {
		sv.smu.Lock()
		late := bootTime() >= sv.deadline
		sv.smu.Unlock()
		if late {
			sv.expire()
			return
		}
	}
}

// expire kills the job, once its lease has run out, and exits.
func (sv *supervisor) expire() {
	sv.smu.Lock()
	if sv.expired {
		sv.smu.Unlock()
		return // the other caller exits
	}
	sv.expired = true // no step starts, nor reports, any more
	sv.smu.Unlock()
	sv.kill()
	sv.report(supervisorReport{Expired: true})
	os.Exit(exitExpired)
}

// kill SIGKILLs every process of the job and returns once they are gone
// (or killWait has passed, which it reports on its stderr): in a sandbox
// every process of its PID namespace but its init and the supervisor,
// without one the supervisor's descendants, which include the processes
// that left their parents since the supervisor is their subreaper.
func (sv *supervisor) kill() {
	if !sv.plain {
		// All at once first: kill(-1) reaches every process the
		// supervisor may signal, and in the sandbox that is every
		// process of the job.
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
	deadline := time.Now().Add(killWait)
	for {
		left := sv.jobProcesses()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "supervisor: processes of the job outlived SIGKILL for %s: %v\n", killWait, left)
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// jobProcesses returns the live (not zombie) processes of the job.
func (sv *supervisor) jobProcesses() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	parent := map[int]int{}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it ended while we looked
		}
		// After the command name, in parentheses: state, ppid.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		if f[0] != "Z" && (sv.plain || pid != 1) {
			live = append(live, pid)
		}
	}
	if !sv.plain {
		return live
	}
	descends := func(pid int) bool {
		for seen := 0; pid > 1 && seen < len(parent)+1; seen++ {
			if pid = parent[pid]; pid == self {
				return true
			}
		}
		return false
	}
	var mine []int
	for _, pid := range live {
		if descends(pid) {
			mine = append(mine, pid)
		}
	}
	return mine
}
