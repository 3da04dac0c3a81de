package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"go.uber.org/zap"
)

// ErrSessionLost is what the calls of a session get once its worker is gone:
// killed at a limit, crashed, or closed. It wraps why.
var ErrSessionLost = errors.New("the session's state was lost")

// Session is an interpreter that keeps its state between calls: globals,
// imports, installed packages and files. It has a worker of its own,
// outside the pool, so sessions never take the fresh interpreters calls
// need. Its calls run one at a time.
//
// Who may use a session, and for how long, is the front end's business:
// the supervisor only runs it, within the limits of a worker at all times,
// between calls too (see watch, and worker/sessionwatch.go).
type Session struct {
	s    *Supervisor
	turn chan struct{} // held by the running call, and by the watcher's readings
	done chan struct{} // closed when the session ends
	why  error         // why it ended, if it was lost; set before done is closed

	// Guarded by turn.
	w         *worker.Worker
	installed map[string]bool // package files installed so far
	mounted   bool            // the mounts have been put
	lost      error           // why the worker is gone, once it is
	runs      int             // calls run, so that the watcher sees one between its readings
}

// NewSession starts a session's worker and returns once it is ready.
func (s *Supervisor) NewSession(ctx context.Context) (*Session, error) {
	if !s.wg.Enter() {
		return nil, errClosed
	}
	defer s.wg.Leave()
	if _, err := s.runtime.Ensure(ctx, nil); err != nil {
		return nil, err
	}
	// Close stops the start rather than wait for it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	w, err := s.startWorker(ctx, worker.RoleSession, "")
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, errClosed
		}
		return nil, fmt.Errorf("start the session's worker: %w", err)
	}
	return s.addSession(w)
}

// addSession makes a session of a started worker and watches it.
func (s *Supervisor) addSession(w *worker.Worker) (*Session, error) {
	ss := &Session{s: s, turn: make(chan struct{}, 1), done: make(chan struct{}), w: w, installed: s.runtime.Files().Preinstalled()}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	if s.ctx.Err() != nil {
		w.Kill()
		return nil, errClosed
	}
	s.sessions.live[ss] = struct{}{}
	s.wg.Go(func() { ss.watch(s.ctx, w.Proc, s.cfg.idleLimits()) })
	return ss, nil
}

// Done is closed when the session ends: closed, lost during a call, or
// ended by its watcher between calls.
func (ss *Session) Done() <-chan struct{} { return ss.done }

// Err says, once Done is closed, why the session's state was lost,
// wrapping ErrSessionLost; nil for a session that was closed.
func (ss *Session) Err() error {
	select {
	case <-ss.done:
		if ss.why != nil {
			return fmt.Errorf("%w: %w", ErrSessionLost, ss.why)
		}
	default:
	}
	return nil
}

// Run runs a call in the session. A call stopped at its time limit that
// ends within the grace keeps the session; one whose worker had to be
// killed (time, memory) or crashed ends it, says so in its result, and
// every later call fails with ErrSessionLost.
func (ss *Session) Run(ctx context.Context, req Request) (Result, error) {
	if !ss.s.wg.Enter() {
		return Result{}, errClosed
	}
	defer ss.s.wg.Leave()
	if err := ss.take(ctx); err != nil {
		return Result{}, err
	}
	defer func() { <-ss.turn }()
	if ss.lost == nil && ss.w.Dead() {
		ss.lost = fmt.Errorf("its worker ended while idle (%s)", ss.w.ExitStatus())
	}
	if ss.lost != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrSessionLost, ss.lost)
	}
	res, err := ss.s.serve(ctx, req, ss)
	if ss.w.Dead() || err != nil && ss.s.ctx.Err() != nil {
		ss.lost = errors.New("its worker was stopped during a call")
		res.SessionLost = true
		if res.Status == StatusRunError {
			res.Error = strings.TrimRight(res.Error, "\n") + "\n[the session's state was lost: its worker was stopped; create a new session]\n"
		}
		ss.end(ss.lost)
	}
	return res, err
}

