// Package packagestest builds small wheels and serves them as a PyPI-style
// simple index, over HTTP or as a directory, for tests of package
// installation, much as net/http/httptest serves handlers for tests.
//
// It does not import package packages, whose own tests use it.
package packagestest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// SimpleJSON is the media type of PEP 691 JSON index pages.
const SimpleJSON = "application/vnd.pypi.simple.v1+json"

var separators = regexp.MustCompile(`[-_.]+`)

// Normalize returns the PEP 503 normalized form of a project name.
func Normalize(name string) string {
	return strings.ToLower(separators.ReplaceAllString(name, "-"))
}

// SHA256 returns the hex sha256 of data.
func SHA256(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Wheel describes a wheel to build: one top-level package named after the
// project (dashes as underscores) whose __init__.py sets __version__ and
// then holds Source.
type Wheel struct {
	Name, Version string
	// Tag is the wheel's compatibility tag; "" means "py3-none-any".
	Tag string
	// RequiresPython goes into the metadata and the index listing.
	RequiresPython string
	// Requires are Requires-Dist lines; extras they name with
	// `extra == "x"` are declared with Provides-Extra.
	Requires []string
	// Source is appended to the package's __init__.py.
	Source string
	// Package names the top-level package instead of the project's name,
	// for projects whose import name differs (or look-alikes that do not
	// provide the module their name suggests).
	Package string
	// TopLevel, if set, writes a .dist-info/top_level.txt listing it.
	TopLevel []string
	// Files are more files of the package, by their path inside its
	// directory (such as "sub.py"), for packages with submodules.
	Files map[string]string
}

// pkg is the name of the wheel's top-level package.
func (w Wheel) pkg() string {
	if w.Package != "" {
		return w.Package
	}
	return w.Module()
}

// Module is the project's name as wheel file names spell it (dashes as
// underscores), and the name of the top-level package unless Package says
// otherwise.
func (w Wheel) Module() string { return strings.ReplaceAll(Normalize(w.Name), "-", "_") }

// Filename is the wheel's file name.
func (w Wheel) Filename() string {
	return fmt.Sprintf("%s-%s-%s.whl", w.Module(), w.Version, w.tag())
}

func (w Wheel) tag() string {
	if w.Tag == "" {
		return "py3-none-any"
	}
	return w.Tag
}

// Build returns the wheel's bytes and its METADATA file. The wheel is valid:
// a .dist-info with METADATA, WHEEL and a RECORD of every file.
func (w Wheel) Build() (data, metadata []byte) {
	distInfo := fmt.Sprintf("%s-%s.dist-info", w.Module(), w.Version)
	var md strings.Builder
	fmt.Fprintf(&md, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	if w.RequiresPython != "" {
		fmt.Fprintf(&md, "Requires-Python: %s\n", w.RequiresPython)
	}
	var extras []string
	for _, r := range w.Requires {
		if _, e, ok := strings.Cut(r, `extra == "`); ok {
			if e, _, _ = strings.Cut(e, `"`); !slices.Contains(extras, e) {
				extras = append(extras, e)
			}
		}
	}
	for _, e := range extras {
		fmt.Fprintf(&md, "Provides-Extra: %s\n", e)
	}
	for _, r := range w.Requires {
		fmt.Fprintf(&md, "Requires-Dist: %s\n", r)
	}
	md.WriteString("License: MIT\n  continued license line\n\nA long description.\nWith: a colon line.\n")
	files := []struct{ name, body string }{
		{w.pkg() + "/__init__.py", fmt.Sprintf("__version__ = %q\n%s", w.Version, w.Source)},
		{distInfo + "/METADATA", md.String()},
		{distInfo + "/WHEEL", fmt.Sprintf("Wheel-Version: 1.0\nGenerator: packagestest\nRoot-Is-Purelib: true\nTag: %s\n", w.tag())},
	}
	if w.TopLevel != nil {
		files = append(files, struct{ name, body string }{distInfo + "/top_level.txt", strings.Join(w.TopLevel, "\n") + "\n"})
	}
	for _, name := range slices.Sorted(maps.Keys(w.Files)) {
		files = append(files, struct{ name, body string }{w.pkg() + "/" + name, w.Files[name]})
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	add := func(name, body string) {
		// Writes to a bytes.Buffer cannot fail.
		f, _ := zw.Create(name)
		f.Write([]byte(body))
	}
	for _, f := range files {
		add(f.name, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%x,%d\n", f.name, sum, len(f.body))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", distInfo)
	add(distInfo+"/RECORD", record.String())
	zw.Close()
	return buf.Bytes(), []byte(md.String())
}

// File is one file of a Repo. Tests may change its fields to make the
// index lie (a wrong SHA256) or mark it yanked.
type File struct {
	Project        string // normalized project name
	Filename       string
	Data           []byte
	SHA256         string // as listed
	RequiresPython string
	Yanked         bool
	Metadata       []byte // METADATA, for wheels
}

// Repo is a set of distributions served as a simple index. Add files before
// serving or writing it.
type Repo struct {
	Files []*File
}

// Add builds w, adds it and returns its File.
func (r *Repo) Add(w Wheel) *File {
	data, md := w.Build()
	f := &File{
		Project: Normalize(w.Name), Filename: w.Filename(), Data: data, SHA256: SHA256(data),
		RequiresPython: w.RequiresPython, Metadata: md,
	}
	r.Files = append(r.Files, f)
	return f
}

// AddWheelFile adds a prebuilt wheel, read from path, and returns its File.
// Its project and METADATA are read from the wheel itself, as an index
// would list them.
func (r *Repo) AddWheelFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the wheel: %w", err)
	}
	name := filepath.Base(path)
	project, _, ok := strings.Cut(strings.TrimSuffix(name, ".whl"), "-")
	if !ok || !strings.HasSuffix(name, ".whl") {
		return nil, fmt.Errorf("%s is not named as a wheel", name)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var metadata []byte
	for _, zf := range zr.File {
		dir, file := pathpkg.Split(zf.Name)
		if file != "METADATA" || !strings.HasSuffix(dir, ".dist-info/") || strings.Count(dir, "/") != 1 {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		metadata, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if metadata == nil {
		return nil, fmt.Errorf("%s has no .dist-info/METADATA", name)
	}
	f := &File{Project: Normalize(project), Filename: name, Data: data, SHA256: SHA256(data), Metadata: metadata}
	for line := range strings.Lines(string(metadata)) {
		if v, ok := strings.CutPrefix(line, "Requires-Python:"); ok {
			f.RequiresPython = strings.TrimSpace(v)
		}
		if strings.TrimSpace(line) == "" {
			break // the description follows
		}
	}
	r.Files = append(r.Files, f)
	return f, nil
}

// AddSdist adds a source distribution, which Pyodide cannot install.
func (r *Repo) AddSdist(name, version string) *File {
	data := []byte("not really a tarball: " + name + version)
	f := &File{Project: Normalize(name), Filename: fmt.Sprintf("%s-%s.tar.gz", name, version), Data: data, SHA256: SHA256(data)}
	r.Files = append(r.Files, f)
	return f
}

// Projects returns the normalized names of the repo's projects.
func (r *Repo) Projects() []string {
	var out []string
	for _, f := range r.Files {
		if !slices.Contains(out, f.Project) {
			out = append(out, f.Project)
		}
	}
	return out
}

// Variant says how a Repo is served.
type Variant struct {
	JSON     bool // PEP 691 JSON pages, else PEP 503 HTML
	Metadata bool // PEP 658 metadata files offered
	Dir      bool // a local directory, else an httptest server
}

// String names the variant, such as "json+metadata/http".
func (v Variant) String() string {
	s := "html"
	if v.JSON {
		s = "json"
	}
	if v.Metadata {
		s += "+metadata"
	}
	if v.Dir {
		return s + "/dir"
	}
	return s + "/http"
}

// AllVariants returns every combination of Variant's fields.
func AllVariants() []Variant {
	var vs []Variant
	for _, j := range []bool{true, false} {
		for _, m := range []bool{true, false} {
			for _, d := range []bool{false, true} {
				vs = append(vs, Variant{JSON: j, Metadata: m, Dir: d})
			}
		}
	}
	return vs
}

// Page renders a project's index page; file links are relative
// ("../../files/NAME").
func (r *Repo) Page(project string, v Variant) []byte {
	if v.JSON {
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
		for _, f := range r.Files {
			if f.Project != project {
				continue
			}
			jf := file{Filename: f.Filename, URL: "../../files/" + f.Filename, Hashes: map[string]string{"sha256": f.SHA256}, Yanked: false, Size: len(f.Data)}
			if f.RequiresPython != "" {
				rp := f.RequiresPython
				jf.RequiresPython = &rp
			}
			if f.Yanked {
				jf.Yanked = "broken release"
			}
			if v.Metadata && f.Metadata != nil {
				jf.CoreMetadata = map[string]string{"sha256": SHA256(f.Metadata)}
			}
			doc.Files = append(doc.Files, jf)
		}
		b, _ := json.Marshal(doc)
		return b
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>Links for %s</title></head><body><h1>Links for %s</h1>\n", project, project)
	for _, f := range r.Files {
		if f.Project != project {
			continue
		}
		fmt.Fprintf(&b, `<a href="../../files/%s#sha256=%s"`, f.Filename, f.SHA256)
		if f.RequiresPython != "" {
			fmt.Fprintf(&b, ` data-requires-python="%s"`, html.EscapeString(f.RequiresPython))
		}
		if f.Yanked {
			b.WriteString(` data-yanked="broken release"`)
		}
		if v.Metadata && f.Metadata != nil {
			fmt.Fprintf(&b, ` data-dist-info-metadata="sha256=%s" data-core-metadata="sha256=%s"`, SHA256(f.Metadata), SHA256(f.Metadata))
		}
		fmt.Fprintf(&b, ">%s</a><br/>\n", f.Filename)
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// Counter counts the requests a served Repo got, by path.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *Counter) add(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[path]++
}

// Get returns how many requests path got.
func (c *Counter) Get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// Total returns how many requests there were in all.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// Serve serves the repo on 127.0.0.1 as a simple index at URL/simple/ with
// its files at URL/files/, until the test ends. delay, if set, slows each
// file download.
func (r *Repo) Serve(t testing.TB, v Variant, delay time.Duration) (*httptest.Server, *Counter) {
	t.Helper()
	counter := &Counter{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/{project}/", func(w http.ResponseWriter, req *http.Request) {
		counter.add(req.URL.Path)
		p := req.PathValue("project")
		if !slices.Contains(r.Projects(), p) {
			http.NotFound(w, req)
			return
		}
		pv := v
		if v.JSON && strings.Contains(req.Header.Get("Accept"), SimpleJSON) {
			w.Header().Set("Content-Type", SimpleJSON)
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			pv.JSON = false
		}
		w.Write(r.Page(p, pv))
	})
	mux.HandleFunc("/files/{name}", func(w http.ResponseWriter, req *http.Request) {
		counter.add(req.URL.Path)
		name := req.PathValue("name")
		for _, f := range r.Files {
			if f.Filename == name {
				if delay > 0 {
					time.Sleep(delay)
				}
				w.Write(f.Data)
				return
			}
			if v.Metadata && f.Metadata != nil && f.Filename+".metadata" == name {
				w.Write(f.Metadata)
				return
			}
		}
		http.NotFound(w, req)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, counter
}

// Write lays the repo out under a new temporary directory: DIR/simple/
// PROJECT/index.json or index.html, and the files in DIR/files/. It
// returns DIR.
func (r *Repo) Write(t testing.TB, v Variant) string {
	t.Helper()
	dir := t.TempDir()
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range r.Projects() {
		name := "index.html"
		if v.JSON {
			name = "index.json"
		}
		write(filepath.Join(dir, "simple", p, name), r.Page(p, v))
	}
	for _, f := range r.Files {
		write(filepath.Join(dir, "files", f.Filename), f.Data)
		if v.Metadata && f.Metadata != nil {
			write(filepath.Join(dir, "files", f.Filename+".metadata"), f.Metadata)
		}
	}
	return dir
}

// Location serves or writes the repo as v says and returns the index's
// location: a URL ending in /simple/, or a directory path.
func (r *Repo) Location(t testing.TB, v Variant) string {
	t.Helper()
	if v.Dir {
		return filepath.Join(r.Write(t, v), "simple")
	}
	srv, _ := r.Serve(t, v, 0)
	return srv.URL + "/simple/"
}
