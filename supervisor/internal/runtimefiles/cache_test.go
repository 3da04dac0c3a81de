package runtimefiles

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// TestCacheLayoutIsCachedirs: every place the runtime and the package cache
// put things is an entry of the kind package cachedir says, and both halves
// of a snapshot pair are one entry. If the layout changes, cachedir must.
func TestCacheLayoutIsCachedirs(t *testing.T) {
	d, err := cachedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{d.Root()}
	pkgs, err := packages.NewCache(filepath.Join(d.Root(), "packages"), packages.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const key = "0123456789abcdef"
	snapshot := filepath.ToSlash(filepath.Join("snapshots", key+".bin"))
	const sha = "3f0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	for _, tt := range []struct {
		path string
		kind cachedir.Kind
		name string
	}{
		{filepath.Join(l.Program(), js.Entry), cachedir.Program, "js/" + js.Version()},
		{filepath.Join(l.Install("314.0.7"), "node_modules", "pyodide"), cachedir.Pyodide, "pyodide/314.0.7"},
		{l.Snapshot(key), cachedir.Snapshot, snapshot},
		{l.CodeCache(key), cachedir.Snapshot, snapshot},
		{pkgs.Path(sha, "six-1.17.0-py2.py3-none-any.whl"), cachedir.Wheel, "packages/wheels/sha256/" + sha},
	} {
		e, err := d.Entry(tt.path)
		if err != nil || e.Kind != tt.kind || e.Name != tt.name {
			t.Errorf("Entry(%s) = %+v, %v; want %s %s", tt.path, e, err, tt.kind, tt.name)
		}
	}
	for _, p := range []string{l.DenoDir(), filepath.Join(d.Root(), ".lock"), filepath.Join(d.Root(), "files", "1")} {
		if e, err := d.Entry(p); err == nil {
			t.Errorf("%s is entry %+v: it must never be pruned", p, e)
		}
	}
}

// TestPruneWaitsForLockDir: prunes never run while a server prepares its
// runtime under lockDir.
func TestPruneWaitsForLockDir(t *testing.T) {
	root := t.TempDir()
	unlock, err := lockDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	d, _ := cachedir.Open(root)
	waited := false
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := d.Prune(ctx, 1, cachedir.PruneOptions{OnWait: func() { waited = true }}); err == nil || !waited {
		t.Errorf("Prune while lockDir is held: %v, waited %v; want it to wait", err, waited)
	}
}

// fakeRuntime makes the files of a runtime in the cache root, with the
// entries' times long ago, and returns it.
func fakeRuntime(t *testing.T, root, key string) *Files {
	t.Helper()
	l := Layout{root}
	pyodideVersion, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	rt := &Files{
		Entry:     filepath.Join(l.Program(), js.Entry),
		Pyodide:   filepath.Join(l.Install(pyodideVersion), "node_modules", ".deno", "pyodide@"+pyodideVersion, "node_modules", "pyodide"),
		Snapshot:  l.Snapshot(key),
		CodeCache: l.CodeCache(key),
	}
	for _, f := range []string{rt.Entry, filepath.Join(rt.Pyodide, "pyodide.asm.wasm"), rt.Snapshot, filepath.Join(rt.CodeCache, "v8_code_cache_v2")} {
		writeOld(t, f)
	}
	for _, p := range []string{l.Program(), l.Install(pyodideVersion), rt.Snapshot, rt.CodeCache} {
		makeOld(t, p)
	}
	return rt
}

// writeOld writes a file of 1000 bytes at path, making its directory.
func writeOld(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	makeOld(t, path)
}

// makeOld sets path's times to a day ago.
func makeOld(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-24 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// listed returns the names of the entries of root, and of those in use.
func listed(t *testing.T, root string) (all, inUse []string) {
	t.Helper()
	d, _ := cachedir.Open(root)
	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		all = append(all, e.Name)
		if e.InUse {
			inUse = append(inUse, e.Name)
		}
	}
	slices.Sort(all)
	slices.Sort(inUse)
	return all, inUse
}

