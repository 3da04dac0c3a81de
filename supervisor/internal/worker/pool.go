package worker

import "github.com/mcp-run-python/mcp-run-python/supervisor/internal/pool"

// The methods of pool.Worker that *Worker does not have for itself.

// LearnedSet is the worker's kind: the learned set of packages it started
// from (see install.Learner), "" for a plain one.
func (w *Worker) LearnedSet() string { return w.Kind }

// Ended is closed once the worker's process has ended.
func (w *Worker) Ended() <-chan struct{} { return w.exited }

// Pid is the worker process's id, for logs.
func (w *Worker) Pid() int { return w.Proc.Pid() }

// RestoreEnded is closed once the restore of a worker started on standby
// has ended (see standby.go); nil for a worker started restored.
func (w *Worker) RestoreEnded() <-chan struct{} {
	if w.standby == nil {
		return nil
	}
	return w.standby.done
}

// Readiness says how soon w can take a call.
func (w *Worker) Readiness() pool.Readiness {
	switch {
	case w.standby == nil || w.standby.made():
		return pool.Restored
	case w.standby.asked.Load():
		return pool.Restoring
	default:
		return pool.OnStandby
	}
}
