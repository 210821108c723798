package process

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sandbox runs each job in a bubblewrap (bwrap) sandbox of its own: new
// user, PID, IPC, UTS, mount and (unless Network) network namespaces, in
// which the job's steps run one after another, as user cikit (uid 1000)
// with HOME=/tmp and host name cikit. Inside, the job sees
//
//   - the host paths of ReadOnly, read-only;
//   - its workspace, at the same path as on the host, the only host
//     directory it can write;
//   - a /tmp and /dev/shm of its own (tmpfs, in memory), shared by its
//     steps and gone with the job;
//   - a /proc showing only its own processes, a minimal /dev, and an
//     /etc/passwd and /etc/group that know only cikit and nobody;
//   - an empty, read-only root where everything else would be.
//
// Background processes a step starts live until the job ends, as
// without the sandbox; then every process in the sandbox is killed,
// including any that left its process group or session.
//
// On the host the job's processes run as UID:GID (when the executor runs
// as root) or as the executor's user, never as root, and the user
// namespace maps no other user. They have no capabilities, cannot gain
// any (no setuid programs, no_new_privs) and cannot create namespaces of
// their own. Limits bound what they may use. The sandbox does not make a shared kernel safe: see
// docs/isolation.md for what it protects against and what it does not.
type Sandbox struct {
	// Mode says what New does when the sandbox cannot be used. The zero
	// value is SandboxRequire.
	Mode SandboxMode
	// Network shares the host's network with jobs. By default a job has
	// a network namespace of its own with only a loopback interface: it
	// reaches nothing outside, not even services on the host's 127.0.0.1.
	Network bool
	// ReadOnly lists the host paths jobs see, read-only, at the same
	// place. A symbolic link is recreated as one; paths that do not exist
	// are skipped. They must be absolute, must not be / or lie in /tmp,
	// /proc or /dev (the sandbox has its own), and must not contain
	// Config.WorkRoot or lie within it. Default: DefaultReadOnly().
	ReadOnly []string
	// UID and GID are the host user and group jobs run as when the
	// executor runs as root; zero means DefaultSandboxUID and
	// DefaultSandboxGID. Concurrent jobs share them, but not their
	// namespaces or workspaces; a user of their own, which owns nothing
	// else on the host, is better than the default. An executor that
	// does not run as root runs jobs as its own user, and these must be
	// left zero.
	UID, GID int
	// Limits bound the resources of each job. The zero value sets none.
	Limits Limits
	// Bwrap is the bubblewrap program, a path or a name looked up in
	// PATH. Default: DefaultBwrap.
	Bwrap string
}

// SandboxMode says what New does when bubblewrap is missing or fails the
// self-check New runs: it starts a sandbox and runs a step in it.
type SandboxMode int

const (
	// SandboxRequire makes New fail. Its error wraps
	// ErrSandboxUnavailable when bubblewrap is missing or cannot create
	// a sandbox on this host.
	SandboxRequire SandboxMode = iota
	// SandboxAuto runs jobs as plain processes instead, without
	// isolation or limits. New logs a warning, and every job's output
	// starts with a line saying that it is not sandboxed and why.
	SandboxAuto
)

func (m SandboxMode) String() string {
	switch m {
	case SandboxRequire:
		return "require"
	case SandboxAuto:
		return "auto"
	}
	return "SandboxMode(" + strconv.Itoa(int(m)) + ")"
}

// Limits bound what a job's processes may use. Zero fields set no limit.
//
// Two mechanisms enforce them. Where the host delegates a cgroup v2
// hierarchy to the executor (its cgroup's parent is writable and enables
// the controllers; see findCgroup in cgroup.go, and docs/isolation.md),
// each job runs in a cgroup of its own, and JobMemory, Processes and
// CPUs bound the whole job (memory.max, pids.max, cpu.max). Otherwise
// Processes is RLIMIT_NPROC, which counts the whole job too, and
// JobMemory and CPUs cannot be enforced: New logs a warning and every
// job's header says so. CPUTime, Memory and FileSize are resource limits
// (setrlimit) in both cases, set on each step's process and inherited by
// every process it starts, so they apply per process. Every sandboxed
// job's output starts with a line stating the limits in force and by
// which mechanism. A step whose end points at a limit fails with a
// reason naming it. Neither bounds the job's disk use or its I/O.
type Limits struct {
	// CPUTime is the CPU time a process may use, rounded up to whole
	// seconds (RLIMIT_CPU). A process exceeding it is killed by SIGXCPU
	// (or SIGKILL a second later if it handles SIGXCPU).
	CPUTime time.Duration
	// Memory is the address space a process may map, in bytes
	// (RLIMIT_AS). Allocations beyond it fail; most programs then exit
	// with an error. Runtimes that reserve address space up front (the
	// JVM, Go's race detector) need far more than they use, so it is
	// off by default: JobMemory measures real memory instead.
	Memory int64
	// JobMemory is the real memory the whole job may use, in bytes:
	// resident memory, page cache and its /tmp and /dev/shm (its
	// cgroup's memory.max; it gets no swap). Past it the kernel kills a
	// process of the job, and the step fails saying so. It needs a
	// cgroup (see Limits).
	JobMemory int64
	// CPUs is how many CPUs' worth of time the job may use at once (its
	// cgroup's cpu.max): beyond it the job is throttled, not killed. It
	// needs a cgroup (see Limits).
	CPUs int
	// Processes is how many processes and threads the job may have at
	// once (its cgroup's pids.max, or RLIMIT_NPROC, which counts per
	// user in the job's user namespace). The sandbox's own init and
	// supervisor take about six of them, so it must be at least
	// MinProcesses. Creating one more fails.
	Processes int
	// FileSize is the largest file a process may write, in bytes
	// (RLIMIT_FSIZE). A process writing beyond it is killed by SIGXFSZ.
	FileSize int64
	// Tmp is the size in bytes of the job's /tmp and, separately, of its
	// /dev/shm. Both are in memory, which Memory does not cover and
	// JobMemory does. Default: the kernel's, half of the host's memory.
	Tmp int64
}

