package process

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// netns is a network namespace the executor made for one job and its
// services: they all join it, so that the job reaches its services on
// 127.0.0.1, and nothing else, as with a sandbox's own namespace. Its
// loopback is up. The namespace lives while a process is in it.
//
// A network namespace belongs to a thread: the executor makes one on a
// thread of its own, which stays in it until close, and starts each
// process that joins it (bwrap) on that thread, which the process
// inherits. The thread must outlive those processes: bwrap's
// --die-with-parent (PR_SET_PDEATHSIG) kills it when the thread that
// started it ends. The thread is never given back to the Go runtime
// (runtime.LockOSThread without its Unlock): a goroutine that exits
// locked takes its thread with it, and no other goroutine ever runs in
// the namespace.
type netns struct {
	reqs chan func()
}

// errNetnsNeedsRoot is why a job with services cannot run on an
// executor that is not root and gives jobs no network of the host's.
var errNetnsNeedsRoot = errors.New("a job's services share a network namespace with it, which only an executor running as root can make (or give jobs the host's network: Config.Sandbox.Network)")

// newNetns makes a network namespace with its loopback up.
func newNetns() (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, errNetnsNeedsRoot
	}
	n := &netns{reqs: make(chan func())}
	made := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := unix.Unshare(unix.CLONE_NEWNET)
		if err != nil {
			err = fmt.Errorf("make a network namespace: %w", err)
		} else {
			err = loopbackUp()
		}
		made <- err
		if err != nil {
			return
		}
		for fn := range n.reqs {
			fn()
		}
	}()
	if err := <-made; err != nil {
		return nil, err
	}
	return n, nil
}

// loopbackUp brings up the loopback interface of the calling thread's
// network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up the loopback interface: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up the loopback interface: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up the loopback interface: %w", err)
	}
	return nil
}

// do calls fn on the namespace's thread: the processes fn starts and
// the sockets it opens are in the namespace. Calls are serialized.
func (n *netns) do(fn func() error) error {
	c := make(chan error, 1)
	n.reqs <- func() { c <- fn() }
	return <-c
}

// close ends the namespace's thread, once every process it started has
// ended; the namespace goes with the last of them.
func (n *netns) close() {
	if n != nil {
		close(n.reqs)
	}
}
