package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/reference/config"
)

func runnerCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlags("runner", "runner -server URL [flags]\n\nRuns jobs for a cikit server: registers with the registration token (from\n-registration-token or CIKIT_REGISTRATION_TOKEN), then claims jobs matching its\nlabels and runs each as local processes in a fresh copy of -source. SIGINT or\nSIGTERM stops it: the current job gets -shutdown-grace to finish, then it is\ncancelled and given back to the server.\n\nEach job runs in a bubblewrap sandbox of its own (-sandbox): its own user,\nprocesses and network, a read-only view of the system and only its workspace\nwritable, with the -limit-* flags bounding its resources. It shares the host's\nkernel: see docs/isolation.md for what that means. Without a working bubblewrap\nthe runner refuses to start unless -sandbox off says to run jobs unsandboxed.\n\nA job naming an image (GitLab's image:, GitHub's container:) runs in it: the\nrunner pulls it into -image-dir and gives the job a view of its own of the\nimage's root file system, in the sandbox, with no container engine. -image-for\nand -default-image give images to jobs that name none; -host-jobs says whether\na job left without one runs on the host. With -sandbox off no job runs in an\nimage.\n\nA job's environment is built from scratch: PATH, HOME, USER, LOGNAME, TMPDIR,\nLANG, LANGUAGE, LC_* and TZ from the runner's, the variables -pass-env names,\nthen the job's context and its own env; nothing else of the runner's.", stderr)
	server := fs.String("server", "", "the server's base URL")
	token := fs.String("registration-token", os.Getenv("CIKIT_REGISTRATION_TOKEN"), "the registration token")
	name := fs.String("name", hostname(), "the runner's name")
	labels := fs.String("labels", strings.Join(config.DefaultLabels(), ","), "comma-separated labels, such as linux,x64")
	source := fs.String("source", "", "a fixed directory copied into the workspace of each job that checks out nothing: jobs of a run of a repository get their commit instead (default: an empty one)")
	gitCache := fs.String("git-cache", "", "the directory of the runner's cache of git objects, from which jobs' commits are checked out (default: cikit/git under the user's cache directory)")
	workRoot := fs.String("work-root", "", "where workspaces are created (default: the temporary directory)")
	grace := fs.Duration("grace", process.DefaultGrace, "how long a cancelled step gets between SIGTERM and SIGKILL")
	shutdownGrace := fs.Duration("shutdown-grace", agent.DefaultShutdownGrace, "how long the current job may go on after SIGINT or SIGTERM")
	sandboxMode := fs.String("sandbox", "auto", "auto or require: run jobs in a bubblewrap sandbox and refuse to start without one;\noff: run jobs as plain processes of this user, for trusted code only")
	network := fs.Bool("network", false, "give sandboxed jobs the host's network (by default they reach nothing, not even the host's 127.0.0.1)")
	passEnv := fs.String("pass-env", "", "comma-separated names of more variables of the runner's environment that jobs get")
	limits := process.DefaultLimits()
	fs.DurationVar(&limits.CPUTime, "limit-cpu", limits.CPUTime, "the CPU time each process of a sandboxed job may use (0: no limit)")
	fs.Var((*byteSize)(&limits.JobMemory), "limit-job-memory", "the real memory a sandboxed job may use, such as 4G; needs a delegated cgroup v2 (0: no limit)")
	fs.IntVar(&limits.CPUs, "limit-cpus", limits.CPUs, "how many CPUs' worth of time a sandboxed job may use at once; needs a delegated cgroup v2 (0: no limit)")
	fs.Var((*byteSize)(&limits.Memory), "limit-memory", "the address space each process of a sandboxed job may map, such as 8G; Go's race detector and JVMs need far more than they use (0: no limit)")
	fs.IntVar(&limits.Processes, "limit-processes", limits.Processes, fmt.Sprintf("how many processes and threads a sandboxed job may have at once, at least %d (0: no limit)", process.MinProcesses))
	fs.Var((*byteSize)(&limits.FileSize), "limit-file-size", "the largest file a process of a sandboxed job may write, such as 10G (0: no limit)")
	fs.Var((*byteSize)(&limits.Tmp), "limit-tmp", "the size of a sandboxed job's /tmp and of its /dev/shm, both in memory, such as 1G (0: the kernel's default, half of the memory)")
	imgs := addImageFlags(fs, false)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	limitSet := false
	fs.Visit(func(f *flag.Flag) { limitSet = limitSet || strings.HasPrefix(f.Name, "limit-") })
	if *server == "" || *token == "" {
		fmt.Fprintln(stderr, "cikit runner: -server and a registration token are required")
		return ExitInvalid
	}
	var sandbox *process.Sandbox
	switch *sandboxMode {
	case "auto", "require":
		// Never unsandboxed unless -sandbox off says so.
		sandbox = &process.Sandbox{Mode: process.SandboxRequire, Network: *network, Limits: limits}
	case "off":
		if limitSet {
			fmt.Fprintln(stderr, "cikit runner: the -limit-* flags need the sandbox; use -sandbox auto or require")
			return ExitInvalid
		}
		if given := imgs.given(); len(given) > 0 {
			fmt.Fprintf(stderr, "cikit runner: %s: jobs run in images only in the sandbox, and -sandbox is off (its jobs run on the host, and a job naming an image fails); use -sandbox auto or require\n", strings.Join(given, ", "))
			return ExitInvalid
		}
	default:
		fmt.Fprintf(stderr, "cikit runner: -sandbox must be auto, require or off, not %q\n", *sandboxMode)
		return ExitInvalid
	}
	var images *process.Images
	if sandbox != nil {
		var err error
		if images, err = imgs.images(); err != nil {
			fmt.Fprintf(stderr, "cikit runner: %v\n", err)
			return ExitInvalid
		}
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
	cache := *gitCache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "cikit", "git")
	}
	co, err := checkout.New(checkout.Config{CacheDir: cache})
	if err != nil {
		fmt.Fprintf(stderr, "cikit runner: -git-cache: %v\n", err)
		return ExitInvalid
	}
	exec, err := process.New(process.Config{Source: src, WorkRoot: *workRoot, Grace: *grace, PassEnv: splitList(*passEnv), Logger: log, Sandbox: sandbox,
		Images: images, Checkout: co})
	if err != nil {
		fmt.Fprintf(stderr, "cikit runner: %v\n", err)
		if errors.Is(err, process.ErrSandboxUnavailable) {
			fmt.Fprintln(stderr, "cikit runner: refusing to run jobs unsandboxed; to run them as plain processes of this user, for trusted code only, use -sandbox off")
		}
		return ExitInvalid
	}
	defer func() {
		if err := exec.Close(); err != nil {
			log.Warn("releasing the image directory", "err", err)
		}
	}()
	a, err := agent.New(agent.Config{Server: *server, RegistrationToken: *token, Name: *name, Labels: splitList(*labels),
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

// splitList splits a comma-separated flag's value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
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