// DefaultLimits returns the limits `cikit serve` and `cikit runner` give
// each sandboxed job unless configured otherwise: enough for a real build
// (compilers, test binaries with the race detector, a JVM), not enough
// for a runaway job to take the host down.
//
//   - Processes: 1024, or 128 per CPU on larger hosts. It counts threads
//     and a Go program or JVM has dozens; a fork bomb stops there.
//   - JobMemory: 4 GiB for the whole job, with a cgroup (see Limits).
//   - CPUs: none; CPUTime bounds a runaway process instead.
//   - CPUTime: 4 hours per process, far beyond the default job timeout:
//     a backstop for jobs with long timeouts.
//   - Memory (address space): none, since it breaks Go's race detector
//     and JVMs.
//   - FileSize: 16 GiB per file.
//   - Tmp: 2 GiB each for /tmp and /dev/shm, which live in memory.
func DefaultLimits() Limits {
	return Limits{
		Processes: max(1024, 128*runtime.NumCPU()),
		JobMemory: 4 << 30,
		CPUTime:   4 * time.Hour,
		FileSize:  16 << 30,
		Tmp:       2 << 30,
	}
}

// Defaults and bounds for Sandbox.
const (
	DefaultBwrap      = "bwrap"
	DefaultSandboxUID = 65534 // nobody on Debian and most distributions
	DefaultSandboxGID = 65534 // nogroup
	// MinProcesses is the smallest Limits.Processes: the sandbox's
	// init and supervisor, a shell and a few commands.
	MinProcesses = 32
)

// DefaultReadOnly returns the host paths a sandbox shows by default: the
// system's programs, libraries and configuration.
func DefaultReadOnly() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}
}

// ErrSandboxUnavailable is wrapped by the errors of New (in
// SandboxRequire mode) when bubblewrap is not installed or cannot create
// a sandbox on this host, as opposed to a mistake in Config.
var ErrSandboxUnavailable = errors.New("the bubblewrap sandbox is unavailable")

// Inside every sandbox.
const (
	sandboxUser     = "cikit"
	sandboxUID      = 1000
	sandboxHostname = "cikit"
	sandboxHome     = "/tmp"
)

// sandboxStartTimeout bounds how long a sandbox may take to start.
const sandboxStartTimeout = 30 * time.Second

// sandboxPlan is a Sandbox resolved against the host by New.
type sandboxPlan struct {
	bwrap    string
	prlimit  string // "" when no rlimit is set
	uid, gid int    // the host user bwrap runs as; -1: the executor's own
	mounts   []roMount
	resolv   string // with Network and a symlinked /etc/resolv.conf: its target
	etc      bool   // /etc is among the mounts
	network  bool
	limits   Limits
	// cgroup is where jobs' cgroups are created; "" when the limits
	// need none or the host delegates none (noCgroup says why).
	cgroup, noCgroup string
	// hostPrograms returns, once resolved, how a job in an image runs
	// the host's programs it needs.
	hostPrograms func() (imageHost, error)
}

// roMount is a host path shown read-only, or a symlink recreated.
type roMount struct {
	path, symlink string
}

