package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
)

func runnerCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlags("runner", "runner -server URL [flags]\n\nRuns jobs for a cikit server: registers with the registration token (from\n-registration-token or CIKIT_REGISTRATION_TOKEN), then claims jobs matching its\nlabels and runs each as local processes in a fresh copy of -source. SIGINT or\nSIGTERM stops it: the current job gets -shutdown-grace to finish, then it is\ncancelled and given back to the server.", stderr)
	server := fs.String("server", "", "the server's base URL")
	token := fs.String("registration-token", os.Getenv("CIKIT_REGISTRATION_TOKEN"), "the registration token")
	name := fs.String("name", hostname(), "the runner's name")
	labels := fs.String("labels", "", "comma-separated labels, such as linux,x64")
	source := fs.String("source", "", "the directory copied into each job's workspace (default: an empty one)")
	workRoot := fs.String("work-root", "", "where workspaces are created (default: the temporary directory)")
	grace := fs.Duration("grace", process.DefaultGrace, "how long a cancelled step gets between SIGTERM and SIGKILL")
	shutdownGrace := fs.Duration("shutdown-grace", agent.DefaultShutdownGrace, "how long the current job may go on after SIGINT or SIGTERM")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *server == "" || *token == "" {
		fmt.Fprintln(stderr, "cikit runner: -server and a registration token are required")
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
	exec, err := process.New(process.Config{Source: src, WorkRoot: *workRoot, Grace: *grace, Logger: log})
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
