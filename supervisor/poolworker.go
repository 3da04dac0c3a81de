package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/pool"
)

// workerPool is the supervisor's pool, of deno workers (see package pool).
type workerPool = pool.Pool[*Worker]

// The methods of pool.Worker that *worker does not have for itself.

// LearnedSet is the worker's kind: the learned set of packages it started
// from (see learn.go), "" for a plain one.
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

// pingTimeout bounds how long a warm worker may take to answer before it
// gets a call. An idle interpreter answers in well under a millisecond; a
// loaded machine can delay it by tens; a frozen or wedged worker never does.
const pingTimeout = time.Second

// takeWorker takes a warm worker that proves it is alive: one that does not
// answer at once (stopped, wedged) is replaced, and the call goes to the
// next. Each try takes a different worker, so a pool of frozen workers
// costs a call at most one pingTimeout a worker.
func (s *Supervisor) takeWorker(ctx context.Context, principal, kind string) (*Worker, error) {
	for try := 0; ; try++ {
		w, err := s.pool.Acquire(ctx, principal, kind, progressFrom(ctx).queued)
		if err != nil {
			return nil, err
		}
		if w.standby != nil && !w.standby.made() {
			progressFrom(ctx).restoring()
		}
		waited, err := s.awaitRestore(ctx, w)
		if err == nil && !waited {
			pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = w.Conn.Ping(pingCtx)
			cancel()
		}
		if err == nil {
			return w, nil
		}
		if ctx.Err() != nil || try >= s.cfg.Workers {
			s.pool.End(w, false) // it did not answer: no call of its again
			return nil, fmt.Errorf("no worker answered: %w", err)
		}
		s.pool.Discard(w, err)
	}
}
