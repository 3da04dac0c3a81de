package supervisor

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
)

// TestCallsLeaveDenoDirAlone checks that workers write nothing into the
// cache's DENO_DIR, where deno keeps caches it writes whatever --deny-write
// says: a call that could add to them could plant code for later workers.
// The cache is a private copy (hard links) of the shared one, so that other
// tests' workers, or other checkouts' older builds, cannot change it meanwhile.
func TestCallsLeaveDenoDirAlone(t *testing.T) {
	shared := testCache(t)
	private := t.TempDir()
	for _, dir := range []string{"pyodide", "snapshots", "codecache"} {
		if _, err := os.Stat(filepath.Join(shared, dir)); err != nil {
			continue // the warmup below makes it
		}
		if err := linkTree(filepath.Join(shared, dir), filepath.Join(private, dir)); err != nil {
			t.Fatalf("copy the cache's %s: %v", dir, err)
		}
	}
	denoDir := runtimefiles.Layout{Root: private}.DenoDir()
	if err := os.MkdirAll(denoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Workers: 1, CacheDir: private})
	// The code cache template that workers copy must not change either.
	codeCache := s.runtime.Files().CodeCache
	if codeCache == "" {
		t.Fatal("no code cache template")
	}
	before := append(tree(t, denoDir), tree(t, codeCache)...)

	entries, _ := filepath.Glob(filepath.Join(private, "pyodide", "*", "node_modules", "pyodide", "pyodide.mjs"))
	if len(entries) != 1 {
		t.Fatalf("pyodide.mjs in %s: %q", private, entries)
	}
	module, err := filepath.EvalSymlinks(entries[0]) // the path the runner may read
	if err != nil {
		t.Fatal(err)
	}
	// Modules loaded during a call would be analysed and code-cached by deno.
	// Python has no import() and workers refuse code from strings, so a
	// module Worker made from a data: URL imports it and posts its version.
	// On Windows the URL's path is /C:/...
	url := filepath.ToSlash(module)
	if !strings.HasPrefix(url, "/") {
		url = "/" + url
	}
	code := fmt.Sprintf(`import js
from asyncio import Future
from pyodide.ffi import create_proxy, to_js
version = Future()
source = "import('file://%s?call').then((m) => postMessage(m.version), (e) => postMessage('failed: ' + e))"
worker = js.Worker.new('data:text/javascript,' + js.encodeURIComponent(source), to_js({'type': 'module'}, dict_converter=js.Object.fromEntries))
worker.onmessage = create_proxy(lambda e: version.set_result(e.data))
try:
    v = await version
finally:
    worker.terminate()
v`, url)
	res, _ := run(t, s, code)
	if res.Status != StatusSuccess || !regexp.MustCompile(`^"\d+\.\d+\.\d+"$`).Match(res.ReturnValue) {
		t.Fatalf("the call importing pyodide.mjs: %+v", res)
	}
	// The Cache API stores what it is given under DENO_DIR, whatever
	// --deny-write says: one call could leave data for the next.
	run(t, s, "import js\ntry:\n    await js.caches.open('left-for-the-next-call')\nexcept Exception as e:\n    print(e)")
	if after := append(tree(t, denoDir), tree(t, codeCache)...); !slices.Equal(before, after) {
		t.Errorf("DENO_DIR changed during calls:\nbefore: %q\n after: %q", before, after)
	}
}

// linkTree makes dst a copy of src whose files are hard links, as GNU's
// cp -al does (macOS's cp has no -l, Windows no cp).
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return os.Link(path, to)
		default: // a symlink; on Windows also a junction, as deno makes in node_modules
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
	})
}

// tree lists every file under dir with its size and modification time.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, fmt.Sprintf("%s %d %s", path, info.Size(), info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
