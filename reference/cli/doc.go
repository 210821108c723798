// Package cli implements the `cikit` command: its subcommands, flags,
// output and exit codes. main only calls Main.
//
// # Exit codes
//
//	0    success
//	1    the pipeline failed or is blocked by a manual job (run), or has
//	     findings (lint)
//	2    invalid configuration or usage
//	130  the run was interrupted (SIGINT or SIGTERM) and cancelled
package cli
