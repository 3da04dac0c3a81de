package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// fakeNatives are the packages TestFetch adds to a copy of Pyodide's lock
// file: a "native" package (Pyodide's platform tag) that depends on a
// pure-Python one, as numpy's dependents do, and one whose host file does
// not match the lock's sha256.
var fakeNatives = []struct {
	wheel   pt.Wheel
	depends []string
	badHash bool
}{
	{wheel: pt.Wheel{Name: "fakenative", Version: "1.0", Source: "from fakelib import LIB\nWHO = 'native+' + LIB\n"}, depends: []string{"fakelib"}},
	{wheel: pt.Wheel{Name: "fakelib", Version: "2.0", Source: "LIB = 'lib'\n"}},
	{wheel: pt.Wheel{Name: "fakebad", Version: "1.0"}, badHash: true},
}

// fetchCache makes a cache directory holding a copy of the installed
// Pyodide whose lock file also lists fakeNatives, and the directory of a
// stand-in for Pyodide's package host that serves their files.
func fetchCache(t *testing.T, s *e2eSetup) (cacheDir, hostDir string) {
	t.Helper()
	version, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	src, err := filepath.EvalSymlinks(filepath.Join(s.cacheDir, "pyodide", version, "node_modules", "pyodide"))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, hostDir = t.TempDir(), t.TempDir()
	dst := filepath.Join(cacheDir, "pyodide", version, "node_modules", "pyodide")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(dst, "pyodide-lock.json")
	lock, err := packages.ReadLock(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	data, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	entries := raw["packages"].(map[string]any)
	for _, n := range fakeNatives {
		w := n.wheel
		if n.depends != nil {
			w.Tag = "cp" + strings.ReplaceAll(lock.PythonVersion(), ".", "") + "-cp" + strings.ReplaceAll(lock.PythonVersion(), ".", "") + "-" + lock.PlatformTags()[0]
		}
		whl, _ := w.Build()
		name := w.Filename()
		sha := pt.SHA256(whl)
		if n.badHash {
			sha = pt.SHA256(append(whl, '!'))
		}
		if err := os.WriteFile(filepath.Join(hostDir, name), whl, 0o644); err != nil {
			t.Fatal(err)
		}
		entries[w.Name] = map[string]any{
			"name": w.Name, "version": w.Version, "file_name": name, "sha256": sha,
			"depends": append([]string{}, n.depends...), "imports": []string{w.Module()},
			"package_type": packages.TypePackage, "install_dir": "site",
		}
	}
	if data, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return cacheDir, hostDir
}

// runFetch runs the fetch mode with args and returns its exit status and
// output.
func runFetch(t *testing.T, s *e2eSetup, args ...string) (ok bool, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append([]string{"--deno", s.deno}, args...)...)
	cmd.Env = serverEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, exited := errors.AsType[*exec.ExitError](err); err != nil && !exited {
		t.Fatalf("fetch %q: %v", args, err)
	}
	return err == nil, out.String(), errOut.String()
}

// TestFetch: the fetch mode downloads a built-in package of Pyodide's and
// its dependencies, hash-checked, from a stand-in for Pyodide's package
// host into the package cache; a server with that cache then imports it
// offline, with the host gone. A file that does not match the lock's
// sha256 fails the fetch, and is not kept.
func TestFetch(t *testing.T) {
	s := setup(t)
	cacheDir, hostDir := fetchCache(t, s)
	host := httptest.NewServer(http.FileServer(http.Dir(hostDir)))
	defer host.Close()
	// The index is never asked: Pyodide's lock names these packages.
	down := httptest.NewServer(http.NotFoundHandler())
	index := down.URL + "/simple/"
	down.Close()
	flags := []string{"--cache-dir", cacheDir, "--index-url", index, "--pyodide-index-url", host.URL + "/"}

	mirror := filepath.Join(t.TempDir(), "mirror")
	ok, out, errOut := runFetch(t, s, append(flags, "--mirror", mirror, "fetch", "fakenative")...)
	if !ok {
		t.Fatalf("fetch fakenative failed:\n%s", errOut)
	}
	wheels := filepath.Join(cacheDir, "packages", "wheels", "sha256")
	for _, want := range []string{
		"fakelib 2.0 from the Pyodide package host, ",
		"fakenative 1.0 from the Pyodide package host, ",
		"2 files, ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fetch output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, wheels) {
		t.Errorf("fetch output names no file under %s:\n%s", wheels, out)
	}

	ok, _, errOut = runFetch(t, s, append(flags, "fetch", "fakebad")...)
	if ok || !strings.Contains(errOut, `cannot install "fakebad==1.0"`) || !strings.Contains(errOut, "sha256") {
		t.Errorf("fetch of a file with the wrong sha256: ok %v, stderr:\n%s", ok, errOut)
	}
	err := filepath.WalkDir(wheels, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "fakebad") {
			t.Errorf("a file that failed its check is kept: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	host.Close()
	if ok, _, errOut := runFetch(t, s, append(flags, "--offline", "fetch", "fakenative")...); !ok {
		t.Errorf("fetch --offline of what the cache holds failed:\n%s", errOut)
	}
	if ok, _, errOut := runFetch(t, s, append(flags, "--offline", "fetch", "fakebad")...); ok || !strings.Contains(errOut, "offline mode, and fakebad-1.0-py3-none-any.whl is not in the package cache") {
		t.Errorf("fetch --offline of what the cache lacks: ok %v, stderr:\n%s", ok, errOut)
	}
	// The mirror stands in for the host: another cache fills from it.
	other := t.TempDir()
	if err := os.CopyFS(filepath.Join(other, "pyodide"), os.DirFS(filepath.Join(cacheDir, "pyodide"))); err != nil {
		t.Fatal(err)
	}
	ok, out, errOut = runFetch(t, s, "--cache-dir", other, "--index-url", index, "--pyodide-index-url", mirror, "fetch", "fakenative")
	if !ok || !strings.Contains(out, "2 files, ") || !strings.Contains(errOut, "downloading fakenative-1.0-") {
		t.Errorf("fetch from the mirror: ok %v, stdout:\n%s\nstderr:\n%s", ok, out, errOut)
	}
	c := startTargetWith(t, s, modeStdio, launch{args: append([]string{"--deno", s.deno, "--offline"}, flags...)}).connect(t)
	c.expectRun(t, "import fakenative\nfakenative.WHO",
		"<status>success</status>\n<dependencies>[\"fakenative\"]</dependencies>\n<return_value>\nnative+lib\n</return_value>")
}
