package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// readyRuntime is the runtime as calls and workers see it: the files every
// worker starts from, and the installer of calls' packages, made for that
// Pyodide. It is immutable: a repair hands out a new one, and a call keeps
// the one it began with.
type readyRuntime struct {
	files *runtimeFiles
	pkgs  *installer
}

// runtimeKeeper keeps the supervisor's runtime: it has it built once, on a
// goroutine of the supervisor's that calls wait for (ensure); rebuilt when
// a file of it goes missing (repair), one build at a time; and its
// snapshot remade when a worker cannot restore from it. It hands out the
// current runtime (current). What a build does is the supervisor's (see
// buildRuntime): the keeper holds the state, and who waits for what.
type runtimeKeeper struct {
	ctx context.Context  // the supervisor's: a build ends when it closes
	wg  *tracker.Tracker // the supervisor's: builds run on its goroutines
	log *zap.Logger

	// build makes the runtime the first time; started then begins what
	// needs it published (the pool).
	build   func(ctx context.Context, progress func(string)) (*readyRuntime, error)
	started func(rt *readyRuntime)
	// rebuild makes the runtime's files again, with its installer.
	rebuild func(ctx context.Context, pkgs *installer, progress func(string)) (*runtimeFiles, error)
	// remake makes rt's snapshot again.
	remake func(rt *runtimeFiles)

	mu       sync.Mutex
	prepared *preparation                 // the last first build tried; guarded by mu
	turn     chan struct{}                // held while the runtime is being built or rebuilt
	cur      atomic.Pointer[readyRuntime] // set by the first build, replaced by a repair
	remaking atomic.Bool                  // the snapshot is being remade
}

// current returns the runtime, or nil before it is built.
func (k *runtimeKeeper) current() *readyRuntime { return k.cur.Load() }

// files returns the current runtime's files, or nil before it is built.
func (k *runtimeKeeper) files() *runtimeFiles {
	if rt := k.cur.Load(); rt != nil {
		return rt.files
	}
	return nil
}

// preparation is one attempt to prepare the runtime, on a goroutine of the
// supervisor's: calls wait for it, each within its own context, and none
// is the one that prepares, so no call's end or cancellation cuts it short.
// Only Close does.
type preparation struct {
	done chan struct{} // closed when it has ended
	rt   *readyRuntime // set before done is closed, unless it failed
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
// The caller must be counted by the supervisor's tracker: a call it
// admitted (see tracker.Tracker.Enter) or a goroutine it started.
func (k *runtimeKeeper) ensure(ctx context.Context, progress func(string)) (*readyRuntime, error) {
	if rt := k.cur.Load(); rt != nil {
		return rt, nil
	}
	p, err := k.preparing()
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
func (k *runtimeKeeper) preparing() (*preparation, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.prepared; p != nil {
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
	if !k.wg.Go(func() { k.prepare(p) }) {
		return nil, errClosed
	}
	k.prepared = p
	return p, nil
}

// prepare builds the runtime, once, publishes it and begins what needs
// it; it ends early when the supervisor closes. Its failure is logged: the
// server keeps answering, and the next call tries again.
func (k *runtimeKeeper) prepare(p *preparation) {
	defer close(p.done)
	p.rt, p.err = k.buildFirst(func(step string) { p.step(k.log, step) })
	switch {
	case p.err == nil:
	case k.ctx.Err() != nil:
		p.rt, p.err = nil, errClosed
		k.log.Debug("runtime preparation stopped: the supervisor is closing")
	default:
		k.log.Error("cannot prepare the Python runtime", zap.Error(p.err))
	}
}

// buildFirst is prepare's work, in the keeper's turn.
func (k *runtimeKeeper) buildFirst(progress func(string)) (*readyRuntime, error) {
	ctx := k.ctx
	select {
	case k.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-k.turn }()
	if err := ctx.Err(); err != nil {
		return nil, err // closed while waiting for a repair
	}
	rt, err := k.build(ctx, progress)
	if err != nil {
		return nil, err
	}
	k.cur.Store(rt)
	k.started(rt)
	return rt, nil
}

// repair rebuilds a runtime that lost what, a file it needs (a cleaner of
// caches, or a user, removed it under the running server), unless another
// start has already. Until it is done, workers wait for it rather than fail.
func (k *runtimeKeeper) repair(ctx context.Context, broken *readyRuntime, what string) (*readyRuntime, error) {
	select {
	case k.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the runtime: %w", ctx.Err())
	}
	defer func() { <-k.turn }()
	if rt := k.cur.Load(); rt != broken {
		return rt, nil
	}
	k.log.Warn("a file of the Python runtime is gone; rebuilding the runtime", zap.String("missing", what))
	progress := func(step string) { k.log.Info(step) }
	files, err := k.rebuild(ctx, broken.pkgs, progress)
	if err != nil {
		return nil, fmt.Errorf("%w (%s) and cannot be rebuilt: %w", errRuntimeGone, what, err)
	}
	rt := &readyRuntime{files: files, pkgs: broken.pkgs}
	k.cur.Store(rt)
	k.log.Info("the Python runtime is rebuilt")
	return rt, nil
}

// remakeSnapshot replaces a snapshot that workers failed to restore from
// (damaged, or made by an incompatible build), in the background and once
// per supervisor: until it is done, workers load Pyodide plainly.
func (k *runtimeKeeper) remakeSnapshot(rt *runtimeFiles) {
	if !k.remaking.CompareAndSwap(false, true) {
		return
	}
	k.log.Warn("a worker could not restore the memory snapshot; making a new one", zap.String("path", rt.snapshot))
	k.wg.Go(func() { k.remake(rt) })
}
