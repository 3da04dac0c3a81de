package runtimefiles

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// Ready is the runtime as calls and workers see it: the files every
// worker starts from, and the installer of calls' packages, made for that
// Pyodide. It is immutable: a repair hands out a new one, and a call keeps
// the one it began with.
type Ready[P any] struct {
	Files *Files
	Pkgs  P
}

// Keeper keeps the supervisor's runtime: it has it built once, on a
// goroutine of the supervisor's that calls wait for (Ensure); rebuilt when
// a file of it goes missing (Repair), one build at a time; and its
// snapshot remade when a worker cannot restore from it. It hands out the
// current runtime (Current). What a build does is the supervisor's (see
// Builds): the keeper holds the state, and who waits for what. P is the
// installer of calls' packages, which the keeper only hands on.
type Keeper[P any] struct {
	ctx context.Context  // the supervisor's: a build ends when it closes
	wg  *tracker.Tracker // the supervisor's: builds run on its goroutines
	log *zap.Logger

	builds Builds[P]

	mu       sync.Mutex
	prepared *preparation[P]          // the last first build tried; guarded by mu
	turn     chan struct{}            // held while the runtime is being built or rebuilt
	cur      atomic.Pointer[Ready[P]] // set by the first build, replaced by a repair
	remaking atomic.Bool              // the snapshot is being remade
}

// Builds are what a Keeper has done to the runtime: the supervisor's.
type Builds[P any] struct {
	// Build makes the runtime the first time; Started then begins what
	// needs it published (the pool).
	Build   func(ctx context.Context, progress func(string)) (*Ready[P], error)
	Started func(rt *Ready[P])
	// Rebuild makes the runtime's files again, with its installer.
	Rebuild func(ctx context.Context, pkgs P, progress func(string)) (*Files, error)
	// Remake makes rt's snapshot again.
	Remake func(rt *Files)
}

// NewKeeper returns the keeper of a supervisor's runtime: its builds end
// when ctx does and run on goroutines of wg.
func NewKeeper[P any](ctx context.Context, wg *tracker.Tracker, log *zap.Logger, b Builds[P]) *Keeper[P] {
	return &Keeper[P]{ctx: ctx, wg: wg, log: log, builds: b, turn: make(chan struct{}, 1)}
}

// Current returns the runtime, or nil before it is built.
func (k *Keeper[P]) Current() *Ready[P] { return k.cur.Load() }

// Files returns the current runtime's Files, or nil before it is built.
func (k *Keeper[P]) Files() *Files {
	if rt := k.cur.Load(); rt != nil {
		return rt.Files
	}
	return nil
}

// preparation is one attempt to prepare the runtime, on a goroutine of the
// supervisor's: calls wait for it, each within its own context, and none
// is the one that prepares, so no call's end or cancellation cuts it short.
// Only Close does.
type preparation[P any] struct {
	done chan struct{} // closed when it has ended
	rt   *Ready[P]     // set before done is closed, unless it failed
	err  error         // why it failed, set before done is closed

	mu     sync.Mutex
	steps  []string               // the steps reported so far
	listen map[*func(string)]bool // who hears the steps (Warmup's progress)
}

// step reports a step of the preparation to its listeners, or to the log
// when nobody listens.
func (p *preparation[P]) step(log *zap.Logger, step string) {
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
func (p *preparation[P]) hear(progress func(string)) (stop func()) {
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

// Ensure waits, within ctx, for the runtime, starting its preparation
// unless one is under way; a preparation that failed is tried again by the
// next call. progress, if not nil, hears the steps of the preparation.
// The caller must be counted by the supervisor's tracker: a call it
// admitted (see tracker.Tracker.Enter) or a goroutine it started.
func (k *Keeper[P]) Ensure(ctx context.Context, progress func(string)) (*Ready[P], error) {
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
func (k *Keeper[P]) preparing() (*preparation[P], error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.prepared; p != nil {
		select {
		case <-p.done:
			if p.err == nil || errors.Is(p.err, tracker.ErrClosed) {
				return p, nil
			}
		default:
			return p, nil
		}
	}
	p := &preparation[P]{done: make(chan struct{})}
	if !k.wg.Go(func() { k.prepare(p) }) {
		return nil, tracker.ErrClosed
	}
	k.prepared = p
	return p, nil
}

// Start begins the runtime's preparation, unless one is under way or
// done, and returns at once. The caller must be counted by the
// supervisor's tracker.
func (k *Keeper[P]) Start() { _, _ = k.preparing() }

// prepare builds the runtime, once, publishes it and begins what needs
// it; it ends early when the supervisor closes. Its failure is logged: the
// server keeps answering, and the next call tries again.
func (k *Keeper[P]) prepare(p *preparation[P]) {
	defer close(p.done)
	p.rt, p.err = k.buildFirst(func(step string) { p.step(k.log, step) })
	switch {
	case p.err == nil:
	case k.ctx.Err() != nil:
		p.rt, p.err = nil, tracker.ErrClosed
		k.log.Debug("runtime preparation stopped: the supervisor is closing")
	default:
		k.log.Error("cannot prepare the Python runtime", zap.Error(p.err))
	}
}

// buildFirst is prepare's work, in the keeper's turn.
func (k *Keeper[P]) buildFirst(progress func(string)) (*Ready[P], error) {
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
	rt, err := k.builds.Build(ctx, progress)
	if err != nil {
		return nil, err
	}
	k.cur.Store(rt)
	k.builds.Started(rt)
	return rt, nil
}

// Repair rebuilds a runtime that lost what, a file it needs (a cleaner of
// caches, or a user, removed it under the running server), unless another
// start has already. Until it is done, workers wait for it rather than fail.
func (k *Keeper[P]) Repair(ctx context.Context, broken *Ready[P], what string) (*Ready[P], error) {
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
	files, err := k.builds.Rebuild(ctx, broken.Pkgs, progress)
	if err != nil {
		return nil, fmt.Errorf("%w (%s) and cannot be rebuilt: %w", ErrGone, what, err)
	}
	rt := &Ready[P]{Files: files, Pkgs: broken.Pkgs}
	k.cur.Store(rt)
	k.log.Info("the Python runtime is rebuilt")
	return rt, nil
}

// RemakeSnapshot replaces a snapshot that workers failed to restore from
// (damaged, or made by an incompatible build), in the background and once
// per supervisor: until it is done, workers load Pyodide plainly.
func (k *Keeper[P]) RemakeSnapshot(rt *Files) {
	if !k.remaking.CompareAndSwap(false, true) {
		return
	}
	k.log.Warn("a worker could not restore the memory snapshot; making a new one", zap.String("path", rt.Snapshot))
	k.wg.Go(func() { k.builds.Remake(rt) })
}
