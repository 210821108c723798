// Package expr parses and evaluates the two expression languages of the
// pipeline formats the compiler reads: GitHub Actions expressions and
// GitLab CI/CD variable expressions.
//
// # What it owns
//
// The meaning of an expression: its grammar, its positioned syntax tree,
// its values and how they compare and convert, its functions, and what can
// be told about it before it runs. It knows nothing of workflow files: the
// compiler finds the expressions, maps the byte offsets reported here to
// lines and columns, and decides which contexts and functions a place
// allows. It is pure: no I/O, no clock, no globals that change; hashFiles
// is a callback.
//
// # GitHub Actions expressions
//
// ParseGitHub reads the text inside ${{ }} (or a bare if: condition) into
// a tree of Literal, Context, Property, Index, Not, Binary and Call nodes.
// SplitTemplate cuts a string with embedded ${{ }} into literal and
// expression segments; EvalTemplate evaluates one whole. EvalGitHub
// evaluates against a GitHubEnv, with GitHub's semantics: names of
// contexts, properties and functions ignore case; == converts mismatched
// kinds to numbers (null is 0, booleans 1 and 0, strings are parsed, NaN
// when they are not numbers), compares strings ignoring case and arrays
// and objects by instance; && and || return an operand, not a boolean;
// x.* and x[*] filter objects and arrays, and accesses after them apply to
// every element. The functions are contains, startsWith, endsWith,
// format, join, toJSON, fromJSON, hashFiles, case, and the status
// functions success, failure, cancelled and always.
//
// CheckGitHub finds, without evaluating, what is certainly wrong (unknown
// functions, wrong argument counts, unknown contexts), with a "did you
// mean" for each. References lists the context paths an expression reads
// (matrix.os, needs.build.outputs.version), for the compiler to check
// matrix keys, needs and inputs.
//
// # GitLab CI/CD variable expressions
//
// ParseGitLab reads a rules:if or only:variables expression: $VAR and
// ${VAR}, quoted strings, null, ==, !=, =~ and !~ with /regexp/flags in
// RE2 syntax, && binding tighter than ||, and parentheses. EvalGitLab
// evaluates it against the pipeline's variables; VariableRefs lists the
// variables it reads.
//
// # Three-valued evaluation
//
// The compiler evaluates what it can when it compiles and leaves the rest
// to the scheduler, so evaluation is three-valued: besides the ordinary
// values, a result can be Unknown. For GitHub, a context listed in
// GitHubEnv.Unknown (needs and steps, typically), or a value Unknown
// inside a known context, makes whatever depends on it Unknown, and
// status functions are Unknown without a Status. Known parts still
// decide where they can: false && needs.x.result is false, true || x is
// true, always() is true. For GitLab, EvalGitLabPartial is told which
// variables are not known yet, and && and || follow three-valued logic:
// Unknown && False is False, Unknown || True is True.
//
// Unknown is a Tri, the type of GitLab's results and of Condition, which
// reads a GitHub value as a condition: True, False or Unknown.
//
// # Positions and errors
//
// Nodes carry byte offsets into the source they were parsed from. Syntax
// errors are *SyntaxError and evaluation errors *EvalError, each with such
// an offset and a message that says what was expected or what would be
// right. CheckGitHub returns Problems, not errors: they are findings
// about a file, for the compiler to report as diagnostics.
//
// Expressions come from untrusted files. The parsers do not panic on any
// input and keep GitHub's and GitLab's limits on length, nesting and
// tokens; evaluation bounds the strings it builds.
//
// # Stability
//
// The exported names are stable. Syntax trees may gain node types and
// fields in later versions, as the languages grow; code that walks them
// should ignore what it does not know. Messages may be reworded. What an
// expression means follows GitHub's and GitLab's documentation; where
// their implementations differ from it, the documentation wins, and the
// differences known are noted at the functions.
package expr