// TestSupervisorHoldsItsCacheEntries: a supervisor holds its runtime's
// entries and what Cache.Hold is given, prunes the rest beyond its
// limit once its runtime is ready, follows a new runtime, and lets go of
// everything when it closes. No deno is needed: the runtime is made up.
func TestSupervisorHoldsItsCacheEntries(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const key, newKey = "0123456789abcdef", "fedcba9876543210"
	rt := fakeRuntime(t, root, key)
	pyodideVersion, _ := js.PyodideVersion()
	program, install := "js/"+js.Version(), "pyodide/"+pyodideVersion
	snapshot, newSnapshot := "snapshots/"+key+".bin", "snapshots/"+newKey+".bin"
	// Another build's program and an old wheel: unused.
	writeOld(t, filepath.Join(root, "js", "00000000000000aa", js.Entry))
	makeOld(t, filepath.Join(root, "js", "00000000000000aa"))
	wheel := filepath.Join(root, "packages", "wheels", "sha256", "3f0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd")
	writeOld(t, filepath.Join(wheel, "six-1.17.0-py2.py3-none-any.whl"))
	makeOld(t, wheel)

	// The supervisor's part: its context, its tracker, its current runtime.
	ctx, cancel := context.WithCancel(context.Background())
	var wg tracker.Tracker
	var current atomic.Pointer[Files]
	current.Store(rt)
	c := NewCache(ctx, &wg, zap.NewNop(), root, 1, current.Load)
	closeCache := func() {
		cancel()
		<-wg.Shut()
		c.Release()
	}
	defer closeCache()
	c.HoldRuntime(rt) // starts the upkeep, which prunes at once
	for deadline := time.Now().Add(30 * time.Second); ; {
		all, _ := listed(t, root)
		if len(all) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entries %q: the first prune did not remove the unused ones", all)
		}
		time.Sleep(20 * time.Millisecond) // bounded by the deadline
	}
	want := []string{program, install, snapshot}
	slices.Sort(want)
	if all, inUse := listed(t, root); !slices.Equal(all, want) || !slices.Equal(inUse, want) {
		t.Fatalf("entries %q, in use %q; want the runtime's %q, all in use", all, inUse, want)
	}

	// What Cache.Hold holds stays too, and goes once released and old.
	writeOld(t, filepath.Join(wheel, "six-1.17.0-py2.py3-none-any.whl"))
	release, err := c.Hold(filepath.Join(wheel, "six-1.17.0-py2.py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	makeOld(t, wheel)
	c.prune()
	if _, err := os.Stat(wheel); err != nil {
		t.Fatalf("a held wheel was pruned: %v", err)
	}
	release()
	release() // a second call does nothing
	makeOld(t, wheel)
	c.prune()
	if _, err := os.Stat(wheel); err == nil {
		t.Error("the released wheel was not pruned")
	}
	if _, err := c.Hold(filepath.Join(root, "deno")); err == nil {
		t.Error("Hold of deno's directory: no error")
	}

	// A new runtime (as repair makes) is held instead of the old one.
	next := *rt
	next.Snapshot, next.CodeCache = Layout{root}.Snapshot(newKey), Layout{root}.CodeCache(newKey)
	writeOld(t, next.Snapshot)
	writeOld(t, filepath.Join(next.CodeCache, "v8_code_cache_v2"))
	current.Store(&next)
	c.HoldRuntime(&next)
	want = []string{program, install, snapshot, newSnapshot}
	slices.Sort(want)
	wantInUse := []string{program, install, newSnapshot}
	slices.Sort(wantInUse)
	if all, inUse := listed(t, root); !slices.Equal(all, want) || !slices.Equal(inUse, wantInUse) {
		t.Errorf("after the new runtime: entries %q, in use %q; want in use %q", all, inUse, wantInUse)
	}

	// Closed, it holds nothing.
	closeCache()
	if _, inUse := listed(t, root); len(inUse) != 0 {
		t.Errorf("in use after Close: %q", inUse)
	}
	if _, err := c.Hold(rt.Snapshot); err == nil {
		t.Error("Hold after Close: no error")
	}
}

// TestCurrentCacheEntries: the cache command keeps this build's program and
// Pyodide install.
func TestCurrentCacheEntries(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := cachedir.Open(root)
	pyodideVersion, _ := js.PyodideVersion()
	var got []string
	for _, p := range CurrentEntries(root) {
		e, err := d.Entry(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Name)
	}
	if want := []string{"js/" + js.Version(), "pyodide/" + pyodideVersion}; !slices.Equal(got, want) {
		t.Errorf("CurrentCacheEntries: %q, want %q", got, want)
	}
}
