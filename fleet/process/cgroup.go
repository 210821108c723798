package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where the host delegates a cgroup v2 hierarchy to the executor, each
// sandboxed job runs in a cgroup of its own, created beside the
// executor's: Limits.JobMemory, Processes and CPUs become its memory.max,
// pids.max and cpu.max, which bound the whole job and measure real
// memory. The executor's cgroup must not be the hierarchy's root, and its
// parent must be writable with the controllers enabled in its
// cgroup.subtree_control: systemd gives a service that with Delegate=yes
// and DelegateSubgroup= (the service runs in the subgroup, jobs' cgroups
// go beside it). Elsewhere (cgroup v1 hosts, no delegation) the executor
// uses rlimits, and says so in every job's header.

// cgroupJobPrefix names the cgroups the executor creates.
const cgroupJobPrefix = "cikit-job-"

// findCgroup returns the directory in which the executor may create its
// jobs' cgroups with the controllers need, given the contents of
// /proc/self/cgroup and /proc/self/mountinfo; or "" and why not.
func findCgroup(selfCgroup, mountinfo string, need []string) (string, string) {
	var own string
	for line := range strings.Lines(selfCgroup) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", "the host has no cgroup v2 hierarchy for this process (cgroup v1)"
	}
	var mount, root string
	for line := range strings.Lines(mountinfo) {
		// id parent major:minor root mount-point options... - type source ...
		pre, post, ok := strings.Cut(line, " - ")
		f, typ := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(typ) > 0 && typ[0] == "cgroup2" {
			root, mount = f[3], f[4]
			break
		}
	}
	if mount == "" {
		return "", "no cgroup v2 file system is mounted"
	}
	rel, ok := strings.CutPrefix(own, root)
	if !ok {
		return "", fmt.Sprintf("this process's cgroup %s is outside the mounted cgroup v2 hierarchy", own)
	}
	rel = strings.Trim(rel, "/")
	if rel == "" {
		return "", "this process is in the cgroup v2 hierarchy's root, which delegates nothing"
	}
	parent := filepath.Join(mount, filepath.Dir(rel))
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return "", fmt.Sprintf("the parent of this process's cgroup: %v", err)
	}
	have := strings.Fields(string(b))
	for _, c := range need {
		if !slices.Contains(have, c) {
			return "", fmt.Sprintf("%s/cgroup.subtree_control does not enable the %s controller (it enables %q)", parent, c, strings.Join(have, " "))
		}
	}
	if err := syscall.Access(parent, 2 /* W_OK */); err != nil {
		return "", fmt.Sprintf("%s is not writable by this process (not delegated to it)", parent)
	}
	return parent, ""
}

// hostCgroup is findCgroup on this host, for limits l; "" when l needs
// no cgroup.
func hostCgroup(l Limits) (string, string) {
	var need []string
	if l.Processes > 0 {
		need = append(need, "pids")
	}
	if l.JobMemory > 0 {
		need = append(need, "memory")
	}
	if l.CPUs > 0 {
		need = append(need, "cpu")
	}
	if len(need) == 0 {
		return "", ""
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err.Error()
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err.Error()
	}
	return findCgroup(string(self), string(mi), need)
}

// jobCgroup is the cgroup of one job.
type jobCgroup struct {
	dir string
	fd  *os.File // open while the sandbox starts: bwrap is cloned into it
}

// newJobCgroup creates a job's cgroup under parent with limits l.
func newJobCgroup(parent string, l Limits) (*jobCgroup, error) {
	dir, err := os.MkdirTemp(parent, cgroupJobPrefix)
	if err != nil {
		return nil, fmt.Errorf("job cgroup: %w", err)
	}
	cg := &jobCgroup{dir: dir}
	write := func(file, value string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
	}
	var errs []error
	if l.Processes > 0 {
		errs = append(errs, write("pids.max", strconv.Itoa(l.Processes)))
	}
	if l.JobMemory > 0 {
		errs = append(errs, write("memory.max", strconv.FormatInt(l.JobMemory, 10)))
		// The job gets no swap: memory.max is then what it may use.
		if err := write("memory.swap.max", "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if l.CPUs > 0 {
		errs = append(errs, write("cpu.max", fmt.Sprintf("%d 100000", l.CPUs*100000)))
	}
	if err := errors.Join(errs...); err != nil {
		cg.remove()
		return nil, fmt.Errorf("job cgroup %s: %w", dir, err)
	}
	if cg.fd, err = os.Open(dir); err != nil {
		cg.remove()
		return nil, fmt.Errorf("job cgroup: %w", err)
	}
	return cg, nil
}

// oomKills returns how many processes of the job the kernel has killed
// for its memory limit so far; 0 without a cgroup.
func (cg *jobCgroup) oomKills() int {
	if cg == nil {
		return 0
	}
	f, err := os.Open(filepath.Join(cg.dir, "memory.events"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// remove removes the cgroup once the job's processes are gone: the
// kernel refuses while a process is in it, and a killed process leaves
// it a moment after its parent saw it die.
func (cg *jobCgroup) remove() {
	if cg.fd != nil {
		_ = cg.fd.Close()
	}
	for deadline := time.Now().Add(killWait); ; time.Sleep(5 * time.Millisecond) {
		err := os.Remove(cg.dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			return
		}
	}
}
