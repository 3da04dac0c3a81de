package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"go.uber.org/zap"
)

// readyRuntime is the runtime as a call sees it: the files its worker
// started from, and the installer of its packages.
type readyRuntime = runtimefiles.Ready[*install.Installer]

// buildRuntime is the runtime's first build (see runtimefiles.Keeper): the run
// directory and the bridge (worker.Starter.Listen), the runtime files, the
// installer and --deps. Only the keeper's goroutine writes the fields it
// sets, and Close reads them once that has ended.
func (s *Supervisor) buildRuntime(ctx context.Context, progress func(string)) (*readyRuntime, error) {
	if err := s.workers.Listen(); err != nil {
		return nil, err
	}
	files, err := s.maker.Prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	if v, err := pythonVersion(files.Pyodide); err == nil {
		s.python.Store(v)
	}
	var bytecode *install.Bytecoder
	if v, ok := s.python.Load().(string); ok {
		// A compile worker: restored from the runtime's snapshot, no
		// network, and a read limit for the largest archive. --deps queue
		// their wheels while the runtime is being prepared: it waits for it.
		startCompile := func() (*worker.Worker, error) {
			if _, err := s.runtime.Ensure(s.ctx, nil); err != nil {
				return nil, err
			}
			return s.startWorker(s.ctx, worker.RoleCompile, "")
		}
		bytecode = install.NewBytecoder(v, s.learn.Background, s.pool.Idle, startCompile)
	}
	pkgs, err := install.New(s.cfg.install(), files.Pyodide, bytecode, s.log)
	if err != nil {
		return nil, fmt.Errorf("package installer: %w", err)
	}
	if files, err = s.withDeps(ctx, files, pkgs, progress); err != nil {
		if s.cfg.Fatal != nil && s.ctx.Err() == nil {
			s.cfg.Fatal(err)
		}
		return nil, err
	}
	return &readyRuntime{Files: files, Pkgs: pkgs}, nil
}

// withDeps returns rt with a snapshot that holds the --deps packages
// loaded, making it (keyed by rt's own snapshot and the packages' hashes)
// when the cache has none. The installer then pins --deps to the versions
// in that snapshot. --deps that cannot be had (not found, the index or the
// host unreachable, not in the cache offline) are an error wrapping
// [ErrDeps]: every call would fail installing them. A snapshot that cannot
// be made is logged: calls then install --deps each, as without a snapshot.
func (s *Supervisor) withDeps(ctx context.Context, rt *runtimefiles.Files, pkgs *install.Installer, progress func(string)) (*runtimefiles.Files, error) {
	if len(s.cfg.Deps) == 0 {
		return rt, nil
	}
	progress("resolving --deps " + strings.Join(s.cfg.Deps, ", "))
	deps, sum, err := pkgs.ResolveDeps(ctx, s.cfg.Deps, s.cache.Hold)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDeps, err)
	}
	if rt.Key == "" {
		return rt, nil
	}
	h := sha256.New()
	h.Write([]byte(rt.Key))
	for _, part := range sum {
		h.Write([]byte("\x00" + part))
	}
	key := hex.EncodeToString(h.Sum(nil)[:8])
	with, err := s.maker.With(ctx, rt, key, deps, progress)
	switch {
	case err != nil && s.ctx.Err() != nil:
		return nil, err // closing
	case err != nil:
		s.log.Warn("--deps are not in the memory snapshot: calls install them each", zap.Error(err))
		return rt, nil
	}
	return with, nil
}
