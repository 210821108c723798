package process

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A job's supervisor is the executor's own program: the program that
// imports this package is started with these marks, in the sandbox or,
// without one, beside the job, and init below turns it into the
// supervisor before main runs. supervisorEnv is "1" in a sandbox and
// supervisorPlain without one.
const (
	supervisorEnv   = "CIKIT_SANDBOX_SUPERVISOR"
	supervisorArg   = "cikit-sandbox-supervisor"
	supervisorPlain = "plain"
)

// exitExpired is the supervisor's exit code when the job's lease ran out:
// it killed the job.
const exitExpired = 3

func init() {
	if len(os.Args) == 2 && os.Args[1] == supervisorArg {
		switch os.Getenv(supervisorEnv) {
		case "1":
			os.Exit(supervise(false))
		case supervisorPlain:
			os.Exit(supervise(true))
		}
	}
}

// supervisorRequest asks the supervisor to start a step (Argv), to
// signal a started step's process group (Signal), or passes on a
// confirmed renewal of the job's lease (Lease): the job may run for
// Remaining nanoseconds more, counted from when the supervisor reads it.
// The first renewal arms the supervisor's watchdog (see watchdog.go).
type supervisorRequest struct {
	ID        int      `json:"id"`
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	Signal    int      `json:"signal,omitempty"`
	Lease     bool     `json:"lease,omitempty"`
	Remaining int64    `json:"remaining_ns,omitempty"`
}

