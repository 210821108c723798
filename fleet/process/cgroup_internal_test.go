package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindCgroup: the cgroup v2 detection, on files laid out as a host
// shows them: the executor's cgroup from /proc/self/cgroup, the
// hierarchy's mount from /proc/self/mountinfo, and the controllers its
// parent enables.
func TestFindCgroup(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	parent := filepath.Join(mnt, "system.slice", "cikit.service")
	require.NoError(t, os.MkdirAll(filepath.Join(parent, "runner"), 0o755))
	subtree := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(s+"\n"), 0o644))
	}
	mountinfo := "25 30 0:23 / /sys rw,nosuid - sysfs sysfs rw\n" +
		"41 31 0:38 / " + mnt + " rw,relatime - cgroup2 cgroup2 rw\n"
	self := "0::/system.slice/cikit.service/runner\n"
	v1 := "9:name=systemd:/\n8:pids:/\n7:blkio:/\n"
	need := []string{"pids", "memory", "cpu"}

	subtree("cpu memory pids")
	dir, why := findCgroup(self, mountinfo, need)
	require.Equal(t, parent, dir, why)

	for _, tc := range []struct {
		name, self, mountinfo, subtree, why string
	}{
		{"cgroup v1 host", v1, mountinfo, "cpu memory pids", "no cgroup v2 hierarchy"},
		// This host: cgroup v1, and an empty v2 at /sys/fs/cgroup/unified.
		{"v1 with an empty unified hierarchy", v1 + "0::/\n", mountinfo, "cpu memory pids", "the cgroup v2 hierarchy's root"},
		{"no cgroup2 mount", self, "25 30 0:23 / /sys rw - sysfs sysfs rw\n", "cpu memory pids", "no cgroup v2 file system is mounted"},
		{"controller missing", self, mountinfo, "memory pids", "does not enable the cpu controller"},
		{"nothing enabled", self, mountinfo, "", "does not enable the pids controller"},
		{"outside the mount", "0::/elsewhere/runner\n", strings.Replace(mountinfo, " / "+mnt, " /system.slice "+mnt, 1), "cpu memory pids", "outside the mounted cgroup v2 hierarchy"},
	} {
		subtree(tc.subtree)
		dir, why := findCgroup(tc.self, tc.mountinfo, need)
		require.Empty(t, dir, tc.name)
		require.Contains(t, why, tc.why, tc.name)
	}

	// Only the controllers the limits use are needed.
	subtree("memory pids")
	dir, why = findCgroup(self, mountinfo, []string{"pids", "memory"})
	require.Equal(t, parent, dir, why)
}

// TestLimitsHeader: the header names each limit's mechanism, and what a
// host without a cgroup cannot enforce.
func TestLimitsHeader(t *testing.T) {
	t.Parallel()
	l := Limits{Processes: 512, JobMemory: 4 << 30, CPUs: 2, FileSize: 1 << 30}
	require.Equal(t, "--- limits: processes 512 (cgroup pids.max), memory 4 GiB (cgroup memory.max), CPUs 2 (cgroup cpu.max), file size 1 GiB (rlimit)\n", l.header(true))
	require.Equal(t, "--- limits: processes 512 (rlimit), file size 1 GiB (rlimit); NOT ENFORCED (no cgroup v2 delegated to this runner): memory 4 GiB, CPUs 2\n", l.header(false))
	require.Equal(t, "--- limits: none\n", Limits{}.header(false))
}

// TestCgroupOOMKills: a step's failure is put down to the memory limit by
// the oom_kill count of memory.events, as the kernel writes it.
func TestCgroupOOMKills(t *testing.T) {
	t.Parallel()
	cg := &jobCgroup{dir: t.TempDir()}
	require.Equal(t, 0, cg.oomKills(), "no memory.events")
	require.NoError(t, os.WriteFile(filepath.Join(cg.dir, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644))
	require.Equal(t, 2, cg.oomKills())
	require.Equal(t, 0, (*jobCgroup)(nil).oomKills())
	require.Equal(t, 0, (*sandboxJob)(nil).oomKills())
}
