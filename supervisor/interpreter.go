package supervisor

import (
	"context"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
)

// interpreter is where a call's code runs: a fresh worker of the pool's
// (pooled) or a session's own (Session). A call's steps are the same in
// both (see pipeline.go); what differs is here: where the worker comes
// from, what it has installed and mounted already, what becomes of it
// after the call, and whether the call counts toward learning package sets.
type interpreter interface {
	// installedFiles returns the package files the interpreter has, on top
	// of rt: a call fetches none of them, and adds those it fetches.
	installedFiles(rt *runtimefiles.Files) map[string]bool
	// acquire returns the worker for a call of principal: one of learned
	// set kind, if the interpreter has one ("" for a plain worker). The
	// time it waits for one does not count against limit; progress hears
	// the wait.
	acquire(ctx context.Context, limit *deadline, progress *callProgress, principal, kind string) (*worker.Worker, error)
	// release is done with w: the call is over, or its learned set did not
	// fit the call.
	release(w *worker.Worker)
	// learns reports whether calls get a learned set's worker and count
	// toward learning sets: a fresh interpreter's do, a session's, whose
	// packages are its own business, do not.
	learns() bool
	// mountsDue reports whether the mounted folders must be put into the
	// interpreter; mountsPut says they were.
	mountsDue() bool
	mountsPut()
}

// pooled is the interpreter of a call in a fresh worker: taken warm from
// the pool and retired after the call, so that no state survives it (its
// process may serve the next call, in a new interpreter: see worker/recycle.go).
type pooled struct{ s *Supervisor }

var (
	_ interpreter = pooled{}
	_ interpreter = (*Session)(nil)
)

// installedFiles are those of --deps that the snapshot holds.
func (pooled) installedFiles(rt *runtimefiles.Files) map[string]bool { return rt.Preinstalled() }

// acquire takes a warm worker that answers (see takeWorker).
func (p pooled) acquire(ctx context.Context, limit *deadline, progress *callProgress, principal, kind string) (*worker.Worker, error) {
	waited := time.Now()
	w, err := takeWorker(ctx, p.s.pool, p.s.workers, p.s.cfg.Workers, progress, principal, kind)
	limit.extend(time.Since(waited))
	return w, err
}

// release retires w: the pool recycles it or starts a replacement.
func (p pooled) release(w *worker.Worker) { p.s.pool.Retire(w) }

func (pooled) learns() bool    { return true }
func (pooled) mountsDue() bool { return true }
func (pooled) mountsPut()      {}

// installedFiles are those installed by the session's calls so far, on top
// of the runtime's when the session began. Guarded by the session's turn,
// as all of its interpreter methods.
func (ss *Session) installedFiles(*runtimefiles.Files) map[string]bool { return ss.installed }

// acquire returns the session's worker; it never has a learned set.
func (ss *Session) acquire(context.Context, *deadline, *callProgress, string, string) (*worker.Worker, error) {
	return ss.w, nil
}

// release keeps the worker: it holds the session's state. Session.Run
// ends the session if the call lost it.
func (ss *Session) release(*worker.Worker) {}

func (ss *Session) learns() bool    { return false }
func (ss *Session) mountsDue() bool { return !ss.mounted }
func (ss *Session) mountsPut()      { ss.mounted = true }
