package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
)

func runnerCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlags("runner", "runner -server URL [flags]\n\nRuns jobs for a cikit server: registers with the registration token (from\n-registration-token or CIKIT_REGISTRATION_TOKEN), then claims jobs matching its\nlabels and runs each as local processes in a fresh copy of -source. SIGINT or\nSIGTERM stops it: the current job gets -shutdown-grace to finish, then it is\ncancelled and given back to the server.\n\nEach job runs in a bubblewrap sandbox of its own (-sandbox): its own user,\nprocesses and network, a read-only view of the system and only its workspace\nwritable, with the -limit-* flags bounding its resources. It shares the host's\nkernel: see docs/isolation.md for what that means. With -sandbox auto (the\ndefault) a host without a working bubblewrap runs jobs unsandboxed, with a\nwarning in the runner's log and in every job's output.", stderr)
	server := fs.String("server", "", "the server's base URL")
	token := fs.String("registration-token", os.Getenv("CIKIT_REGISTRATION_TOKEN"), "the registration token")
	name := fs.String("name", hostname(), "the runner's name")
	labels := fs.String("labels", "", "comma-separated labels, such as linux,x64")
	source := fs.String("source", "", "the directory copied into each job's workspace (default: an empty one)")
	workRoot := fs.String("work-root", "", "where workspaces are created (default: the temporary directory)")
	grace := fs.Duration("grace", process.DefaultGrace, "how long a cancelled step gets between SIGTERM and SIGKILL")
	shutdownGrace := fs.Duration("shutdown-grace", agent.DefaultShutdownGrace, "how long the current job may go on after SIGINT or SIGTERM")
	sandboxMode := fs.String("sandbox", "auto", "auto: run jobs in a bubblewrap sandbox if it works here, else unsandboxed with a warning;\nrequire: refuse to start without it; off: run jobs as plain processes of this user")
	network := fs.Bool("network", false, "give sandboxed jobs the host's network (by default they reach nothing, not even the host's 127.0.0.1)")
	var limits process.Limits
	fs.DurationVar(&limits.CPUTime, "limit-cpu", 0, "the CPU time each process of a sandboxed job may use (0: no limit)")
	fs.Var((*byteSize)(&limits.Memory), "limit-memory", "the memory (address space) each process of a sandboxed job may map, such as 4G (0: no limit)")
	fs.IntVar(&limits.Processes, "limit-processes", 0, fmt.Sprintf("how many processes and threads a sandboxed job may have at once, at least %d (0: no limit)", process.MinProcesses))
	fs.Var((*byteSize)(&limits.FileSize), "limit-file-size", "the largest file a process of a sandboxed job may write, such as 10G (0: no limit)")
	fs.Var((*byteSize)(&limits.Tmp), "limit-tmp", "the size of a sandboxed job's /tmp and of its /dev/shm, both in memory, such as 1G (default: half of the memory)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *server == "" || *token == "" {
		fmt.Fprintln(stderr, "cikit runner: -server and a registration token are required")
		return ExitInvalid
	}
	var sandbox *process.Sandbox
	switch *sandboxMode {
	case "auto":
		sandbox = &process.Sandbox{Mode: process.SandboxAuto, Network: *network, Limits: limits}
	case "require":
		sandbox = &process.Sandbox{Mode: process.SandboxRequire, Network: *network, Limits: limits}
	case "off":
		if limits != (process.Limits{}) {
			fmt.Fprintln(stderr, "cikit runner: the -limit-* flags need the sandbox; use -sandbox auto or require")
			return ExitInvalid
		}
	default:
		fmt.Fprintf(stderr, "cikit runner: -sandbox must be auto, require or off, not %q\n", *sandboxMode)
		return ExitInvalid
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	src := *source
	if src == "" {
		dir, err := os.MkdirTemp("", "cikit-runner-source-")
		if err != nil {
			fmt.Fprintf(stderr, "cikit runner: %v\n", err)
			return ExitFailed
		}
		defer os.RemoveAll(dir)
		src = dir
	}
	// Jobs get the runner's environment, but not the token that lets
	// anyone register runners.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CIKIT_REGISTRATION_TOKEN=") })
	exec, err := process.New(process.Config{Source: src, WorkRoot: *workRoot, Grace: *grace, Env: env, Logger: log, Sandbox: sandbox})
	if err != nil {
		fmt.Fprintf(stderr, "cikit runner: %v\n", err)
		return ExitInvalid
	}
	var ls []string
	for l := range strings.SplitSeq(*labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	a, err := agent.New(agent.Config{Server: *server, RegistrationToken: *token, Name: *name, Labels: ls,
		Executor: agent.ProcessExecutor{Executor: exec}, ShutdownGrace: *shutdownGrace, Logger: log, Version: version()})
	if err != nil {
		fmt.Fprintf(stderr, "cikit runner: %v\n", err)
		return ExitInvalid
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "cikit runner: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "runner"
	}
	return h
}

// byteSize is a flag holding a number of bytes, written with an optional
// binary unit: 512M, 2G and 2GiB are the same as 2147483648.
type byteSize int64

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	n, unit := int64(*b), ""
	for _, u := range []string{"K", "M", "G", "T"} {
		if n == 0 || n%1024 != 0 {
			break
		}
		n, unit = n/1024, u
	}
	return strconv.FormatInt(n, 10) + unit
}

func (b *byteSize) Set(s string) error {
	num := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i")
	shift := 0
	if i := strings.IndexAny(num, "KMGTkmgt"); i >= 0 && i == len(num)-1 {
		shift = 10 * (1 + strings.IndexByte("KMGT", strings.ToUpper(num[i:])[0]))
		num = num[:i]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<63-1)>>shift {
		return fmt.Errorf("%q is not a size such as 512M, 4G or a number of bytes", s)
	}
	*b = byteSize(n << shift)
	return nil
}
