package supervisor

// poolWorker is what the pool needs of a worker: *worker is the real one,
// and the pool's tests use workers in memory.
type poolWorker interface {
	comparable
	// learnedSet is the kind of worker: the learned set of packages it has
	// loaded (see learn.go), "" for a plain one.
	learnedSet() string
	// readiness says how soon it can take a call (see standby.go).
	readiness() readiness
	// restoreEnded is closed once the restore of a worker started on
	// standby has ended, made or failed; nil for a worker started restored.
	restoreEnded() <-chan struct{}
	// ended is closed once its process has ended.
	ended() <-chan struct{}
	// dead reports whether its process has ended.
	dead() bool
	// kill ends it, and returns once it is reaped.
	kill()
	// pid, exitStatus and stderrTail describe it in logs.
	pid() int
	exitStatus() string
	stderrTail() string
}

// pool is the supervisor's pool, of deno workers.
type pool = workerPool[*worker]

// The methods of poolWorker that *worker does not have for itself.

func (w *worker) learnedSet() string     { return w.kind }
func (w *worker) ended() <-chan struct{} { return w.exited }
func (w *worker) pid() int               { return w.proc.Pid() }

func (w *worker) restoreEnded() <-chan struct{} {
	if w.standby == nil {
		return nil
	}
	return w.standby.done
}
