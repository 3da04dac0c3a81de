package packages

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testFile is one file of a test index or Pyodide host.
type testFile struct {
	project        string // normalized project name
	filename       string
	data           []byte
	sha            string // as listed; wrong on purpose for some tests
	requiresPython string
	yanked         bool
	metadata       []byte // METADATA content (wheels only)
}

// testRepo is a set of distributions served as a simple index.
type testRepo struct {
	files []*testFile
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// makeWheel builds a small, valid wheel: <pkg>/__init__.py and a
// .dist-info with METADATA (Requires-Dist lines as given), WHEEL and RECORD.
func makeWheel(t *testing.T, name, version, tag, requiresPython string, requires []string) (data, metadata []byte) {
	t.Helper()
	mod := strings.ReplaceAll(Normalize(name), "-", "_")
	distInfo := fmt.Sprintf("%s-%s.dist-info", mod, version)
	var md strings.Builder
	fmt.Fprintf(&md, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	if requiresPython != "" {
		fmt.Fprintf(&md, "Requires-Python: %s\n", requiresPython)
	}
	extras := map[string]bool{}
	for _, r := range requires {
		if i := strings.Index(r, `extra == "`); i >= 0 {
			e := r[i+len(`extra == "`):]
			extras[e[:strings.IndexByte(e, '"')]] = true
		}
	}
	for e := range extras {
		fmt.Fprintf(&md, "Provides-Extra: %s\n", e)
	}
	for _, r := range requires {
		fmt.Fprintf(&md, "Requires-Dist: %s\n", r)
	}
	md.WriteString("License: MIT\n  continued license line\n\nA long description.\nWith: a colon line.\n")
	wheel := fmt.Sprintf("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: %s\n", tag)
	files := []struct{ name, body string }{
		{mod + "/__init__.py", fmt.Sprintf("__version__ = %q\n", version)},
		{distInfo + "/METADATA", md.String()},
		{distInfo + "/WHEEL", wheel},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%x,%d\n", f.name, sum, len(f.body))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", distInfo)
	w, err := zw.Create(distInfo + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), []byte(md.String())
}

// addWheel adds a wheel to the repo and returns it for tweaking.
func (r *testRepo) addWheel(t *testing.T, name, version, tag string, requires ...string) *testFile {
	t.Helper()
	data, md := makeWheel(t, name, version, tag, "", requires)
	f := &testFile{
		project:  Normalize(name),
		filename: fmt.Sprintf("%s-%s-%s.whl", strings.ReplaceAll(Normalize(name), "-", "_"), version, tag),
		data:     data, sha: hexSHA(data), metadata: md,
	}
	r.files = append(r.files, f)
	return f
}

// addWheelPy adds a wheel whose metadata and listing carry Requires-Python.
func (r *testRepo) addWheelPy(t *testing.T, name, version, requiresPython string) *testFile {
	t.Helper()
	data, md := makeWheel(t, name, version, "py3-none-any", requiresPython, nil)
	f := &testFile{
		project:  Normalize(name),
		filename: fmt.Sprintf("%s-%s-py3-none-any.whl", Normalize(name), version),
		data:     data, sha: hexSHA(data), metadata: md, requiresPython: requiresPython,
	}
	r.files = append(r.files, f)
	return f
}

func (r *testRepo) addSdist(name, version string) {
	data := []byte("not really a tarball: " + name + version)
	r.files = append(r.files, &testFile{
		project: Normalize(name), filename: fmt.Sprintf("%s-%s.tar.gz", name, version), data: data, sha: hexSHA(data),
	})
}

func (r *testRepo) projects() []string {
	var out []string
	for _, f := range r.files {
		if !contains(out, f.project) {
			out = append(out, f.project)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// indexVariant says how a test index is served.
type indexVariant struct {
	json     bool // PEP 691 JSON, else PEP 503 HTML
	metadata bool // PEP 658 metadata files offered
	dir      bool // a local directory, else an httptest server
}

func (v indexVariant) String() string {
	s := "html"
	if v.json {
		s = "json"
	}
	if v.metadata {
		s += "+metadata"
	}
	if v.dir {
		return s + "/dir"
	}
	return s + "/http"
}

func allVariants() []indexVariant {
	var vs []indexVariant
	for _, j := range []bool{true, false} {
		for _, m := range []bool{true, false} {
			for _, d := range []bool{false, true} {
				vs = append(vs, indexVariant{json: j, metadata: m, dir: d})
			}
		}
	}
	return vs
}

// page renders a project page; links are relative ("../../files/x").
func (r *testRepo) page(project string, v indexVariant) []byte {
	if v.json {
		type file struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython *string           `json:"requires-python,omitempty"`
			Yanked         any               `json:"yanked"`
			CoreMetadata   any               `json:"core-metadata,omitempty"`
			Size           int               `json:"size"`
		}
		doc := struct {
			Meta  map[string]string `json:"meta"`
			Name  string            `json:"name"`
			Files []file            `json:"files"`
		}{Meta: map[string]string{"api-version": "1.1"}, Name: project}
		for _, f := range r.files {
			if f.project != project {
				continue
			}
			jf := file{Filename: f.filename, URL: "../../files/" + f.filename, Hashes: map[string]string{"sha256": f.sha}, Yanked: false, Size: len(f.data)}
			if f.requiresPython != "" {
				rp := f.requiresPython
				jf.RequiresPython = &rp
			}
			if f.yanked {
				jf.Yanked = "broken release"
			}
			if v.metadata && f.metadata != nil {
				jf.CoreMetadata = map[string]string{"sha256": hexSHA(f.metadata)}
			}
			doc.Files = append(doc.Files, jf)
		}
		b, _ := json.Marshal(doc)
		return b
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>Links for %s</title></head><body><h1>Links for %s</h1>\n", project, project)
	for _, f := range r.files {
		if f.project != project {
			continue
		}
		fmt.Fprintf(&b, `<a href="../../files/%s#sha256=%s"`, f.filename, f.sha)
		if f.requiresPython != "" {
			fmt.Fprintf(&b, ` data-requires-python="%s"`, html.EscapeString(f.requiresPython))
		}
		if f.yanked {
			b.WriteString(` data-yanked="broken release"`)
		}
		if v.metadata && f.metadata != nil {
			fmt.Fprintf(&b, ` data-dist-info-metadata="sha256=%s" data-core-metadata="sha256=%s"`, hexSHA(f.metadata), hexSHA(f.metadata))
		}
		fmt.Fprintf(&b, ">%s</a><br/>\n", f.filename)
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// requestCounter counts requests per path.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) add(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[path]++
}

func (c *requestCounter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// serveRepo serves the repo as a simple index at <url>/simple/ with files
// at <url>/files/. delay, if set, slows file downloads.
func serveRepo(t *testing.T, r *testRepo, v indexVariant, delay time.Duration) (*httptest.Server, *requestCounter) {
	t.Helper()
	counter := &requestCounter{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/{project}/", func(w http.ResponseWriter, req *http.Request) {
		counter.add(req.URL.Path)
		p := req.PathValue("project")
		if !contains(r.projects(), p) {
			http.NotFound(w, req)
			return
		}
		pv := v
		if v.json && strings.Contains(req.Header.Get("Accept"), simpleJSON) {
			w.Header().Set("Content-Type", simpleJSON)
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			pv.json = false
		}
		w.Write(r.page(p, pv))
	})
	mux.HandleFunc("/files/{name}", func(w http.ResponseWriter, req *http.Request) {
		counter.add(req.URL.Path)
		name := req.PathValue("name")
		for _, f := range r.files {
			if f.filename == name {
				if delay > 0 {
					time.Sleep(delay)
				}
				w.Write(f.data)
				return
			}
			if v.metadata && f.metadata != nil && f.filename+".metadata" == name {
				w.Write(f.metadata)
				return
			}
		}
		http.NotFound(w, req)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, counter
}

// writeRepo lays the repo out as a directory index: <dir>/simple/<project>/
// index.json or index.html, files in <dir>/files/.
func writeRepo(t *testing.T, r *testRepo, v indexVariant) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "files"), 0o755))
	for _, p := range r.projects() {
		must(os.MkdirAll(filepath.Join(dir, "simple", p), 0o755))
		name := "index.html"
		if v.json {
			name = "index.json"
		}
		must(os.WriteFile(filepath.Join(dir, "simple", p, name), r.page(p, v), 0o644))
	}
	for _, f := range r.files {
		must(os.WriteFile(filepath.Join(dir, "files", f.filename), f.data, 0o644))
		if v.metadata && f.metadata != nil {
			must(os.WriteFile(filepath.Join(dir, "files", f.filename+".metadata"), f.metadata, 0o644))
		}
	}
	return dir
}

// indexLocation returns the index location for a variant.
func indexLocation(t *testing.T, r *testRepo, v indexVariant) string {
	t.Helper()
	if v.dir {
		return filepath.Join(writeRepo(t, r, v), "simple")
	}
	srv, _ := serveRepo(t, r, v, 0)
	return srv.URL + "/simple/"
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
	builtin, _ := makeWheel(t, "builtin", "1.5.0", "py3-none-any", "", []string{`alpha>=1.1; extra == "more"`, "libfoo"})
	native, _ := makeWheel(t, "builtin_native", "0.3", "cp314-cp314-pyemscripten_2026_0_wasm32", "", nil)
	tl.files["builtin-1.5.0-py3-none-any.whl"] = builtin
	tl.files["builtin_native-0.3-cp314-cp314-pyemscripten_2026_0_wasm32.whl"] = native
	tl.files["libfoo-1.0.zip"] = []byte("a zip of shared libraries")
	pkgs := map[string]any{
		"builtin": map[string]any{
			"name": "builtin", "version": "1.5.0", "file_name": "builtin-1.5.0-py3-none-any.whl",
			"sha256": hexSHA(builtin), "depends": []string{"libfoo"}, "imports": []string{"builtin", "bi"},
			"package_type": "package", "install_dir": "site",
		},
		"builtin-native": map[string]any{
			"name": "builtin_native", "version": "0.3", "file_name": "builtin_native-0.3-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
			"sha256": hexSHA(native), "depends": []string{"Builtin"}, "imports": []string{"builtin_native"},
			"package_type": "package", "install_dir": "site",
		},
		"libfoo": map[string]any{
			"name": "libfoo", "version": "1.0", "file_name": "libfoo-1.0.zip",
			"sha256": hexSHA(tl.files["libfoo-1.0.zip"]), "depends": []string{}, "imports": []string{},
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
func standardRepo(t *testing.T) *testRepo {
	t.Helper()
	r := &testRepo{}
	r.addWheel(t, "alpha", "1.0", "py3-none-any")
	r.addWheel(t, "alpha", "1.1", "py2.py3-none-any")
	r.addWheel(t, "alpha", "2.0", "py3-none-any")
	r.addSdist("alpha", "2.0")
	r.addWheel(t, "alpha", "2.5", "py3-none-any").yanked = true
	r.addWheel(t, "alpha", "3.0a1", "py3-none-any")
	r.addWheel(t, "Beta", "1.0", "py3-none-any",
		`gamma>=1.0; extra == "fast"`,
		`delta; sys_platform == "emscripten"`,
		`epsilon; sys_platform == "linux"`,
		"alpha<2")
	r.addWheel(t, "gamma", "1.0", "py3-none-any")
	r.addWheel(t, "delta", "1.0", "py3-none-any")
	r.addWheel(t, "epsilon", "1.0", "py3-none-any")
	r.addWheel(t, "native", "1.0", "cp314-cp314-manylinux_2_17_x86_64")
	r.addSdist("native", "1.0")
	r.addWheel(t, "pnative", "1.0", "cp314-cp314-manylinux_2_17_x86_64")
	r.addWheel(t, "pnative", "1.0", "py3-none-any")
	r.addWheel(t, "pnative", "1.0", "cp314-cp314-pyemscripten_2026_0_wasm32")
	r.addWheel(t, "pnative", "1.0", "cp312-abi3-pyemscripten_2026_0_wasm32")
	r.addWheelPy(t, "old", "1.0", ">=3.8")
	r.addWheelPy(t, "old", "2.0", "<3.10")
	r.addWheel(t, "zeta", "1.0", "py3-none-any", "builtin<1")
	r.addWheel(t, "eta", "1.0", "py3-none-any", "alpha>=2")
	r.addWheel(t, "uses-builtin", "1.0", "py3-none-any", "builtin>=1.0", "alpha")
	r.addWheel(t, "bad", "1.0", "py3-none-any").sha = strings.Repeat("0", 64)
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
