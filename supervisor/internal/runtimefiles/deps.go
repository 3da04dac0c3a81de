package runtimefiles

import (
	"context"
	"maps"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// Deps is a set of resolved packages that a memory snapshot holds
// loaded: its modules were imported before the snapshot was taken, so an
// interpreter restored from it has them without the import's cost. The
// snapshot is of the wasm memory only: the packages' files, which Pyodide's
// file system keeps outside it, are installed again into every restored
// interpreter (cheap: unpacking, no import), so that what the modules read
// or import later is there.
type Deps struct {
	Wheels  []bridge.Payload // in install order
	Modules []string         // the top-level modules imported
	Files   map[string]bool  // the wheels' file names: installed in every interpreter
}

// With returns rt with the snapshot named key, which holds set
// loaded, making it when the cache has none.
func (m *Maker) With(ctx context.Context, rt *Files, key string, set *Deps, progress func(string)) (*Files, error) {
	l := Layout{rt.Root}
	with := *rt
	with.Snapshot, with.CodeCache, with.Deps, with.needed = l.Snapshot(key), l.CodeCache(key), set, nil
	if checkSnapshot(with.Snapshot) != nil || checkTemplate(with.CodeCache) != nil {
		progress("making a memory snapshot with " + strings.Join(set.Modules, ", ") + " loaded")
		if err := m.MakeSnapshot(ctx, &with, with.Snapshot, with.CodeCache); err != nil {
			return nil, err
		}
	}
	with.listNeeded()
	return &with, nil
}

// Preinstalled returns the files every interpreter started from rt has
// installed: those of --deps when its snapshot holds them.
func (rt *Files) Preinstalled() map[string]bool {
	if rt != nil && rt.Deps != nil {
		return maps.Clone(rt.Deps.Files)
	}
	return map[string]bool{}
}
