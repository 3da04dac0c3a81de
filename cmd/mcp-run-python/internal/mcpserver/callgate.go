package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ErrShuttingDown is why calls are refused, and the cause of the
// cancellation of those still running, once the program is stopping: the
// context a runner gets carries it, so that a shutdown can be told from a
// client's cancellation.
var ErrShuttingDown = errors.New("the server is shutting down")

// errRefused is the error of a call that arrives during the shutdown.
var errRefused = fmt.Errorf("%w and takes no new calls", ErrShuttingDown)

// CallGate admits tool calls while the server serves. At shutdown it refuses
// new calls, gives the running ones time to finish, and cancels the rest.
// One gate serves a program: its transport shuts it down, and the readiness
// probe reads it.
type CallGate struct {
	// timeout is how long running calls get to finish at shutdown; stopWait
	// how long cancelled calls then get to return.
	timeout, stopWait time.Duration

	stop       context.Context // cancelled to cancel the running calls
	cancelStop context.CancelCauseFunc

	mu      sync.Mutex
	running int
	closing chan struct{} // closed when the gate stops admitting calls
	idle    chan struct{} // closed once closing and no call runs
	// retriesEnded is set by EndRetries; onRetriesEnd are run by it.
	retriesEnded bool
	onRetriesEnd []func()
}

// NewCallGate returns an open gate; see CallGate.timeout and stopWait.
func NewCallGate(timeout, stopWait time.Duration) *CallGate {
	stop, cancel := context.WithCancelCause(context.Background())
	return &CallGate{
		timeout:    timeout,
		stopWait:   stopWait,
		stop:       stop,
		cancelStop: cancel,
		closing:    make(chan struct{}),
		idle:       make(chan struct{}),
	}
}

// enter admits a call. It returns the call's context, which the shutdown
// cancels with ErrShuttingDown if the call outlasts it, and the function to
// call when the call is over. Once the gate is closed it fails.
func (g *CallGate) enter(ctx context.Context) (context.Context, func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.closing:
		return nil, nil, errRefused
	default:
	}
	g.running++
	ctx, cancel := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(g.stop, func() { cancel(context.Cause(g.stop)) })
	var once sync.Once
	leave := func() {
		once.Do(func() {
			stopAfter()
			cancel(nil)
			g.leave()
		})
	}
	return ctx, leave, nil
}

// leave records the end of a call.
func (g *CallGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	g.signalIdle()
}

// signalIdle closes idle when the gate is closing and no call runs; g.mu is
// held.
func (g *CallGate) signalIdle() {
	select {
	case <-g.closing:
	default:
		return
	}
	select {
	case <-g.idle:
	default:
		if g.running == 0 {
			close(g.idle)
		}
	}
}

// Close stops admitting calls: an HTTP transport closes the gate as soon as
// its shutdown begins, before it waits for the calls.
func (g *CallGate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.closing:
	default:
		close(g.closing)
	}
	g.signalIdle()
}

// EndRetries says that no request can reach the server any more (an HTTP
// server whose listener is closed at shutdown), so no 2026-07-28 client can
// retry a call parked for its answers: those calls end at once rather than
// at --park-timeout or the shutdown timeout, and a question asked after is
// refused. Over stdio requests are read until the calls are over, so a
// retry can still come.
func (g *CallGate) EndRetries() {
	g.mu.Lock()
	fs := g.onRetriesEnd
	g.retriesEnded, g.onRetriesEnd = true, nil
	g.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// whenRetriesEnd runs f when EndRetries is called, or at once if it was.
func (g *CallGate) whenRetriesEnd(f func()) {
	g.mu.Lock()
	ended := g.retriesEnded
	if !ended {
		g.onRetriesEnd = append(g.onRetriesEnd, f)
	}
	g.mu.Unlock()
	if ended {
		f()
	}
}

// Closed returns a channel closed once the gate stops admitting calls, for
// the readiness probe.
func (g *CallGate) Closed() <-chan struct{} { return g.closing }

// inFlight returns the number of calls running.
func (g *CallGate) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

// Shutdown closes the gate, waits up to g.timeout for the running calls to
// finish, cancels those that do not, and waits up to g.stopWait for them to
// return. It reports whether every call is over. The transports call it
// when their context ends, as on SIGTERM.
func (g *CallGate) Shutdown(log *zap.Logger) bool {
	g.Close()
	if n := g.inFlight(); n > 0 {
		log.Info("shutting down: waiting for running calls", zap.Int("calls", n), zap.Duration("shutdown_timeout", g.timeout))
	}
	if g.waitIdle(g.timeout) {
		return true
	}
	log.Warn("cancelling the calls still running at the shutdown timeout",
		zap.Int("calls", g.inFlight()), zap.Duration("shutdown_timeout", g.timeout))
	g.cancelStop(ErrShuttingDown)
	if g.waitIdle(g.stopWait) {
		return true
	}
	log.Error("calls did not return after their cancellation", zap.Int("calls", g.inFlight()), zap.Duration("waited", g.stopWait))
	return false
}

// waitIdle waits up to d for the gate to be closed with no call running.
func (g *CallGate) waitIdle(d time.Duration) bool {
	select {
	case <-g.idle:
		return true
	default:
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-g.idle:
		return true
	case <-timer.C:
		return false
	}
}