func validateSandbox(s *Sandbox, workRoot string) error {
	if s.Mode != SandboxRequire && s.Mode != SandboxAuto {
		return fmt.Errorf("Config.Sandbox.Mode %d is not SandboxRequire or SandboxAuto", s.Mode)
	}
	l := s.Limits
	if l.CPUTime < 0 || l.Memory < 0 || l.JobMemory < 0 || l.CPUs < 0 || l.Processes < 0 || l.FileSize < 0 || l.Tmp < 0 {
		return errors.New("Config.Sandbox.Limits must not be negative")
	}
	if l.Processes > 0 && l.Processes < MinProcesses {
		return fmt.Errorf("Config.Sandbox.Limits.Processes must be at least %d (MinProcesses): the sandbox's init and supervisor count too", MinProcesses)
	}
	if s.UID < 0 || s.GID < 0 {
		return errors.New("Config.Sandbox.UID and GID must not be negative")
	}
	if os.Geteuid() != 0 && (s.UID != 0 || s.GID != 0) {
		return fmt.Errorf("Config.Sandbox.UID and GID only apply to an executor running as root; this one runs as uid %d, which jobs then run as: leave them zero", os.Geteuid())
	}
	ro := s.ReadOnly
	if ro == nil {
		ro = DefaultReadOnly()
	}
	for _, p := range ro {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("Config.Sandbox.ReadOnly: %q is not an absolute path", p)
		}
		p = filepath.Clean(p)
		if p == "/" {
			return errors.New("Config.Sandbox.ReadOnly must not contain /: list the directories jobs need")
		}
		for _, own := range []string{"/tmp", "/proc", "/dev"} {
			if within(p, own) {
				return fmt.Errorf("Config.Sandbox.ReadOnly: %s lies in %s, which the sandbox replaces with its own", p, own)
			}
		}
		if within(workRoot, p) || within(p, workRoot) {
			return fmt.Errorf("Config.Sandbox.ReadOnly: %s overlaps Config.WorkRoot %s; jobs would see each other's workspaces", p, workRoot)
		}
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// planSandbox resolves s against this host: the programs it needs, the
// paths to show, the user to run as.
func planSandbox(s *Sandbox, workRoot string) (*sandboxPlan, error) {
	p := &sandboxPlan{uid: -1, gid: -1, network: s.Network, limits: s.Limits}
	p.hostPrograms = sync.OnceValues(p.planImageHost)
	p.cgroup, p.noCgroup = hostCgroup(s.Limits)
	var err error
	if p.bwrap, err = exec.LookPath(cmp.Or(s.Bwrap, DefaultBwrap)); err != nil {
		return nil, fmt.Errorf("%w: %v; install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap) or set Config.Sandbox.Bwrap", ErrSandboxUnavailable, err)
	}
	l := s.Limits
	if l.CPUTime > 0 || l.Memory > 0 || l.Processes > 0 || l.FileSize > 0 {
		// prlimit runs inside the sandbox, so it must come from a path
		// the sandbox shows; it is checked there by the self-check.
		if p.prlimit, err = exec.LookPath("prlimit"); err != nil {
			return nil, fmt.Errorf("%w: Config.Sandbox.Limits need prlimit (Debian: package util-linux): %v", ErrSandboxUnavailable, err)
		}
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		p.uid, p.gid = cmp.Or(s.UID, DefaultSandboxUID), cmp.Or(s.GID, DefaultSandboxGID)
		uid, gid = p.uid, p.gid
	}
	dir, mode, owner, err := unsearchable(workRoot, uid, gid)
	if err != nil {
		return nil, fmt.Errorf("Config.WorkRoot: %w", err)
	}
	if dir != "" {
		return nil, fmt.Errorf("the sandbox's user (uid %d, gid %d) cannot reach Config.WorkRoot %s: %s (mode %v, owner %d) does not let it search; allow it (chmod o+x %s) or choose another WorkRoot",
			uid, gid, workRoot, dir, mode, owner, dir)
	}
	ro := s.ReadOnly
	if ro == nil {
		ro = DefaultReadOnly()
	}
	for _, path := range ro {
		path = filepath.Clean(path)
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("Config.Sandbox.ReadOnly: %w", err)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return nil, fmt.Errorf("Config.Sandbox.ReadOnly: %w", err)
			}
			p.mounts = append(p.mounts, roMount{path: path, symlink: target})
		default:
			p.mounts = append(p.mounts, roMount{path: path})
			p.etc = p.etc || path == "/etc"
		}
	}
	if s.Network {
		// Where /etc/resolv.conf links elsewhere (systemd-resolved's
		// /run/systemd/resolve), the target is shown too.
		if target, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && (target != "/etc/resolv.conf" || !p.etc) {
			p.resolv = target
		}
	}
	return p, nil
}

// unsearchable returns the first directory on the way to dir that uid and
// gid (without supplementary groups) may not search, its mode and owner;
// "" if there is none. ACLs are not read: the self-check finds what they
// forbid.
func unsearchable(dir string, uid, gid int) (string, os.FileMode, int, error) {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return "", 0, 0, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", 0, 0, nil
		}
		perm := fi.Mode().Perm()
		var search bool
		switch {
		case int(st.Uid) == uid:
			search = perm&0o100 != 0
		case int(st.Gid) == gid:
			search = perm&0o010 != 0
		default:
			search = perm&0o001 != 0
		}
		if !search {
			return d, fi.Mode(), int(st.Uid), nil
		}
		if d == "/" {
			return "", 0, 0, nil
		}
	}
}

