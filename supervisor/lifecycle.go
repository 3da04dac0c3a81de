package supervisor

import (
	"context"
	"fmt"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

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
	s.pool.Begin()
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
