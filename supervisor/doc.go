// Package supervisor keeps a pool of sandboxed Deno workers that run Python
// through Pyodide, hands one to each call, and retires it afterwards so every
// call starts from a pristine interpreter.
//
// It is the facade (Supervisor, Session, their Config, Request and Result)
// and a call's life: its steps (pipeline.go) in a pooled or a session's
// interpreter, its time limit, progress, output, files, tool calls and the
// questions its code asks of the model and the person (asks.go). The rest
// is in packages of their own, which it wires together and which reach
// nothing back up: internal/pool hands out warm workers,
// internal/worker starts and recycles them, internal/install resolves and
// installs a call's packages and learns package sets, internal/runtimefiles
// keeps what every worker starts from on disk, and internal/tracker counts
// what runs until Close.
package supervisor
