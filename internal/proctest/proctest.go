// Package proctest helps tests check that processes they caused are gone.
package proctest

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Alive reports whether process pid exists and is not a zombie. A killed
// process whose parent has not reaped it yet is a zombie: it runs nothing
// and holds nothing, so it counts as gone.
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// No /proc (or the process just ended): ask the kernel.
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain spaces and parentheses.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// Running returns the host pids of the live processes whose command line
// is args, such as "sleep", "1001.5". It finds processes whose pids the
// test cannot know, such as those inside a PID namespace; a command line
// unique to the test makes the answer the test's own.
func Running(args ...string) []int {
	want := []byte(strings.Join(args, "\x00") + "\x00")
	return matching(func(cmdline []byte) bool { return bytes.Equal(cmdline, want) })
}

// Containing returns the host pids of the live processes whose command
// line contains s, such as a directory only the test's processes name.
func Containing(s string) []int {
	return matching(func(cmdline []byte) bool { return bytes.Contains(cmdline, []byte(s)) })
}

// matching returns the pids of the live processes whose command line (its
// arguments, each ended by NUL) match says yes to, in order. Without /proc
// it finds none.
func matching(match func(cmdline []byte) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && match(cmdline) && Alive(pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
