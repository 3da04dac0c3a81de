package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	"go.uber.org/zap"
)

// buildRuntime is the runtime's first build (see runtimefiles.Keeper): the run
// directory and the bridge (worker.Starter.Listen), the runtime files, the
// installer and --deps. Only the keeper's goroutine writes the fields it
// sets, and Close reads them once that has ended.
func (s *Supervisor) buildRuntime(ctx context.Context, progress func(string)) (*runtimefiles.Ready[*Installer], error) {
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
	pkgs, err := NewInstaller(s.cfg, files.Pyodide, s.log)
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
	return &runtimefiles.Ready[*Installer]{Files: files, Pkgs: pkgs}, nil
}

// runtimeStarted begins what needs the runtime published: the hold on its
// cache entries, the pool, and the watch of this host's addresses.
func (s *Supervisor) runtimeStarted(rt *runtimefiles.Ready[*Installer]) {
	s.cache.HoldRuntime(rt.Files)
	s.pool.Begin()
	if s.workers.Addrs != nil {
		s.wg.Go(func() { s.workers.Addrs.Watch(s.ctx, worker.AddrPoll) })
	}
}

// rebuildRuntime makes the runtime's files again, for a repair.
func (s *Supervisor) rebuildRuntime(ctx context.Context, pkgs *Installer, progress func(string)) (*runtimefiles.Files, error) {
	files, err := s.maker.Prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	return s.withDeps(ctx, files, pkgs, progress)
}

// withDeps returns rt with a snapshot that holds the --deps packages
// loaded, making it (keyed by rt's own snapshot and the packages' hashes)
// when the cache has none. The installer then pins --deps to the versions
// in that snapshot. --deps that cannot be had (not found, the index or the
// host unreachable, not in the cache offline) are an error wrapping
// [ErrDeps]: every call would fail installing them. A snapshot that cannot
// be made is logged: calls then install --deps each, as without a snapshot.
func (s *Supervisor) withDeps(ctx context.Context, rt *runtimefiles.Files, pkgs *Installer, progress func(string)) (*runtimefiles.Files, error) {
	if len(s.cfg.Deps) == 0 {
		return rt, nil
	}
	progress("resolving --deps " + strings.Join(s.cfg.Deps, ", "))
	deps, sum, err := s.resolveDeps(ctx, pkgs)
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

// importable adds to modules the top-level modules of wheels that a
// package offers: not private ones, nor tests. Shared libraries have none.
func importable(wheels []bridge.Payload, modules map[string]bool) error {
	for _, w := range wheels {
		if !strings.HasSuffix(w.Name, ".whl") {
			continue
		}
		mods, err := packages.WheelModules(w.Path)
		if err != nil {
			return fmt.Errorf("modules of %s: %w", w.Name, err)
		}
		offered(mods, modules)
	}
	return nil
}

// offered adds to modules those of mods that a package offers: not private
// ones, nor tests.
func offered(mods, modules map[string]bool) {
	for m := range mods {
		if !strings.HasPrefix(m, "_") && m != "tests" && m != "test" {
			modules[m] = true
		}
	}
}

// resolveDeps resolves and fetches --deps with pkgs, pins its --deps to
// what it resolved, and returns the set with the sha256 of each file.
func (s *Supervisor) resolveDeps(ctx context.Context, pkgs *Installer) (*runtimefiles.Deps, []string, error) {
	plan, local, err := pkgs.obtain(ctx, s.cfg.Deps, nil, map[string]bool{}, nil)
	if err != nil {
		return nil, nil, err
	}
	files := map[string]bool{}
	wheels, err := pkgs.wheels(local, files)
	if err != nil {
		return nil, nil, err
	}
	var sums, pins []string
	for _, f := range local {
		// Every worker gets them from the cache: keep them from a prune.
		if _, err := s.cache.Hold(f.Path); err != nil {
			return nil, nil, fmt.Errorf("hold %s in the cache: %w", f.Filename, err)
		}
		sums = append(sums, f.SHA256)
	}
	modules := map[string]bool{}
	if err := importable(wheels, modules); err != nil {
		return nil, nil, err
	}
	for _, f := range plan.Files {
		pins = append(pins, f.Name+"=="+f.Version)
	}
	pkgs.pinDeps(pins)
	deps := &runtimefiles.Deps{Wheels: wheels, Files: files, Modules: slices.Sorted(maps.Keys(modules))}
	return deps, sums, nil
}
