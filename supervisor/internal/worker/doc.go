// Package worker owns the deno worker processes: starting one (Starter,
// with the bridge it connects to, the run directory of its DENO_DIR, its
// sandbox's Policy and the launcher of its process), making its
// interpreter at once or later from standby, recycling its process for the
// next call, reading its stderr, memory and CPU time, and the bounds of a
// session's worker between calls.
//
// It must not know calls, packages or the pool's choices: the pool sees a
// Worker through pool.Worker, and what a snapshot or a runtime is comes
// from runtimefiles; whether a runtime is still current, and what to do
// with a snapshot a worker could not restore from, are handed in.
package worker
