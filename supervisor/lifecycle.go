package supervisor

import (
	"context"
	"fmt"
	"sync"

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

// buildRuntime is the runtime's first build (see runtimeKeeper): the run
// directory, the bridge, the runtime files, the installer and --deps. Only
// the keeper's goroutine writes the fields it sets, and Close reads them
// once that has ended.
func (s *Supervisor) buildRuntime(ctx context.Context, progress func(string)) (*readyRuntime, error) {
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
	files, err := s.prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	if v, err := pythonVersion(files.pyodide); err == nil {
		s.python.Store(v)
	}
	pkgs, err := newInstaller(s.cfg, files.pyodide, s.log)
	if err != nil {
		return nil, fmt.Errorf("package installer: %w", err)
	}
	if v, ok := s.python.Load().(string); ok {
		pkgs.bytecode = s.newBytecoder(v) // see bytecode.go
	}
	pkgs.made = s.runnerModules()
	if files, err = s.withDeps(ctx, files, pkgs, progress); err != nil {
		if s.cfg.Fatal != nil && s.ctx.Err() == nil {
			s.cfg.Fatal(err)
		}
		return nil, err
	}
	return &readyRuntime{files: files, pkgs: pkgs}, nil
}

// runtimeStarted begins what needs the runtime published: the hold on its
// cache entries, the pool, and the watch of this host's addresses.
func (s *Supervisor) runtimeStarted(rt *readyRuntime) {
	s.holdRuntime(rt.files)
	s.pool.begin()
	if s.addrs != nil {
		s.wg.Go(func() { s.addrs.watch(s.ctx, addrPoll) })
	}
}

// rebuildRuntime makes the runtime's files again, for a repair.
func (s *Supervisor) rebuildRuntime(ctx context.Context, pkgs *installer, progress func(string)) (*runtimeFiles, error) {
	files, err := s.prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	return s.withDeps(ctx, files, pkgs, progress)
}
