// Package runtimefiles owns what every worker starts from, on disk: the
// cache directory's layout, the worker program written out, Pyodide
// installed by deno's npm resolution, the memory snapshots and their file
// format, the code cache templates and workers' private DENO_DIRs, the
// run directory, the holds on the cache's entries and its pruning, and the
// Keeper that builds, repairs and hands out the runtime.
//
// It must not know workers, the bridge, the pool or calls: a snapshot is
// made by the worker that Maker.Snapshot starts, the sandbox's paths are
// checked by Maker.Check, and what a build does is the supervisor's
// (Builds). The installer a runtime carries is only handed on (Ready's P).
package runtimefiles
