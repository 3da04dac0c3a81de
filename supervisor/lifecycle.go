package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// tracker counts what runs in a supervisor, the calls from outside and the
// goroutines it starts, so that Close can wait until nothing is left. Once
// Close has begun it admits no new call; the goroutines of what it admitted
// still start, since they kill workers and reap processes, until nothing is
// left: then it starts nothing more. Its zero value is ready for use.
type tracker struct {
	mu      sync.Mutex
	closing bool
	n       int           // calls and goroutines running
	idle    chan struct{} // made by shut; closed once nothing runs
}

// enter admits a call from outside (Run, NewSession, Start…), which must
// leave when it returns; it reports false once Close has begun.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.n++
	return true
}

// leave ends what enter admitted.
func (t *tracker) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.closing && t.n == 0 {
		close(t.idle)
	}
}

// Go runs f on a goroutine of its own, and reports whether it did. It
// does, always, when called from a call or goroutine that the tracker
// counts: what that starts is waited for too. It does not once Close has
// begun and nothing runs (a timer firing late).
func (t *tracker) Go(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing && t.n == 0 {
		return false
	}
	t.n++
	go func() {
		defer t.leave()
		f()
	}()
	return true
}

// shut admits no more calls, and returns a channel closed once nothing
// runs. It may be called more than once.
func (t *tracker) shut() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closing {
		t.closing = true
		t.idle = make(chan struct{})
		if t.n == 0 {
			close(t.idle)
		}
	}
	return t.idle
}

// preparation is one attempt to prepare the runtime, on a goroutine of the
// supervisor's: calls wait for it, each within its own context, and none
// is the one that prepares, so no call's end or cancellation cuts it short.
// Only Close does.
type preparation struct {
	done chan struct{} // closed when it has ended
	rt   *runtimeFiles // set before done is closed, unless it failed
	err  error         // why it failed, set before done is closed

	mu     sync.Mutex
	steps  []string               // the steps reported so far
	listen map[*func(string)]bool // who hears the steps (Warmup's progress)
}

// step reports a step of the preparation to its listeners, or to the log
// when nobody listens.
func (p *preparation) step(log *zap.Logger, step string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, step)
	if len(p.listen) == 0 {
		log.Info(step)
	}
	for l := range p.listen {
		(*l)(step)
	}
}

// hear makes progress hear the steps, one at a time: those reported so far
// at once, then the others as they come, until stop is called.
func (p *preparation) hear(progress func(string)) (stop func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, step := range p.steps {
		progress(step)
	}
	if p.listen == nil {
		p.listen = map[*func(string)]bool{}
	}
	key := &progress
	p.listen[key] = true
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.listen, key)
	}
}

// ensure waits, within ctx, for the runtime, starting its preparation
// unless one is under way; a preparation that failed is tried again by the
// next call. progress, if not nil, hears the steps of the preparation.
// The caller must be counted by s.wg: a call it admitted (see
// tracker.enter) or a goroutine it started.
func (s *Supervisor) ensure(ctx context.Context, progress func(string)) (*runtimeFiles, error) {
	if rt := s.rt.Load(); rt != nil {
		return rt, nil
	}
	p, err := s.preparing()
	if err != nil {
		return nil, err
	}
	if progress != nil {
		defer p.hear(progress)()
	}
	select {
	case <-p.done:
		return p.rt, p.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the runtime: %w", context.Cause(ctx))
	}
}

// preparing returns the preparation under way or done, starting one if
// there is none or the last one failed.
func (s *Supervisor) preparing() (*preparation, error) {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if p := s.prepared; p != nil {
		select {
		case <-p.done:
			if p.err == nil || errors.Is(p.err, errClosed) {
				return p, nil
			}
		default:
			return p, nil
		}
	}
	p := &preparation{done: make(chan struct{})}
	if !s.wg.Go(func() { s.prepareRuntime(p) }) {
		return nil, errClosed
	}
	s.prepared = p
	return p, nil
}

// prepareRuntime prepares the runtime, once, and starts the pool's slots;
// it ends early when the supervisor closes. Its failure is logged: the
// server keeps answering, and the next call tries again.
func (s *Supervisor) prepareRuntime(p *preparation) {
	defer close(p.done)
	p.rt, p.err = s.buildRuntime(s.ctx, func(step string) { p.step(s.log, step) })
	switch {
	case p.err == nil:
	case s.ctx.Err() != nil:
		p.rt, p.err = nil, errClosed
		s.log.Debug("runtime preparation stopped: the supervisor is closing")
	default:
		s.log.Error("cannot prepare the Python runtime", zap.Error(p.err))
	}
}

// buildRuntime is prepareRuntime's work. Only the preparation's goroutine
// writes the fields it sets, and Close reads them once that has ended.
func (s *Supervisor) buildRuntime(ctx context.Context, progress func(string)) (*runtimeFiles, error) {
	select {
	case s.prep <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.prep }()
	if err := ctx.Err(); err != nil {
		return nil, err // closed while waiting for a repair
	}
	if s.run == nil {
		run, err := openRunDir(s.log)
		if err != nil {
			return nil, err
		}
		s.run = run
	}
	if s.bridge == nil {
		b, err := bridge.Listen(s.log, s.bridgeReadLimit(), bridgeSocket(s.run))
		if err != nil {
			return nil, err
		}
		s.bridge = b
	}
	rt, err := s.prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	if v, err := pythonVersion(rt.pyodide); err == nil {
		s.python.Store(v)
	}
	pkgs, err := newInstaller(s.cfg, rt.pyodide, s.log)
	if err != nil {
		return nil, fmt.Errorf("package installer: %w", err)
	}
	if v, ok := s.python.Load().(string); ok {
		pkgs.bytecode = s.newBytecoder(v) // see bytecode.go
	}
	s.pkgs = pkgs
	rt = s.withDeps(ctx, rt, progress)
	s.rt.Store(rt)
	s.holdRuntime(rt)
	s.pool.begin()
	if s.addrs != nil {
		s.wg.Go(func() { s.addrs.watch(s.ctx, addrPoll) })
	}
	return rt, nil
}
