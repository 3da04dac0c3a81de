package packages

import (
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"

	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wheel describes a test wheel with no Requires-Python.
func wheel(name, version, tag string, requires ...string) pt.Wheel {
	return pt.Wheel{Name: name, Version: version, Tag: tag, Requires: requires}
}

// testLock is a Pyodide host: a lock file and the files next to it.
type testLock struct {
	lock  []byte
	files map[string][]byte
}

// makeLock builds a lock with "builtin" 1.5.0 (a pure wheel depending on
// the shared library "libfoo", with an extra "more" that needs alpha) and
// "builtin-native" (a Pyodide platform wheel).
func makeLock(t *testing.T) *testLock {
	t.Helper()
	tl := &testLock{files: map[string][]byte{}}
	builtin, _ := wheel("builtin", "1.5.0", "py3-none-any", `alpha>=1.1; extra == "more"`, "libfoo").Build()
	native, _ := wheel("builtin_native", "0.3", "cp314-cp314-pyemscripten_2026_0_wasm32").Build()
	tl.files["builtin-1.5.0-py3-none-any.whl"] = builtin
	tl.files["builtin_native-0.3-cp314-cp314-pyemscripten_2026_0_wasm32.whl"] = native
	tl.files["libfoo-1.0.zip"] = []byte("a zip of shared libraries")
	pkgs := map[string]any{
		"builtin": map[string]any{
			"name": "builtin", "version": "1.5.0", "file_name": "builtin-1.5.0-py3-none-any.whl",
			"sha256": pt.SHA256(builtin), "depends": []string{"libfoo"}, "imports": []string{"builtin", "bi"},
			"package_type": "package", "install_dir": "site",
		},
		"builtin-native": map[string]any{
			"name": "builtin_native", "version": "0.3", "file_name": "builtin_native-0.3-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
			"sha256": pt.SHA256(native), "depends": []string{"Builtin"}, "imports": []string{"builtin_native"},
			"package_type": "package", "install_dir": "site",
		},
		"libfoo": map[string]any{
			"name": "libfoo", "version": "1.0", "file_name": "libfoo-1.0.zip",
			"sha256": pt.SHA256(tl.files["libfoo-1.0.zip"]), "depends": []string{}, "imports": []string{},
			"package_type": "shared_library", "install_dir": "dynlib",
		},
	}
	doc := map[string]any{
		"info":     map[string]string{"abi_version": "2026_0", "arch": "wasm32", "platform": "emscripten_5_0_3", "python": "3.14.2"},
		"packages": pkgs,
	}
	var err error
	if tl.lock, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	return tl
}

// location serves or writes the Pyodide host and returns its location.
func (tl *testLock) location(t *testing.T, dir bool) string {
	t.Helper()
	if dir {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "pyodide-lock.json"), tl.lock, 0o644); err != nil {
			t.Fatal(err)
		}
		for name, data := range tl.files {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name := strings.TrimPrefix(req.URL.Path, "/pyodide/")
		if name == "pyodide-lock.json" {
			w.Write(tl.lock)
			return
		}
		if data, ok := tl.files[name]; ok {
			w.Write(data)
			return
		}
		http.NotFound(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/pyodide/"
}

func (tl *testLock) parsed(t *testing.T) *Lock {
	t.Helper()
	l, err := ParseLock(tl.lock)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// standardRepo is the index most resolver tests use.
func standardRepo(t *testing.T) *pt.Repo {
	t.Helper()
	r := &pt.Repo{}
	r.Add(wheel("alpha", "1.0", "py3-none-any"))
	r.Add(wheel("alpha", "1.1", "py2.py3-none-any"))
	r.Add(wheel("alpha", "2.0", "py3-none-any"))
	r.AddSdist("alpha", "2.0")
	r.Add(wheel("alpha", "2.5", "py3-none-any")).Yanked = true
	r.Add(wheel("alpha", "3.0a1", "py3-none-any"))
	r.Add(wheel("Beta", "1.0", "py3-none-any",
		`gamma>=1.0; extra == "fast"`,
		`delta; sys_platform == "emscripten"`,
		`epsilon; sys_platform == "linux"`,
		"alpha<2"))
	r.Add(wheel("gamma", "1.0", "py3-none-any"))
	r.Add(wheel("delta", "1.0", "py3-none-any"))
	r.Add(wheel("epsilon", "1.0", "py3-none-any"))
	r.Add(wheel("native", "1.0", "cp314-cp314-manylinux_2_17_x86_64"))
	r.AddSdist("native", "1.0")
	r.Add(wheel("pnative", "1.0", "cp314-cp314-manylinux_2_17_x86_64"))
	r.Add(wheel("pnative", "1.0", "py3-none-any"))
	r.Add(wheel("pnative", "1.0", "cp314-cp314-pyemscripten_2026_0_wasm32"))
	r.Add(wheel("pnative", "1.0", "cp312-abi3-pyemscripten_2026_0_wasm32"))
	r.Add(pt.Wheel{Name: "old", Version: "1.0", RequiresPython: ">=3.8"})
	r.Add(pt.Wheel{Name: "old", Version: "2.0", RequiresPython: "<3.10"})
	r.Add(wheel("zeta", "1.0", "py3-none-any", "builtin<1"))
	r.Add(wheel("eta", "1.0", "py3-none-any", "alpha>=2"))
	r.Add(wheel("uses-builtin", "1.0", "py3-none-any", "builtin>=1.0", "alpha"))
	r.Add(wheel("bad", "1.0", "py3-none-any")).SHA256 = strings.Repeat("0", 64)
	return r
}

// kindOf asserts err is an *Error of kind want and returns it.
func wantKind(t *testing.T, err error, want Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want kind %v", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Kind != want {
		t.Fatalf("kind = %v, want %v; error: %v", e.Kind, want, err)
	}
	return e
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// addLockWheel adds the wheel w to the lock as a package with the given
// depends, its file served next to the lock.
func (tl *testLock) addLockWheel(t *testing.T, w pt.Wheel, depends ...string) {
	t.Helper()
	data, _ := w.Build()
	tl.files[w.Filename()] = data
	var doc map[string]any
	if err := json.Unmarshal(tl.lock, &doc); err != nil {
		t.Fatal(err)
	}
	doc["packages"].(map[string]any)[pt.Normalize(w.Name)] = map[string]any{
		"name": w.Name, "version": w.Version, "file_name": w.Filename(), "sha256": pt.SHA256(data),
		"depends": append([]string{}, depends...), "imports": []string{w.Module()},
		"package_type": "package", "install_dir": "site",
	}
	var err error
	if tl.lock, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
}
