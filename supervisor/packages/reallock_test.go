package packages_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/denotest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// TestRealLock reads the lock file of the pinned Pyodide in the cache the
// tests share, installing Pyodide there first when it is not yet (the
// lock file is not part of the repository).
func TestRealLock(t *testing.T) {
	path := realLockFile(t)
	l, err := packages.ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	table := l.ImportTable()
	for imp, pkg := range map[string]string{"yaml": "pyyaml", "numpy": "numpy", "pydantic_core": "pydantic-core", "sklearn": "scikit-learn", "PIL": "pillow"} {
		if table[imp] != pkg {
			t.Errorf("import %s → %q, want %q", imp, table[imp], pkg)
		}
	}
	for _, p := range l.Packages {
		for _, d := range p.Depends {
			if _, ok := l.Package(d); !ok {
				t.Errorf("%s depends on %s, which the lock lacks", p.Name, d)
			}
		}
	}
	tags := l.PlatformTags()
	if len(tags) == 0 {
		t.Fatal("no platform tags")
	}
	t.Logf("%s: %d packages, %d imports, Python %s, platform tags %v", path, len(l.Packages), len(table), l.Info.Python, tags)
	// Resolving against it (no download: the host is never contacted).
	r, err := packages.NewResolver(packages.Config{Lock: l, PyodideURL: filepath.Dir(path)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	plan, err := r.Resolve(ctx, []string{"pydantic>=2", "scipy"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range plan.Files {
		names = append(names, f.Name+"=="+f.Version)
	}
	t.Logf("plan: %v", names)
	pos := func(name string) int {
		return slices.IndexFunc(plan.Files, func(f packages.PlanFile) bool { return f.Name == name })
	}
	if pos("pydantic-core") < 0 || pos("pydantic-core") > pos("pydantic") || pos("numpy") > pos("scipy") || pos("typing-extensions") > pos("pydantic-core") {
		t.Errorf("plan not in dependency order: %v", names)
	}
}

// realLockFile returns the lock file of the pinned Pyodide where the
// supervisor installs it in the shared cache, warming a supervisor up
// there first when it is missing: a fresh machine, or one whose cache is
// not ~/.cache (macOS's), must not skip the test.
func realLockFile(t *testing.T) string {
	t.Helper()
	deno := denotest.Deno(t)
	cache, err := denotest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	pin, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cache, "pyodide", pin, "node_modules", "pyodide", packages.LockFileName)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return path // a stat's other errors are ReadLock's to report
	}
	s := supervisor.New(supervisor.Config{Deno: deno, CacheDir: cache, Workers: 1}, zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := s.Warmup(ctx, func(step string) { t.Log(step) }); err != nil {
		t.Fatalf("warm up in %s: %v", cache, err)
	}
	return path
}
