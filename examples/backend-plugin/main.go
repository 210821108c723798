// Command backend-plugin is a runner backend served as a plugin (package
// fleet/plugin): a complete one, to copy and change. Its runners are
// runner agents in its own process; see backend.go for where a backend of
// machines in a cloud does otherwise, and README.md for how to run it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cikit/cikit/fleet/plugin"
)

func main() {
	labels := flag.String("labels", "", "comma-separated labels the runners may have; empty: any")
	maxRunners := flag.Int("max-runners", 0, "how many runners may be alive at once; 0: no bound")
	wait := flag.Duration("wait", 0, "how long a runner's claim waits for work (default the agent's)")
	flag.Parse()
	cfg := config{MaxRunners: *maxRunners, Wait: *wait, Logger: plugin.NewLogger()}
	if *labels != "" {
		cfg.Labels = strings.Split(*labels, ",")
	}
	if cfg.MaxRunners < 0 || cfg.Wait < 0 {
		fmt.Fprintln(os.Stderr, "backend-plugin: -max-runners and -wait must not be negative")
		os.Exit(2)
	}
	plugin.Serve(newBackend(cfg))
}
