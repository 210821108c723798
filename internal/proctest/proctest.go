// Package proctest helps tests check that processes they caused are gone.
package proctest

import (
	"bytes"
	"os"
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
