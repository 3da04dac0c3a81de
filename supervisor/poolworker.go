package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/pool"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
)

// workerPool is the supervisor's pool, of deno workers (see package pool).
type workerPool = pool.Pool[*worker.Worker]

// pingTimeout bounds how long a warm worker may take to answer before it
// gets a call. An idle interpreter answers in well under a millisecond; a
// loaded machine can delay it by tens; a frozen or wedged worker never does.
const pingTimeout = time.Second

// takeWorker takes a warm worker of p, which workers restores, that proves
// it is alive: one that does not answer at once (stopped, wedged) is
// replaced, and the call goes to the next, up to tries more. Each try
// takes a different worker, so a pool of frozen workers costs a call at
// most one pingTimeout a worker.
func takeWorker(ctx context.Context, p *workerPool, workers *worker.Starter, tries int, progress *callProgress, principal, kind string) (*worker.Worker, error) {
	for try := 0; ; try++ {
		w, err := p.Acquire(ctx, principal, kind, progress.queued)
		if err != nil {
			return nil, err
		}
		if w.Readiness() != pool.Restored {
			progress.restoring()
		}
		waited, err := workers.AwaitRestore(ctx, w)
		if err == nil && !waited {
			pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = w.Conn.Ping(pingCtx)
			cancel()
		}
		if err == nil {
			return w, nil
		}
		if ctx.Err() != nil || try >= tries {
			p.End(w, false) // it did not answer: no call of its again
			return nil, fmt.Errorf("no worker answered: %w", err)
		}
		p.Discard(w, err)
	}
}