// The descriptors the sandbox's supervisor starts with, as
// exec.Cmd.ExtraFiles numbers them from 3.
const (
	fdControl = 3 + iota // a socket to the executor: requests in, reports out
	fdOutput             // the job's output pipe
	fdExe                // the executor's program, which the sandbox runs as its supervisor
	fdInfo               // bwrap's --info-fd: the sandbox's pid 1
	fdPasswd             // contents of /etc/passwd, /etc/group and /etc/hosts
	fdGroup
	fdHosts
)

// args returns bwrap's arguments for a job in ws that also sees the
// directories ro, read-only at the same paths, and runs in the image of
// im (nil: on the host's directories of the plan).
func (p *sandboxPlan) args(sp *sandboxSpec) ([]string, error) {
	itoa := strconv.Itoa
	ws, ro, im := sp.ws, sp.ro, sp.im
	uid, gid := sandboxUID, sandboxUID
	if im != nil {
		uid, gid = im.uid, im.gid
	}
	a := []string{
		"--unshare-user", "--uid", itoa(uid), "--gid", itoa(gid), "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", cmp.Or(sp.hostname, sandboxHostname),
		"--die-with-parent", "--new-session",
	}
	if !p.network && sp.net == nil {
		a = append(a, "--unshare-net")
	}
	supervisor := []string{"/proc/self/fd/" + itoa(fdExe)}
	if im == nil {
		for _, m := range p.mounts {
			if m.symlink != "" {
				a = append(a, "--symlink", m.symlink, m.path)
			} else {
				a = append(a, "--ro-bind", m.path, m.path)
			}
		}
		a = append(a,
			"--ro-bind-data", itoa(fdPasswd), "/etc/passwd",
			"--ro-bind-data", itoa(fdGroup), "/etc/group",
			"--ro-bind-data", itoa(fdHosts), "/etc/hosts")
		if p.resolv != "" {
			dst := p.resolv
			if !p.etc {
				dst = "/etc/resolv.conf"
			}
			a = append(a, "--ro-bind", p.resolv, dst)
		}
	} else {
		host, err := p.hostPrograms()
		if err != nil {
			return nil, err
		}
		for _, e := range im.entries {
			if e.symlink != "" {
				a = append(a, "--symlink", e.symlink, "/"+e.name)
			} else {
				a = append(a, "--bind", filepath.Join(im.img.Rootfs, e.name), "/"+e.name)
			}
		}
		if !im.passwd {
			a = append(a,
				"--ro-bind-data", itoa(fdPasswd), "/etc/passwd",
				"--ro-bind-data", itoa(fdGroup), "/etc/group")
		}
		a = append(a, "--ro-bind-data", itoa(fdHosts), "/etc/hosts")
		if p.network {
			if target, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil {
				a = append(a, "--ro-bind", target, "/etc/resolv.conf")
			}
		}
		for _, b := range host.binds {
			a = append(a, "--ro-bind", b.src, b.dst)
		}
		supervisor = host.supervisor
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		if p.limits.Tmp > 0 {
			a = append(a, "--size", strconv.FormatInt(p.limits.Tmp, 10))
		}
		a = append(a, "--tmpfs", dir)
	}
	if ws != "" {
		a = append(a, "--bind", ws, ws)
	}
	// After /tmp's tmpfs and the workspace, which could hold them.
	for _, dir := range ro {
		a = append(a, "--ro-bind", dir, dir)
	}
	a = append(a,
		"--remount-ro", "/",
		"--chdir", cmp.Or(ws, "/"),
		"--info-fd", itoa(fdInfo),
		"--")
	return append(append(a, supervisor...), supervisorArg), nil
}

// imageHost is what the sandbox of a job in an image needs of the host
// to run the host's programs there: the command lines of the supervisor
// and of prlimit (nil without rlimits), and the files to show for them.
type imageHost struct {
	supervisor, prlimit []string
	binds               []hostBind
}

// planImageHost resolves imageHost for the plan's host; see
// planHostProgram.
func (p *sandboxPlan) planImageHost() (imageHost, error) {
	// The program running now, by a path that names it in the loader
	// asked for its libraries too.
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/exe"
	sv, err := planHostProgram(self, "/proc/self/fd/"+strconv.Itoa(fdExe))
	if err != nil {
		return imageHost{}, fmt.Errorf("running the supervisor in an image: %w", err)
	}
	h := imageHost{supervisor: sv.argv}
	binds := sv.binds
	if p.prlimit != "" {
		inside := path.Join(hostDir, "prlimit")
		pl, err := planHostProgram(p.prlimit, inside)
		if err != nil {
			return imageHost{}, fmt.Errorf("running prlimit in an image: %w", err)
		}
		h.prlimit = pl.argv
		binds = append(append(binds, hostBind{p.prlimit, inside}), pl.binds...)
	}
	seen := map[string]bool{}
	for _, b := range binds {
		if !seen[b.dst] {
			seen[b.dst] = true
			h.binds = append(h.binds, b)
		}
	}
	return h, nil
}

