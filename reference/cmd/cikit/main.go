// Command cikit is the cikit platform and its command-line tool: run a
// pipeline locally, lint pipeline files, and (later) serve the platform.
// See `cikit help`.
package main

import (
	"context"
	"os"

	"github.com/cikit/cikit/reference/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
