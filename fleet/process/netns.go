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
// loopback is up. The namespace lives while the executor holds it or a
// process is in it.
//
// A network namespace belongs to a thread: the executor makes one on a
// thread of its own, and starts each process that joins it (bwrap) from
// a thread that joined it first, which the process inherits. Those
// threads are never given back to the Go runtime (runtime.LockOSThread
// without its Unlock): a goroutine that exits locked takes its thread
// with it, and no other goroutine ever runs in the namespace.
type netns struct {
	f *os.File // /proc/thread-self/ns/net of the thread that made it
}

// errNetnsNeedsRoot is why a job with services cannot run on an
// executor that is not root and gives jobs no network of the host's.
var errNetnsNeedsRoot = errors.New("a job's services share a network namespace with it, which only an executor running as root can make (or give jobs the host's network: Config.Sandbox.Network)")

// newNetns makes a network namespace with its loopback up.
func newNetns() (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, errNetnsNeedsRoot
	}
	type made struct {
		f   *os.File
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- made{err: fmt.Errorf("make a network namespace: %w", err)}
			return
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err == nil {
			if err = loopbackUp(); err != nil {
				_ = f.Close()
			}
		}
		c <- made{f, err}
	}()
	m := <-c
	if m.err != nil {
		return nil, m.err
	}
	return &netns{f: m.f}, nil
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

// do calls fn on a thread in the namespace: the processes fn starts and
// the sockets it opens are in it.
func (n *netns) do(fn func() error) error {
	c := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- fmt.Errorf("join the job's network namespace: %w", err)
			return
		}
		c <- fn()
	}()
	return <-c
}

// close lets the namespace go once no process is in it.
func (n *netns) close() {
	if n != nil {
		_ = n.f.Close()
	}
}
