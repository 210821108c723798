// Package reference is the cikit reference platform: the packages of the
// module wired into one deployable system and the `cikit` command.
//
// Library packages never import reference; it is the only place that may
// depend on frameworks, flags and process-wide concerns such as signals.
package reference