// files returns the contents bwrap puts at /etc/passwd, /etc/group and
// /etc/hosts, which ends with the lines extraHosts.
func (p *sandboxPlan) files(hostname, extraHosts string) [3]string {
	passwd := fmt.Sprintf("%s:x:%d:%d:cikit job:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		sandboxUser, sandboxUID, sandboxUID, sandboxHome)
	group := fmt.Sprintf("%s:x:%d:\nnogroup:x:65534:\n", sandboxUser, sandboxUID)
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if p.network {
		// With the host's network, its names resolve as on the host.
		if b, err := readPrefix("/etc/hosts", 32<<10); err == nil {
			hosts = string(b)
			if hosts != "" && !strings.HasSuffix(hosts, "\n") {
				hosts += "\n"
			}
		}
	}
	hosts += "127.0.1.1\t" + cmp.Or(hostname, sandboxHostname) + "\n" + extraHosts
	return [3]string{passwd, group, hosts}
}

func readPrefix(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// sandboxEnv returns the variables the sandbox sets over the executor's.
func sandboxEnv() []string {
	return []string{"HOME=" + sandboxHome, "TMPDIR=/tmp", "USER=" + sandboxUser, "LOGNAME=" + sandboxUser}
}

// wrap returns argv run under the plan's rlimits, by prlimit: the
// command line that runs prlimit in the sandbox.
func (p *sandboxPlan) wrap(prlimit, argv []string) []string {
	if p.prlimit == "" {
		return argv
	}
	l := p.limits
	a := slices.Clone(prlimit)
	if l.CPUTime > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later for a
		// process that handles it.
		s := cpuSeconds(l.CPUTime)
		a = append(a, fmt.Sprintf("--cpu=%d:%d", s, s+1))
	}
	if l.Memory > 0 {
		a = append(a, "--as="+strconv.FormatInt(l.Memory, 10))
	}
	if l.Processes > 0 && p.cgroup == "" {
		a = append(a, "--nproc="+strconv.Itoa(l.Processes))
	}
	if l.FileSize > 0 {
		a = append(a, "--fsize="+strconv.FormatInt(l.FileSize, 10))
	}
	return append(append(a, "--"), argv...)
}

func cpuSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// cause names the limit a failed step's end points at, or returns "".
// x is how the step's process ended; tasks is how many processes and
// threads the job had then.
func (l Limits) cause(x stepExit) string {
	is := func(sig syscall.Signal) bool {
		// A shell reports a command killed by a signal as 128+signal.
		return x.signal == sig || x.signal == 0 && x.code == 128+int(sig)
	}
	switch {
	case l.CPUTime > 0 && is(syscall.SIGXCPU):
		return fmt.Sprintf("a process exceeded the CPU time limit of %ds (Sandbox.Limits.CPUTime)", cpuSeconds(l.CPUTime))
	case l.FileSize > 0 && is(syscall.SIGXFSZ):
		return fmt.Sprintf("a process exceeded the file size limit of %s (Sandbox.Limits.FileSize)", bytesString(l.FileSize))
	case l.Processes > 0 && x.tasks+1 >= l.Processes:
		// The step's own process has ended, so the job had one more
		// when it failed.
		return fmt.Sprintf("the job was at its limit of %d processes and threads (Sandbox.Limits.Processes)", l.Processes)
	case l.Memory > 0:
		// Allocations refused by RLIMIT_AS leave no trace but the
		// program's own message, so this can only be a hint.
		return fmt.Sprintf("if it ran out of memory: each process may map at most %s (Sandbox.Limits.Memory)", bytesString(l.Memory))
	}
	return ""
}

// header returns the line every sandboxed job's output starts with: the
// limits in force and what enforces each, and those that cannot be.
// cgroup says whether the job has a cgroup of its own.
func (l Limits) header(cgroup bool) string {
	var in, not []string
	add := func(set bool, what, how string) {
		if set {
			in = append(in, what+" ("+how+")")
		}
	}
	add(l.Processes > 0 && !cgroup, fmt.Sprintf("processes %d", l.Processes), "rlimit")
	add(l.Processes > 0 && cgroup, fmt.Sprintf("processes %d", l.Processes), "cgroup pids.max")
	add(l.JobMemory > 0 && cgroup, "memory "+bytesString(l.JobMemory), "cgroup memory.max")
	add(l.CPUs > 0 && cgroup, fmt.Sprintf("CPUs %d", l.CPUs), "cgroup cpu.max")
	add(l.CPUTime > 0, fmt.Sprintf("CPU time %s per process", time.Duration(cpuSeconds(l.CPUTime))*time.Second), "rlimit")
	add(l.Memory > 0, "address space "+bytesString(l.Memory)+" per process", "rlimit")
	add(l.FileSize > 0, "file size "+bytesString(l.FileSize), "rlimit")
	add(l.Tmp > 0, "/tmp and /dev/shm "+bytesString(l.Tmp)+" each", "tmpfs")
	if l.JobMemory > 0 && !cgroup {
		not = append(not, "memory "+bytesString(l.JobMemory))
	}
	if l.CPUs > 0 && !cgroup {
		not = append(not, fmt.Sprintf("CPUs %d", l.CPUs))
	}
	line := "--- limits: "
	if len(in) == 0 {
		line += "none"
	} else {
		line += strings.Join(in, ", ")
	}
	if len(not) > 0 {
		line += "; NOT ENFORCED (no cgroup v2 delegated to this runner): " + strings.Join(not, ", ")
	}
	return line + "\n"
}

func bytesString(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// sandboxJob is one job's sandbox, seen from the executor: bwrap, the
// sandbox's pid 1, and the connection to the supervisor that runs the
// job's steps inside.
type sandboxJob struct {
	plan *sandboxPlan
	// prlimit is the command line that runs prlimit in the sandbox.
	prlimit []string
	// notFound ends the error of a step whose program is not in its
	// PATH: where it was looked for.
	notFound string
	grace    time.Duration
	cmd      *exec.Cmd   // bwrap, outside the sandbox
	init     *os.Process // the sandbox's pid 1, held by a pidfd
	cgroup   *jobCgroup  // nil: no cgroup of its own
	conn     net.Conn
	enc      *json.Encoder
	stderr   *prefixBuffer

	// Steps may run at once (a service and its health checks): each
	// run waits on the channel of its step's ID, to which read passes
	// the step's one report.
	mu      sync.Mutex // guards lastID and waiting; serializes requests
	lastID  int
	waiting map[int]chan supervisorReport

	ready      chan struct{} // closed at the supervisor's ready report
	expired    chan struct{} // closed at its expired report
	readErr    error         // why the reports ended; read after readerDone
	stop       chan struct{}
	readerDone chan struct{}
}

// sandboxSpec is what one sandbox holds beyond what the plan gives
// every sandbox: a job's, or a service's.
type sandboxSpec struct {
	// ws is the directory bound at its own path, where the sandbox
	// starts; "" for none (a service's sandbox starts at /).
	ws string
	// ro are more directories it sees read-only.
	ro []string
	// im is the image it runs in; nil: the host's directories.
	im *imagePlan
	// out receives the output of what runs in it.
	out *os.File
	// net is the network namespace it joins, a job's with services;
	// nil: its own, or the host's with Sandbox.Network.
	net *netns
	// hostname is its host name, "" for sandboxHostname; hosts are
	// lines added to its /etc/hosts (the names of a job's services).
	hostname, hosts string
}

// startSandbox starts the sandbox sp says and returns once its
// supervisor is ready.
func (e *Executor) startSandbox(ctx context.Context, sp *sandboxSpec) (*sandboxJob, error) {
	p := e.sandbox
	im, out := sp.im, sp.out
	s := &sandboxJob{plan: p, grace: e.cfg.Grace, stderr: &prefixBuffer{max: 4 << 10}, prlimit: []string{p.prlimit},
		notFound: " in the sandbox; is its directory in Config.Sandbox.ReadOnly?"}
	args, err := p.args(sp)
	if err != nil {
		return nil, err
	}
	if im != nil {
		host, _ := p.hostPrograms() // args had no error from it
		s.prlimit = host.prlimit
		s.notFound = " in the image " + imageName(im.img)
	}
	// The parent's copies of what the sandbox gets; closed when it has
	// them, or on failure.
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	closers = append(closers, mine, theirs)
	if s.conn, err = net.FileConn(mine); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	closers = append(closers, closerFunc(func() error {
		if s.cmd == nil || s.cmd.Process == nil {
			return s.conn.Close() // not started: nothing else will
		}
		return nil
	}))
	// The program running now, even if its file was replaced since.
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("opening the executor's program to run as the sandbox's supervisor: %w", err)
	}
	closers = append(closers, exe)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	closers = append(closers, infoR, infoW)
	files := []*os.File{theirs, out, exe, infoW}
	for _, content := range p.files(sp.hostname, sp.hosts) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		closers = append(closers, r, w)
		// Far below a pipe's buffer, so this does not block.
		if _, err := io.WriteString(w, content); err != nil {
			return nil, err
		}
		_ = w.Close()
		files = append(files, r)
	}

	s.cmd = exec.Command(p.bwrap, args...)
	// Wait returns even if a process of the sandbox that outlived
	// bwrap holds its stderr.
	s.cmd.WaitDelay = killWait
	s.cmd.Env = []string{supervisorEnv + "=1"}
	s.cmd.Dir = "/"
	s.cmd.Stderr = s.stderr
	s.cmd.ExtraFiles = files
	// A group of its own keeps a terminal's ^C for the executor, which
	// cancels jobs its own way.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.uid >= 0 {
		s.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid), Groups: []uint32{}}
	}
	if p.cgroup != "" {
		// bwrap starts in the job's cgroup (clone3's CLONE_INTO_CGROUP),
		// so nothing of the job ever runs outside it.
		if s.cgroup, err = newJobCgroup(p.cgroup, p.limits); err != nil {
			return nil, err
		}
		s.cmd.SysProcAttr.UseCgroupFD, s.cmd.SysProcAttr.CgroupFD = true, int(s.cgroup.fd.Fd())
	}
	start := s.cmd.Start
	if sp.net != nil {
		start = func() error { return sp.net.do(s.cmd.Start) }
	}
	if err := start(); err != nil {
		if s.cgroup != nil {
			s.cgroup.remove()
		}
		return nil, fmt.Errorf("%w: starting %s: %v", ErrSandboxUnavailable, p.bwrap, err)
	}
	if s.cgroup != nil {
		_ = s.cgroup.fd.Close()
		s.cgroup.fd = nil
	}
	// bwrap has its copies: without the parent's, the info pipe ends
	// when bwrap does.
	_ = infoW.Close()

	deadline := time.Now().Add(sandboxStartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	fail := func(err error) (*sandboxJob, error) {
		s.abort()
		return nil, s.explain(err)
	}
	// bwrap reports its pid 1 once the namespaces exist; killing it
	// kills everything in the sandbox.
	_ = infoR.SetReadDeadline(deadline)
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err != nil || info.ChildPID <= 0 {
		return fail(fmt.Errorf("no pid from bwrap --info-fd: %v", err))
	}
	if s.init, err = os.FindProcess(info.ChildPID); err != nil {
		return fail(err)
	}
	if err := s.awaitReady(ctx, time.Until(deadline)); err != nil {
		return fail(err)
	}
	return s, nil
}