// take waits for the session's turn, for a call, and counts the call.
func (ss *Session) take(ctx context.Context) error {
	select {
	case ss.turn <- struct{}{}:
		ss.runs++
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the session's previous call: %w", context.Cause(ctx))
	}
}

// Close ends the session and its worker. A call running in it is stopped.
func (ss *Session) Close() {
	ss.end(nil)
}

// end kills the worker and forgets the session, lost for why (nil: it was
// closed); it may run more than once, and the first why stays.
func (ss *Session) end(why error) {
	s := ss.s
	s.sessions.mu.Lock()
	_, live := s.sessions.live[ss]
	delete(s.sessions.live, ss)
	if live {
		ss.why = why
		close(ss.done)
	}
	s.sessions.mu.Unlock()
	if live {
		ss.w.Kill()
		s.log.Debug("session ended", zap.Int("pid", ss.w.Proc.Pid()))
	}
}

// watch ends the session when its worker passes the limits between calls,
// or ends while idle. It returns when the session ends. A reading takes the
// session's turn, so that no call starts between a reading over a limit
// and the kill; a call holding the turn is watched by the call.
func (ss *Session) watch(ctx context.Context, u worker.Usage, limits worker.IdleLimits) {
	tick := time.NewTicker(worker.IdleWatchEvery)
	defer tick.Stop()
	budget := worker.NewCPUBudget(limits.CPU)
	runs := 0
	warned := false
	for {
		select {
		case <-ss.done:
			return
		case <-ss.w.Ended():
			select {
			case ss.turn <- struct{}{}:
			case <-ss.done:
				return
			}
			if ss.lost == nil {
				ss.lost = fmt.Errorf("its worker ended while idle (%s)", ss.w.ExitStatus())
			}
			why := ss.lost
			<-ss.turn
			ss.end(why)
			return
		case <-tick.C:
		}
		if limits == (worker.IdleLimits{}) {
			continue // watched for an exit only
		}
		select {
		case ss.turn <- struct{}{}:
		default: // a call runs
			budget.Restart()
			continue
		}
		if ss.runs != runs {
			runs = ss.runs
			budget.Restart()
		}
		why, err := limits.Check(ctx, u, budget)
		if why != nil && ss.lost == nil {
			ss.lost = why
		}
		<-ss.turn
		if why != nil {
			ss.s.log.Info("a session's worker was killed between calls", zap.Int("pid", ss.w.Proc.Pid()), zap.Error(why))
			ss.end(why)
			return
		}
		if err != nil && !warned && !ss.w.Dead() {
			warned = true
			ss.s.log.Warn("cannot read a session worker's use: its limits between calls are not enforced while this lasts", zap.Int("pid", ss.w.Proc.Pid()), zap.Error(err))
		}
	}
}

// idleLimits returns the bounds of sessions between calls.
func (c Config) idleLimits() worker.IdleLimits {
	return worker.IdleLimits{Memory: c.MemoryLimit, CPU: max(c.SessionIdleCPU, 0)}
}

// sessionSet is the live sessions of a supervisor.
type sessionSet struct {
	mu   sync.Mutex
	live map[*Session]struct{}
}

// closeAll ends every session, when the supervisor closes.
func (set *sessionSet) closeAll() {
	set.mu.Lock()
	all := make([]*Session, 0, len(set.live))
	for ss := range set.live {
		all = append(all, ss)
	}
	set.mu.Unlock()
	var wg sync.WaitGroup
	for _, ss := range all {
		wg.Go(func() { ss.end(nil) })
	}
	wg.Wait()
}

// count is the number of live sessions, for Health.
func (set *sessionSet) count() int {
	set.mu.Lock()
	defer set.mu.Unlock()
	return len(set.live)
}
