package main_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// hostileWheel is a wheel that lies: its RECORD lists files it does not
// hold and hashes that are not theirs, and its entries' names leave any
// directory it would be unpacked into.
func hostileWheel(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range map[string]string{
		"../../../escaped.txt":          "out",
		"/tmp/escaped.txt":              "out",
		"liar/__init__.py":              "",
		"liar-1.0.dist-info/METADATA":   "Metadata-Version: 2.1\nName: liar\nVersion: 1.0\n",
		"liar-1.0.dist-info/WHEEL":      "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"liar-1.0.dist-info/RECORD":     "../../escaped.txt,sha256=AAAA,3\nliar/__init__.py,sha256=BBBB,999\n/etc/passwd,,\n",
		"liar-1.0.data/scripts/../../x": "out",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hostileIndex serves, on 127.0.0.1, an index whose every project is an
// attack on fetch: see TestFetchHostileIndex.
func hostileIndex(t *testing.T) *httptest.Server {
	t.Helper()
	good, _ := pt.Wheel{Name: "fine", Version: "1.0"}.Build()
	liar := hostileWheel(t)
	files := map[string][]byte{
		"liar-1.0-py3-none-any.whl":      liar,
		"hugemeta-1.0-py3-none-any.whl":  good,
		"slowmeta-1.0-py3-none-any.whl":  good,
		"badhash-1.0-py3-none-any.whl":   good,
		"escape-1.0-py3-none-any.whl":    good,
		"manyfiles-1.0-py3-none-any.whl": good,
	}
	type file = map[string]any
	entry := func(name string, data []byte) file {
		return file{"filename": name, "url": "/files/" + name, "hashes": map[string]string{"sha256": pt.SHA256(data)}}
	}
	pages := map[string][]file{
		"liar":     {entry("liar-1.0-py3-none-any.whl", liar)},
		"hugemeta": {entry("hugemeta-1.0-py3-none-any.whl", good)},
		"slowmeta": {entry("slowmeta-1.0-py3-none-any.whl", good)},
		"badhash":  {entry("badhash-1.0-py3-none-any.whl", append(slices.Clone(good), '!'))},
		"escape": {
			entry("../../escape-1.0-py3-none-any.whl", good),
			{"filename": "escape-1.0-py3-none-any.whl", "url": "file:///etc/passwd", "hashes": map[string]string{"sha256": pt.SHA256(good)}},
			entry("escape-1.0-py3-none-any\x1b]0;owned\x07.whl", good),
		},
	}
	pages["hugemeta"][0]["core-metadata"] = true
	pages["slowmeta"][0]["core-metadata"] = true
	for i := range 100_001 {
		pages["manyfiles"] = append(pages["manyfiles"], entry(fmt.Sprintf("manyfiles-1.0.%d-py3-none-any.whl", i), good))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.PathValue("project")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"meta": map[string]string{"api-version": "1.1"}, "files": page})
	})
	mux.HandleFunc("GET /files/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		switch name {
		case "hugemeta-1.0-py3-none-any.whl.metadata":
			// Past the limit, and without end were it read on.
			_, _ = io.WriteString(w, "Metadata-Version: 2.1\nName: hugemeta\nVersion: 1.0\n")
			line := []byte(strings.Repeat("Summary: x\n", 1<<12))
			for written := 0; written <= 32<<20; written += len(line) {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
			return
		case "slowmeta-1.0-py3-none-any.whl.metadata":
			_, _ = io.WriteString(w, "Metadata-Version: 2.1\nName: slowmeta\nVersion: 1.0\nSummary: x"+strings.Repeat("\n x", 4<<20/3)+"\n")
			return
		}
		data, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestFetchHostileIndex: fetch --mirror against a live hostile index. Each
// attack is refused with an error that says what, or is harmless: no file
// is written outside the cache and the mirror, none of the index's files
// goes into the mirror, nothing of the index reaches the terminal raw, and
// a huge or pathological page or metadata file is refused or read in one
// linear pass (a metadata file of continuation lines hung fetch for hours,
// a page of 64 MiB of links held 2 GiB while parsed).
func TestFetchHostileIndex(t *testing.T) {
	s := setup(t)
	cacheDir, _ := fetchCache(t, s)
	index := hostileIndex(t).URL + "/simple/"
	down := httptest.NewServer(http.NotFoundHandler())
	host := down.URL + "/"
	down.Close()
	mirror := filepath.Join(t.TempDir(), "mirror")
	flags := []string{"--cache-dir", cacheDir, "--index-url", index, "--pyodide-index-url", host, "--mirror", mirror, "fetch"}
	tests := []struct {
		project string
		ok      bool
		want    string // in stdout when ok, else in stderr
	}{
		{"liar", true, "liar 1.0 from the index, "},
		{"slowmeta", true, "slowmeta 1.0 from the index, "},
		{"hugemeta", false, "/files/hugemeta-1.0-py3-none-any.whl.metadata is larger than 16777216 bytes"},
		{"badhash", false, `cannot install "badhash": badhash-1.0-py3-none-any.whl has sha256 ` + pt.SHA256(mustBuild(pt.Wheel{Name: "fine", Version: "1.0"})) + ", but the package index says"},
		{"escape", false, `cannot install "escape"`},
		{"manyfiles", false, "lists more than 100000 files"},
	}
	for _, tt := range tests {
		t.Run(tt.project, func(t *testing.T) {
			ok, out, errOut := runFetch(t, s, append(flags, tt.project)...)
			if ok != tt.ok || !strings.Contains(map[bool]string{true: out, false: errOut}[tt.ok], tt.want) {
				t.Errorf("fetch %s: ok %v, want %v and %q; stdout:\n%s\nstderr:\n%s", tt.project, ok, tt.ok, tt.want, out, errOut)
			}
			if strings.ContainsAny(out+errOut, "\x1b\x07") {
				t.Errorf("fetch %s printed a control character of the index's:\n%q", tt.project, out+errOut)
			}
		})
	}
	entries, err := os.ReadDir(mirror)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != packages.LockFileName {
		t.Errorf("the mirror holds %v, want %s alone: the index's files are not Pyodide's", entries, packages.LockFileName)
	}
	cwd, _ := os.Getwd()
	for _, dir := range []string{cwd, cacheDir, mirror} {
		for range 5 {
			for _, name := range []string{"escaped.txt", "x"} {
				if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
					t.Errorf("the hostile wheel's %s is in %s", name, dir)
				}
			}
			dir = filepath.Dir(dir)
		}
	}
	err = filepath.WalkDir(filepath.Join(cacheDir, "packages", "wheels"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "badhash") {
			t.Errorf("a file that failed its check is kept: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustBuild is w's wheel.
func mustBuild(w pt.Wheel) []byte {
	data, _ := w.Build()
	return data
}