// awaitReady starts reading the supervisor's reports on s.conn and waits
// up to timeout for its first, which must say it is ready.
func (s *sandboxJob) awaitReady(ctx context.Context, timeout time.Duration) error {
	s.enc = json.NewEncoder(s.conn)
	s.waiting = map[int]chan supervisorReport{}
	s.ready, s.expired = make(chan struct{}), make(chan struct{})
	s.stop = make(chan struct{})
	s.readerDone = make(chan struct{})
	go s.read()

	ready := time.NewTimer(timeout)
	defer ready.Stop()
	select {
	case <-s.ready:
	case <-s.readerDone:
		return s.readErr
	case <-ready.C:
		return errors.New("the supervisor did not start in time")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// explain adds what bwrap said to err, the reason a sandbox did not
// start, and marks errors of bwrap's own as ErrSandboxUnavailable.
func (s *sandboxJob) explain(err error) error {
	msg := strings.TrimSpace(s.stderr.String())
	if strings.HasPrefix(msg, "bwrap:") {
		return fmt.Errorf("%w: bubblewrap could not create the sandbox: %s (it needs unprivileged user namespaces: sysctl user.max_user_namespaces must be above 0, and on Ubuntu AppArmor must allow bwrap to create them)",
			ErrSandboxUnavailable, msg)
	}
	return fmt.Errorf("the sandbox did not start: %w%s", err, s.said())
}

// said returns what the sandbox wrote to its stderr, such as a crashed
// supervisor's panic, for an error message.
func (s *sandboxJob) said() string {
	if msg := strings.TrimSpace(s.stderr.String()); msg != "" {
		return "; it said: " + msg
	}
	return ""
}

// read forwards the supervisor's reports until the connection ends. What
// the supervisor sends is as untrusted as the job: lines are bounded.
func (s *sandboxJob) read() {
	defer close(s.readerDone)
	sc := bufio.NewScanner(s.conn)
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	first, expired := true, false
	for sc.Scan() {
		var r supervisorReport
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			s.readErr = fmt.Errorf("unreadable report from the sandbox's supervisor: %w", err)
			return
		}
		switch {
		case first:
			if !r.Ready {
				s.readErr = errors.New("the supervisor did not start with a ready report")
				return
			}
			first = false
			close(s.ready)
		case r.Expired:
			if !expired {
				expired = true
				close(s.expired)
			}
		default:
			s.mu.Lock()
			c := s.waiting[r.ID]
			delete(s.waiting, r.ID)
			s.mu.Unlock()
			if c != nil {
				c <- r // buffered: a step has one report
			}
		}
	}
	s.readErr = sc.Err()
	if s.readErr == nil {
		s.readErr = io.EOF
	}
	s.readErr = fmt.Errorf("the sandbox's supervisor ended: %w", s.readErr)
}

func (s *sandboxJob) request(r supervisorRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enc.Encode(r); err != nil {
		return fmt.Errorf("the sandbox's supervisor ended: %w", err)
	}
	return nil
}

// run runs argv in the sandbox; see jobProcs.
func (s *sandboxJob) run(ctx context.Context, argv []string, dir string, env []string) (stepExit, error) {
	s.mu.Lock()
	s.lastID++
	id := s.lastID
	reported := make(chan supervisorReport, 1)
	s.waiting[id] = reported
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	if err := s.request(supervisorRequest{ID: id, Argv: s.plan.wrap(s.prlimit, argv), Env: env, Dir: dir}); err != nil {
		return stepExit{code: -1}, err
	}
	// read passes reports on in the supervisor's order: a report of the
	// step's that came before the end of the reports is taken first.
	ended := func(r supervisorReport) stepExit {
		return stepExit{code: r.Code, signal: syscall.Signal(r.Signal), tasks: r.Tasks}
	}
	reportOf := func(r supervisorReport) (stepExit, error) {
		switch {
		case r.NotFound:
			return stepExit{code: -1}, errors.New(r.Err + s.notFound)
		case r.Err != "":
			return stepExit{code: -1}, errors.New(r.Err)
		}
		return ended(r), nil
	}
	done := ctx.Done()
	// After the grace period, SIGKILL; killWait later, the supervisor
	// has not reported the step's end (the job can stop it: it runs as
	// the same user), and the step is given up on; the job's end kills
	// what is left.
	timer := time.NewTimer(s.grace)
	timer.Stop()
	defer timer.Stop()
	var sent syscall.Signal
	send := func(sig syscall.Signal, next time.Duration) error {
		sent = sig
		timer.Reset(next)
		return s.request(supervisorRequest{ID: id, Signal: int(sig)})
	}
	for {
		var err error
		select {
		case r := <-reported:
			return reportOf(r)
		case <-s.expired:
			select {
			case r := <-reported:
				return reportOf(r)
			default:
			}
			return stepExit{code: -1}, errLeaseExpired
		case <-s.readerDone:
			select {
			case r := <-reported:
				return reportOf(r)
			default:
			}
			select {
			case <-s.expired:
				return stepExit{code: -1}, errLeaseExpired
			default:
			}
			return stepExit{code: -1}, fmt.Errorf("%w%s", s.readErr, s.said())
		case <-done:
			done = nil
			err = send(syscall.SIGTERM, s.grace)
		case <-timer.C:
			if sent == syscall.SIGKILL {
				return stepExit{code: -1}, errors.New("the sandbox's supervisor did not report the end of the step after SIGKILL")
			}
			err = send(syscall.SIGKILL, killWait)
		}
		if err != nil {
			return stepExit{code: -1}, err
		}
	}
}

// end kills every process in the sandbox and returns when they are gone.
// The kernel kills a PID namespace's processes when its pid 1 dies, and
// that pid 1 only becomes a zombie after the last of them is gone. Its
// pid 1 is killed first: if the supervisor ended first, bwrap would exit
// at once and leave the namespace's end to the kernel's own pace.
func (s *sandboxJob) end(warn func(msg string, args ...any)) {
	_ = s.init.Kill()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = s.cmd.Wait()
	}()
	deadline := time.NewTimer(killWait)
	defer deadline.Stop()
	select {
	case <-exited:
	case <-deadline.C:
		warn("the sandbox of a job outlived it", "bwrap_pid", s.cmd.Process.Pid)
	}
	for !processGone(s.init.Pid) {
		select {
		case <-deadline.C:
			warn("the sandbox of a job outlived it", "pid", s.init.Pid)
			s.close()
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.close()
}

// abort ends a sandbox that did not finish starting. Before bwrap has
// said which process is the sandbox's pid 1, that process is found as
// bwrap's child: killed before it has its namespaces set up, bwrap would
// leave it waiting for them forever, holding the stderr pipe that Wait
// reads to its end.
func (s *sandboxJob) abort() {
	if s.init != nil {
		_ = s.init.Kill()
	} else {
		for _, pid := range childrenOf(s.cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if s.init != nil {
		for deadline := time.Now().Add(killWait); !processGone(s.init.Pid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	s.close()
}

// oomKills is jobCgroup.oomKills of the job's cgroup; 0 for s nil (plain
// processes) or without a cgroup.
func (s *sandboxJob) oomKills() int {
	if s == nil {
		return 0
	}
	return s.cgroup.oomKills()
}

// close releases what the executor holds of a sandbox that has ended.
func (s *sandboxJob) close() {
	if s.cgroup != nil {
		s.cgroup.remove()
	}
	if s.stop != nil {
		close(s.stop)
	}
	_ = s.conn.Close()
	if s.readerDone != nil {
		<-s.readerDone
	}
	if s.init != nil {
		_ = s.init.Release()
	}
}

// prefixBuffer keeps the first max bytes written to it. exec.Cmd writes
// to it from a goroutine of its own.
type prefixBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (p *prefixBuffer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (p *prefixBuffer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.b)
}

// childrenOf returns the pids of the children of process pid, as
// /proc/<pid>/task/<pid>/children lists them; none when it cannot be read.
func childrenOf(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}