// supervisorReport is the supervisor's answer: ready once, then for each
// step either Err (it did not start) or Exited; Expired, last, when the
// job's lease ran out and the supervisor killed the job.
type supervisorReport struct {
	Ready   bool   `json:"ready,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	ID      int    `json:"id,omitempty"`
	Err     string `json:"err,omitempty"`
	// NotFound marks an Err saying the step's program is not in its
	// PATH, which the executor explains.
	NotFound bool `json:"not_found,omitempty"`
	Exited   bool `json:"exited,omitempty"`
	Code     int  `json:"code"`             // -1 when killed by a signal
	Signal   int  `json:"signal,omitempty"` // the signal that killed it
	Tasks    int  `json:"tasks,omitempty"`  // processes and threads in the sandbox after it ended
}

// supervisor runs in the sandbox, or beside a job without one: it starts
// the steps the executor asks for, each in a process group of its own,
// signals those groups, and reports how steps ended; once given the
// job's lease, it kills the job when the lease runs out. In a sandbox it
// runs as the job's user, so it trusts nothing the job could have changed
// and holds nothing the job may not.
type supervisor struct {
	out   *os.File
	plain bool // not in a sandbox: the job's processes are its descendants

	mu  sync.Mutex // serializes reports
	enc *json.Encoder

	smu      sync.Mutex  // guards groups, deadline and expired
	groups   map[int]int // step ID → process group
	deadline int64       // of the job's lease, in bootTime nanoseconds; zero: none
	expired  bool        // the job is killed: nothing more starts or reports
}

// supervise is the supervisor's main: it returns when the executor
// closes the connection, having killed the job's processes without a
// sandbox (in one, the sandbox's end does), and exits by itself when
// the job's lease runs out.
func supervise(plain bool) int {
	// Its threads count against Limits.Processes: keep them few.
	runtime.GOMAXPROCS(1)
	// The job's processes run as the same user; a process that is not
	// dumpable cannot be traced by them, nor its descriptors opened.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "supervisor: prctl(PR_SET_DUMPABLE):", errno)
		return 1
	}
	if plain {
		// The job's processes that leave their parents (daemons,
		// double forks, setsid) become the supervisor's children
		// rather than init's, so that it can find and kill them.
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
			fmt.Fprintln(os.Stderr, "supervisor: prctl(PR_SET_CHILD_SUBREAPER):", errno)
			return 1
		}
	}
	// Steps get the output pipe as stdout and stderr and nothing else
	// of the supervisor's: not the connection, not the program.
	if err := closeOnExecAbove(2); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor: listing open descriptors:", err)
		return 1
	}
	f := os.NewFile(fdControl, "control")
	conn, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor: control socket:", err)
		return 1
	}
	sv := &supervisor{out: os.NewFile(fdOutput, "output"), plain: plain, enc: json.NewEncoder(conn), groups: map[int]int{}}
	sv.report(supervisorReport{Ready: true})
	var watchdog *time.Timer // armed by the first renewal, with sv.watch
	dec := json.NewDecoder(conn)
	for {
		var r supervisorRequest
		if err := dec.Decode(&r); err != nil {
			// The executor is done with the job, or it is gone.
			if plain {
				sv.kill()
			}
			return 0
		}
		switch {
		case r.Lease:
			d := time.Duration(r.Remaining)
			sv.smu.Lock()
			sv.deadline = bootTime() + int64(d)
			sv.smu.Unlock()
			if watchdog == nil {
				watchdog = time.AfterFunc(d, sv.expire)
				go sv.watch()
			} else {
				watchdog.Reset(d)
			}
		case r.Signal != 0:
			sv.smu.Lock()
			if g, ok := sv.groups[r.ID]; ok {
				_ = syscall.Kill(-g, syscall.Signal(r.Signal))
			}
			sv.smu.Unlock()
		default:
			sv.start(r)
		}
	}
}

func (sv *supervisor) report(r supervisorReport) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	_ = sv.enc.Encode(r)
}

func (sv *supervisor) start(r supervisorRequest) {
	if len(r.Argv) == 0 {
		sv.report(supervisorReport{ID: r.ID, Err: "empty command"})
		return
	}
	path, err := lookPath(r.Argv[0], r.Env)
	notFound := err != nil
	if err == nil && r.Dir != "" {
		// Without this, exec says the program does not exist.
		if fi, serr := os.Stat(r.Dir); serr != nil || !fi.IsDir() {
			err = fmt.Errorf("working directory %q does not exist", r.Dir)
		}
	}
	if err == nil {
		cmd := &exec.Cmd{Path: path, Args: r.Argv, Env: r.Env, Dir: r.Dir, Stdout: sv.out, Stderr: sv.out,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
		sv.smu.Lock()
		if sv.expired || sv.deadline != 0 && bootTime() >= sv.deadline {
			// The lease has run out, even if the watchdog's timer has
			// not fired yet: the job is killed, and the supervisor
			// exits.
			sv.smu.Unlock()
			sv.expire()
			return
		}
		err = cmd.Start()
		if err == nil {
			sv.groups[r.ID] = cmd.Process.Pid
		}
		sv.smu.Unlock()
		if err == nil {
			go sv.wait(r.ID, cmd)
			return
		}
	}
	sv.report(supervisorReport{ID: r.ID, Err: err.Error(), NotFound: notFound})
}

func (sv *supervisor) wait(id int, cmd *exec.Cmd) {
	_ = cmd.Wait()
	r := supervisorReport{ID: id, Exited: true, Code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = int(ws.Signal())
	}
	r.Tasks = countTasks()
	sv.smu.Lock()
	expired := sv.expired
	sv.smu.Unlock()
	if !expired {
		// A step killed with the job is reported as the job's expiry.
		sv.report(r)
	}
}

// lookPath finds name as a shell would, in the PATH of env (the last
// one, as exec.Cmd uses the last of duplicate variables).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH (%s)", name, path)
}

// countTasks counts the processes and threads in the sandbox: all of
// /proc there, the job's user's tasks in its user namespace, which is
// what RLIMIT_NPROC bounds.
func countTasks() int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		if tasks, err := os.ReadDir("/proc/" + p.Name() + "/task"); err == nil {
			n += len(tasks)
		}
	}
	return n
}

// closeOnExecAbove marks every open descriptor above fd close-on-exec.
func closeOnExecAbove(fd int) error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > fd {
			syscall.CloseOnExec(n)
		}
	}
	return nil
}
