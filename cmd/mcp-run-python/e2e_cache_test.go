package main_test

// End-to-end tests of the cache mode: the real binary lists and prunes a
// cache directory, with no deno at all, and sees what a running server
// holds. Prunes run on fresh directories only, never on the shared cache.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir/cachedirtest"
)

// noDeno is a deno that does not exist: the cache mode must not need one.
const noDeno = "/nonexistent/deno"

// runCache runs the binary's cache mode with args and the environment's
// extra variables, and returns its stdout; it must succeed.
func runCache(t *testing.T, s *e2eSetup, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append([]string{"cache", "--deno", noDeno}, args...)...)
	cmd.Env = append(serverEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cache %q: %v\nstderr: %s", args, err, stderr.String())
	}
	return stdout.String()
}

// cacheRow is an entry of the cache mode's listing.
type cacheRow struct {
	kind, inUse string
}

// cacheRows parses the cache mode's listing into its entries, by their
// ENTRY column (whose first member names an entry).
func cacheRows(t *testing.T, out string) map[string]cacheRow {
	t.Helper()
	lines := strings.Split(out, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "KIND ") {
			head = i
			break
		}
	}
	if head < 0 {
		t.Fatalf("no table in the listing:\n%s", out)
	}
	inUseAt, entryAt := strings.Index(lines[head], "IN USE"), strings.Index(lines[head], "ENTRY")
	rows := map[string]cacheRow{}
	for _, l := range lines[head+1:] {
		if l == "" {
			break
		}
		if len(l) <= entryAt {
			t.Fatalf("short row %q in:\n%s", l, out)
		}
		name, _, _ := strings.Cut(l[entryAt:], " + ")
		rows[name] = cacheRow{kind: strings.Fields(l)[0], inUse: strings.TrimSpace(l[inUseAt:entryAt])}
	}
	return rows
}

// TestCacheCommandPrunes runs the binary on a fresh cache directory of
// made-up entries: it lists them, then prunes the least recently used
// beyond --cache-limit, sparing what another process holds, this build's
// runtime and what is not an entry.
func TestCacheCommandPrunes(t *testing.T) {
	s := setup(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pyodide, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	wheelA := "packages/wheels/sha256/" + strings.Repeat("a1", 32)
	wheelB := "packages/wheels/sha256/" + strings.Repeat("b2", 32)
	for rel, age := range map[string]time.Duration{
		"js/" + js.Version():                     10 * time.Hour,
		"pyodide/" + pyodide:                     10 * time.Hour,
		"js/00000000000000aa":                    9 * time.Hour,
		"snapshots/00000000000000aa.bin":         8 * time.Hour,
		"codecache/00000000000000aa":             8 * time.Hour,
		wheelA:                                   7 * time.Hour,
		"packages/index/00000000000000aa/x.json": 6 * time.Hour,
		wheelB:                                   5 * time.Hour,
		"snapshots/00000000000000bb.bin":         4 * time.Hour,
		"deno/npm/registry.npmjs.org/x":          20 * time.Hour,
		"files/0":                                20 * time.Hour,
	} {
		cachedirtest.PutEntry(t, root, rel, 1<<20, age)
	}
	// Another process (this test) holds wheel A, as a server would.
	h, err := cachedir.HoldEntry(context.Background(), filepath.Join(root, filepath.FromSlash(wheelA)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	old := time.Now().Add(-7 * time.Hour)
	if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(wheelA)), old, old); err != nil {
		t.Fatal(err)
	}

	out := runCache(t, s, nil, "--cache-dir", root)
	rows := cacheRows(t, out)
	want := map[string]cacheRow{
		"js/" + js.Version():                     {"program", "no"},
		"pyodide/" + pyodide:                     {"pyodide", "no"},
		"js/00000000000000aa":                    {"program", "no"},
		"snapshots/00000000000000aa.bin":         {"snapshot", "no"},
		wheelA:                                   {"wheel", "yes"},
		"packages/index/00000000000000aa/x.json": {"index", "no"},
		wheelB:                                   {"wheel", "no"},
		"snapshots/00000000000000bb.bin":         {"snapshot", "no"},
	}
	if len(rows) != len(want) {
		t.Errorf("%d entries listed, want %d:\n%s", len(rows), len(want), out)
	}
	for name, w := range want {
		if rows[name] != w {
			t.Errorf("entry %s: %+v, want %+v", name, rows[name], w)
		}
	}
	if !strings.Contains(out, "8 entries, 9.0 MiB; 1.0 MiB of them in use") || !strings.Contains(out, "deno 1.0 MiB, files 1.0 MiB") {
		t.Errorf("totals wrong:\n%s", out)
	}

	// A stray MCP_RUN_PYTHON_PRUNE lists, and removes nothing.
	if again := runCache(t, s, []string{"MCP_RUN_PYTHON_PRUNE=1"}, "--cache-dir", root); !strings.Contains(again, "KIND ") {
		t.Errorf("with MCP_RUN_PYTHON_PRUNE set: %s", again)
	}

	// 9 MiB down to 4: the old program, the old pair (2 MiB), the index
	// page and wheel B go; this build's program and Pyodide are kept,
	// wheel A is held, and the newest snapshot fits.
	out = runCache(t, s, []string{"MCP_RUN_PYTHON_CACHE_LIMIT=4MiB"}, "--prune", "--cache-dir", root)
	for _, w := range []string{
		"removed program js/00000000000000aa,",
		"removed snapshot snapshots/00000000000000aa.bin + codecache/00000000000000aa, 2.0 MiB",
		"removed index packages/index/00000000000000aa/x.json,",
		"removed wheel " + wheelB + ",",
		"removed 4 entries, 5.0 MiB; the entries take 4.0 MiB\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("prune output lacks %q:\n%s", w, out)
		}
	}
	left := cacheRows(t, runCache(t, s, nil, "--cache-dir", root))
	for _, name := range []string{"js/" + js.Version(), "pyodide/" + pyodide, wheelA, "snapshots/00000000000000bb.bin"} {
		if _, ok := left[name]; !ok {
			t.Errorf("%s was removed", name)
		}
	}
	if len(left) != 4 {
		t.Errorf("left %v, want 4 entries", left)
	}
	for _, rel := range []string{"deno/npm/registry.npmjs.org/x/data", "files/0/data", "js/" + js.Version() + "/data"} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	trash, _ := filepath.Glob(filepath.Join(root, "*", ".trash-*"))
	if len(trash) > 0 {
		t.Errorf("trash left: %q", trash)
	}
}

// TestCacheCommandSeesARunningServer lists the shared cache while a server
// uses it: the runtime it prepared is in use. Only listed, never pruned.
func TestCacheCommandSeesARunningServer(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStateless)
	tg.connect(t).expectWorks(t)
	rows := cacheRows(t, runCache(t, s, nil, "--cache-dir", s.cacheDir))
	pyodide, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"js/" + js.Version(), "pyodide/" + pyodide} {
		if row := rows[name]; row.inUse != "yes" {
			t.Errorf("%s: %+v, want in use by the server", name, row)
		}
	}
	snapshots := 0
	for name, row := range rows {
		if row.kind == "snapshot" && row.inUse == "yes" {
			snapshots++
			if !strings.HasPrefix(name, "snapshots/") {
				t.Errorf("snapshot entry %q", name)
			}
		}
	}
	if snapshots == 0 {
		t.Error("no snapshot in use by the server")
	}
}
