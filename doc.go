// Package cikit is the shared vocabulary of the cikit packages: job and run
// states, the job specification that travels from the compiler to a runner,
// and the sentinel errors callers branch on.
//
// It imports no other cikit package, so every package can depend on it and a
// value defined here means the same thing everywhere: in the compiler's
// output, in a store's rows, on the runner wire and in the reference API.
//
// # The packages
//
//   - compiler turns pipeline files into a Plan of JobSpecs and a dag.Graph.
//   - dag holds the job graph, the scheduling rules and the job stores.
//   - fleet runs jobs; fleet/process runs them as local processes.
//   - reference wires everything into the cikit platform and CLI.
//
// # Stability
//
// The JSON form of JobSpec is stored with every job, so a rebuild of an old
// commit uses the pipeline as it was compiled then. Fields are only added,
// never renamed or repurposed.
package cikit
