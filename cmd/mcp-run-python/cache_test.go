package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir/cachedirtest"
)

// TestCacheMode: the cache mode lists and prunes without the engine doing
// anything.
func TestCacheMode(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pyodide, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	cachedirtest.PutEntry(t, root, "js/"+js.Version(), mib, 9*time.Hour)
	cachedirtest.PutEntry(t, root, "pyodide/"+pyodide, mib, 8*time.Hour)
	cachedirtest.PutEntry(t, root, "js/0000000000000001", mib, 7*time.Hour)
	cachedirtest.PutEntry(t, root, "snapshots/0123456789abcdef.bin", mib, 6*time.Hour)
	cachedirtest.PutEntry(t, root, "codecache/0123456789abcdef", mib, 6*time.Hour)
	wheel := cachedirtest.PutEntry(t, root, "packages/wheels/sha256/"+strings.Repeat("ab", 32), mib, 5*time.Hour)
	cachedirtest.PutEntry(t, root, "packages/index/0123456789abcdef/six.json", mib, 4*time.Hour)
	cachedirtest.PutEntry(t, root, "packages/wheels/sha256/"+strings.Repeat("cd", 32), mib, time.Minute)
	cachedirtest.PutEntry(t, root, "deno/npm/pyodide", 3*mib, 10*time.Hour)
	cachedirtest.PutEntry(t, root, "files/1", mib, 10*time.Hour)
	h, err := cachedir.HoldEntry(context.Background(), wheel)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	old := time.Now().Add(-5 * time.Hour)
	if err := os.Chtimes(wheel, old, old); err != nil {
		t.Fatal(err)
	}

	e := &fakeEngine{}
	got := runProgram(t, []string{"cache", "--cache-dir", root}, e)
	if got.code != exitOK || got.stderr != "" {
		t.Fatalf("cache: exit %d, stderr %q", got.code, got.stderr)
	}
	for _, want := range []string{
		"cache directory " + root + ", least recently used first",
		"KIND      SIZE     LAST USED",
		"program   1.0 MiB  ",
		"  no      js/" + js.Version() + "\n",
		"  yes     packages/wheels/sha256/" + strings.Repeat("ab", 32) + "\n",
		"snapshot  2.0 MiB  ",
		"snapshots/0123456789abcdef.bin + codecache/0123456789abcdef\n",
		"index     1.0 MiB",
		"7 entries, 8.0 MiB; 1.0 MiB of them in use; --cache-limit 4.0 GiB\n",
		"not counted, never pruned: deno 3.0 MiB, files 1.0 MiB\n",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("listing lacks %q:\n%s", want, got.stdout)
		}
	}
	if strings.Index(got.stdout, "js/"+js.Version()) > strings.Index(got.stdout, "pyodide/"+pyodide) {
		t.Errorf("not least recently used first:\n%s", got.stdout)
	}
	if len(e.codes) != 0 {
		t.Errorf("the cache mode ran code: %q", e.codes)
	}

	got = runProgram(t, []string{"cache", "--prune", "--cache-limit", "3MiB", "--cache-dir", root}, e)
	if got.code != exitOK || got.stderr != "" {
		t.Fatalf("cache --prune: exit %d, stderr %q", got.code, got.stderr)
	}
	for _, want := range []string{
		"cache directory " + root + ", --cache-limit 3.0 MiB\n",
		"removed program js/0000000000000001, 1.0 MiB (last used ",
		"removed snapshot snapshots/0123456789abcdef.bin + codecache/0123456789abcdef, 2.0 MiB",
		"removed index packages/index/0123456789abcdef/six.json, 1.0 MiB",
		"removed 3 entries, 4.0 MiB; the entries take 4.0 MiB\n",
		"still above the limit: the entries left are 1 in use, 1 used recently (in the last 10m0s), 2 kept (this version's worker program and Pyodide)\n",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("prune output lacks %q:\n%s", want, got.stdout)
		}
	}
	for rel, want := range map[string]bool{
		"js/" + js.Version():                                 true,
		"pyodide/" + pyodide:                                 true,
		"js/0000000000000001":                                false,
		"snapshots/0123456789abcdef.bin":                     false,
		"codecache/0123456789abcdef":                         false,
		"packages/wheels/sha256/" + strings.Repeat("ab", 32): true,
		"packages/wheels/sha256/" + strings.Repeat("cd", 32): true,
		"packages/index/0123456789abcdef/six.json":           false,
		"deno/npm/pyodide":                                   true,
		"files/1":                                            true,
	} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); (err == nil) != want {
			t.Errorf("%s there: %v, want %v", rel, err == nil, want)
		}
	}

	got = runProgram(t, []string{"cache", "--prune", "--cache-limit", "0", "--cache-dir", root}, e)
	if got.code != exitOK || !strings.Contains(got.stdout, "no limit: nothing removed; the entries take 4.0 MiB\n") {
		t.Errorf("cache --prune without a limit: exit %d, stdout %q", got.code, got.stdout)
	}
}

// TestCacheModeMissingDirectory: a cache directory that does not exist is
// empty, and the cache mode does not make it.
func TestCacheModeMissingDirectory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{{"cache"}, {"cache", "--prune"}} {
		got := runProgram(t, append(args, "--cache-dir", root), &fakeEngine{})
		if got.code != exitOK || got.stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", args, got.code, got.stderr)
		}
	}
	if _, err := os.Stat(root); err == nil {
		t.Error("the cache mode made the cache directory")
	}
}
