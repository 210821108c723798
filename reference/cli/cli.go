package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// Exit codes of the cikit command.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitInvalid     = 2
	ExitInterrupted = 130
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands are the cikit commands; those that read input read stdin.
func commands(stdin io.Reader) []command {
	return []command{
		{"run", "run the pipeline of a directory locally", runCmd},
		{"lint", "check pipeline files and print findings", lintCmd},
		{"graph", "print a pipeline's job graph as Mermaid or DOT", graphCmd},
		{"runner", "run jobs for a cikit server", runnerCmd},
		{"serve", "run the cikit platform (embedded by default)", serveCmd},
		{"migrate", "apply the PostgreSQL schema migrations", migrateCmd},
		{"bench", "run the platform's scenario benchmarks and print a table", benchCmd},
		{"secret", "set, list and delete the secrets of a cikit server", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return secretCmd(ctx, args, stdin, stdout, stderr)
		}},
		{"version", "print the version", versionCmd},
	}
}

// Main runs the cikit command with args (without the program name) and
// returns its exit code. Commands that read input read os.Stdin.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return MainIO(ctx, args, os.Stdin, stdout, stderr)
}

// MainIO is Main with the standard input to read.
func MainIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return ExitInvalid
		}
		return ExitOK
	}
	for _, c := range commands(stdin) {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "cikit: unknown command %q\n\n", args[0])
	usage(stderr)
	return ExitInvalid
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "cikit — build, run and check CI pipelines.\n\nUsage: cikit <command> [flags]\n\nCommands:")
	for _, c := range commands(nil) {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'cikit <command> -h' for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cikit %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and returns the exit code to return now, or -1 to go
// on.
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitInvalid
	}
	return -1
}

func versionCmd(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "cikit", version())
	return ExitOK
}

// version is the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
