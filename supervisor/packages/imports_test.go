package packages

import (
	"archive/zip"
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// zipWheel writes a wheel with the given files (path → body) and returns its path.
func zipWheel(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(files[name]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x-1.0-py3-none-any.whl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWheelModules(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"top_level.txt and RECORD", map[string]string{
			"yaml/__init__.py":                   "",
			"_yaml/__init__.py":                  "",
			"PyYAML-6.0.dist-info/METADATA":      "",
			"PyYAML-6.0.dist-info/top_level.txt": "_yaml\nyaml\n",
			"PyYAML-6.0.dist-info/RECORD":        "yaml/__init__.py,sha256=x,0\n_yaml/__init__.py,,\nPyYAML-6.0.dist-info/RECORD,,\n",
		}, []string{"_yaml", "yaml"}},
		{"RECORD only, modules and extensions", map[string]string{
			"six.py":                   "",
			"x-1.0.dist-info/RECORD":   "six.py,,\n_speed.cpython-314-wasm32-emscripten.so,,\n\"odd,name/__init__.py\",,\nx-1.0.dist-info/METADATA,,\nx-1.0.data/scripts/tool,,\nx-1.0.data/purelib/extra/__init__.py,,\nx.pth,,\n__pycache__/six.cpython-314.pyc,,\n../../bin/x,,\n",
			"x-1.0.dist-info/METADATA": "",
		}, []string{"_speed", "extra", "odd,name", "six"}},
		{"top_level.txt misses a namespace package RECORD has", map[string]string{
			"google/protobuf/__init__.py":          "",
			"protobuf-5.0.dist-info/top_level.txt": "\n",
			"protobuf-5.0.dist-info/RECORD":        "google/protobuf/__init__.py,,\n",
		}, []string{"google"}},
		{"no RECORD: the archive's files", map[string]string{
			"tinypkg/__init__.py":          "",
			"tinypkg-1.0.dist-info/RECORD": "",
			"tinypkg-1.0.dist-info/WHEEL":  "",
		}, []string{"tinypkg"}},
		{"a look-alike", map[string]string{
			"slugify_other/__init__.py":    "",
			"slugify-1.0.dist-info/RECORD": "slugify_other/__init__.py,,\n",
		}, []string{"slugify_other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mods, err := WheelModules(zipWheel(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for m := range mods {
				got = append(got, m)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("modules = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := WheelModules(filepath.Join(t.TempDir(), "missing.whl")); err == nil {
		t.Error("no error for a missing wheel")
	}
}

func TestWheelModulesOfBuiltWheels(t *testing.T) {
	for _, w := range []pt.Wheel{
		{Name: "python-slugify", Version: "8.0", Package: "slugify"},
		{Name: "python-slugify", Version: "8.0", Package: "slugify", TopLevel: []string{"slugify"}},
		{Name: "slugify", Version: "0.0.1", Package: "slugify_look_alike", TopLevel: []string{"slugify_look_alike"}},
	} {
		data, _ := w.Build()
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		mods, err := wheelModules(zr)
		if err != nil {
			t.Fatal(err)
		}
		if want := w.Package; len(mods) != 1 || !mods[want] {
			t.Errorf("%s %s: modules %v, want only %s", w.Name, w.Version, mods, want)
		}
	}
}

func TestResolveInferred(t *testing.T) {
	repo := standardRepo(t)
	repo.Add(wheel("needs-missing", "1.0", "py3-none-any", "missing-dep"))
	tests := []struct {
		name          string
		reqs, inf     []string
		want, skipped []string
		kind          Kind // of the error, 0 for none
	}{
		{name: "a name no package provides", inf: []string{"cPickle"}, skipped: []string{"cPickle"}},
		{name: "found and not found", inf: []string{"nosuch", "alpha"}, want: []string{"alpha==2.0"}, skipped: []string{"nosuch"}},
		{name: "no wheel Pyodide can run", inf: []string{"native"}, skipped: []string{"native"}},
		{name: "a built-in", inf: []string{"builtin", "nosuch"}, want: []string{"libfoo==1.0", "builtin==1.5.0"}, skipped: []string{"nosuch"}},
		{name: "with firm requirements", reqs: []string{"gamma"}, inf: []string{"nosuch", "delta"}, want: []string{"gamma==1.0", "delta==1.0"}, skipped: []string{"nosuch"}},
		{name: "a firm requirement is never skipped", reqs: []string{"nosuch"}, inf: []string{"nosuch"}, kind: KindNotFound},
		{name: "a conflict stays an error", reqs: []string{"beta"}, inf: []string{"eta"}, kind: KindConflict},
		{name: "a missing dependency of a found package stays an error", inf: []string{"needs-missing"}, kind: KindNotFound},
		{name: "a hash mismatch stays an error", inf: []string{"bad"}, kind: KindHashMismatch},
	}
	r := newTestResolver(t, repo, pt.Variant{JSON: true}, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := r.ResolveInferred(testContext(t), tc.reqs, tc.inf)
			if tc.kind != 0 {
				wantKind(t, err, tc.kind)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := planNames(plan); !slices.Equal(got, tc.want) {
				t.Errorf("plan = %q, want %q", got, tc.want)
			}
			var skipped []string
			for _, s := range plan.Skipped {
				skipped = append(skipped, s.Requirement)
				if s.Reason == "" {
					t.Errorf("%s skipped without a reason", s.Requirement)
				}
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped = %q, want %q", skipped, tc.skipped)
			}
		})
	}
}

func TestResolveInferredUnreachableAndOffline(t *testing.T) {
	// An index that cannot be reached is an error: it says nothing about
	// whether a package provides the module.
	srv := httptest.NewServer(nil)
	srv.Close()
	tl := makeLock(t)
	r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: tl.location(t, true), IndexURL: srv.URL + "/simple/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ResolveInferred(testContext(t), nil, []string{"cPickle"})
	wantKind(t, err, KindUnreachable)

	// Offline, the cache is the whole index: a name it never saw is skipped.
	off := newTestResolver(t, standardRepo(t), pt.Variant{JSON: true}, newTestCache(t, CacheOptions{Offline: true}))
	plan, err := off.ResolveInferred(testContext(t), nil, []string{"cPickle"})
	if err != nil || len(plan.Files) != 0 || len(plan.Skipped) != 1 {
		t.Errorf("offline: %+v, %v", plan, err)
	}
}
