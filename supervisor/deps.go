package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// depsSet is a set of resolved packages that a memory snapshot holds
// loaded: its modules were imported before the snapshot was taken, so an
// interpreter restored from it has them without the import's cost. The
// snapshot is of the wasm memory only: the packages' files, which Pyodide's
// file system keeps outside it, are installed again into every restored
// interpreter (cheap: unpacking, no import), so that what the modules read
// or import later is there.
type depsSet struct {
	wheels  []bridge.Payload // in install order
	modules []string         // the top-level modules imported
	files   map[string]bool  // the wheels' file names: installed in every interpreter
}

// withDeps returns rt with a snapshot that holds the --deps packages
// loaded, making it (keyed by rt's own snapshot and the packages' hashes)
// when the cache has none. The installer then pins --deps to the versions
// in that snapshot. --deps that cannot be had (not found, the index or the
// host unreachable, not in the cache offline) are an error wrapping
// [ErrDeps]: every call would fail installing them. A snapshot that cannot
// be made is logged: calls then install --deps each, as without a snapshot.
func (s *Supervisor) withDeps(ctx context.Context, rt *runtimeFiles, pkgs *installer, progress func(string)) (*runtimeFiles, error) {
	if len(s.cfg.Deps) == 0 {
		return rt, nil
	}
	progress("resolving --deps " + strings.Join(s.cfg.Deps, ", "))
	deps, sum, err := s.resolveDeps(ctx, pkgs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDeps, err)
	}
	if rt.key == "" {
		return rt, nil
	}
	h := sha256.New()
	h.Write([]byte(rt.key))
	for _, part := range sum {
		h.Write([]byte("\x00" + part))
	}
	key := hex.EncodeToString(h.Sum(nil)[:8])
	with, err := s.runtimeWith(ctx, rt, key, deps, progress)
	switch {
	case err != nil && s.ctx.Err() != nil:
		return nil, err // closing
	case err != nil:
		s.log.Warn("--deps are not in the memory snapshot: calls install them each", zap.Error(err))
		return rt, nil
	}
	return with, nil
}

// runtimeWith returns rt with the snapshot named key, which holds set
// loaded, making it when the cache has none.
func (s *Supervisor) runtimeWith(ctx context.Context, rt *runtimeFiles, key string, set *depsSet, progress func(string)) (*runtimeFiles, error) {
	l := layout{rt.root}
	with := *rt
	with.snapshot, with.codeCache, with.deps, with.needed = l.snapshot(key), l.codeCache(key), set, nil
	if checkSnapshot(with.snapshot) != nil || checkTemplate(with.codeCache) != nil {
		progress("making a memory snapshot with " + strings.Join(set.modules, ", ") + " loaded")
		if err := s.makeSnapshot(ctx, &with, with.snapshot, with.codeCache); err != nil {
			return nil, err
		}
	}
	with.listNeeded()
	return &with, nil
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
func (s *Supervisor) resolveDeps(ctx context.Context, pkgs *installer) (*depsSet, []string, error) {
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
		if _, err := s.holdCacheEntry(f.Path); err != nil {
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
	deps := &depsSet{wheels: wheels, files: files, modules: slices.Sorted(maps.Keys(modules))}
	return deps, sums, nil
}
