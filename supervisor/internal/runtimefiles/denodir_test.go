package runtimefiles

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir/cachedirtest"
)

// A snapshot worker runs the import-time code of packages from the index:
// what it leaves in its DENO_DIR becomes the template of workers' only if
// it is one, and a template that is not one makes no worker's.
func TestCodeCacheTemplates(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string) // on top of a V8 code cache
		sealed bool                           // sealTemplate accepts it
	}{
		{name: "as deno leaves it", make: func(t *testing.T, dir string) {}, sealed: true},
		{name: "with its own block", make: func(t *testing.T, dir string) {
			if err := blockLocationData(dir); err != nil {
				t.Fatal(err)
			}
		}, sealed: true},
		{name: "with the Cache API's data", make: func(t *testing.T, dir string) {
			cachedirtest.Write(t, filepath.Join(dir, locationData, "web_cache", "0123", "body"), "x")
		}},
		{name: "with a symlink", make: func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "gen", "link")); err != nil {
				t.Skipf("no symlinks here: %v", err)
			}
		}},
		{name: "too large", make: func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "v8_code_cache_v2-wal"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(maxTemplateSize + 1); err != nil { // sparse: no disk used
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			template := t.TempDir()
			cachedirtest.Write(t, filepath.Join(template, "v8_code_cache_v2"), "code")
			cachedirtest.Write(t, filepath.Join(template, "gen", "file", "x.js"), "js")
			tc.make(t, template)
			err := sealTemplate(template)
			if tc.sealed != (err == nil) || (err != nil && !errors.Is(err, ErrBadTemplate)) {
				t.Fatalf("sealTemplate: %v, want accepted %v", err, tc.sealed)
			}
			run := &RunDir{path: t.TempDir()}
			dir, err := PrivateDenoDir(run, template)
			if !tc.sealed {
				if !errors.Is(err, ErrBadTemplate) {
					t.Errorf("PrivateDenoDir from a template that is not one: %v, want ErrBadTemplate", err)
				}
				if entries, _ := os.ReadDir(run.path); len(entries) != 0 {
					t.Errorf("PrivateDenoDir left %d entries in the run directory", len(entries))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "gen", "file", "x.js")); err != nil || string(b) != "js" {
				t.Errorf("the copy lacks the template's files: %q, %v", b, err)
			}
			info, err := os.Lstat(filepath.Join(dir, locationData))
			if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o222 != 0 {
				t.Errorf("the copy's %s is not a read-only file: %v, %v", locationData, info, err)
			}
		})
	}
}

// TestNoDenoDir: the DENO_DIR of workers without a code cache cannot be
// made once the cache is locked, and the cache directory holds no file of
// its own for it: a user listing it finds the lock alone.
func TestNoDenoDir(t *testing.T) {
	root := t.TempDir()
	unlock, err := lockDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	l := Layout{root}
	if err := os.MkdirAll(l.NoDenoDir(), 0o755); err == nil {
		t.Errorf("made %s: a worker could keep a DENO_DIR there", l.NoDenoDir())
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ".lock" {
		t.Errorf("the cache directory holds %v, want .lock alone", entries)
	}
}

func TestPrivateDenoDir(t *testing.T) {
	template := t.TempDir()
	for name, data := range map[string]string{"v8_code_cache_v2": "code", "gen/file/x.js": "js"} {
		path := filepath.Join(template, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := &RunDir{path: t.TempDir()}
	dir, err := PrivateDenoDir(run, template)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != run.path {
		t.Errorf("the copy is at %s, not in the run directory %s", dir, run.path)
	}
	for name, want := range map[string]string{"v8_code_cache_v2": "code", "gen/file/x.js": "js", "location_data": ""} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s in the copy: %q, %v; want %q", name, got, err, want)
		}
	}
	// The Cache API cannot make its directory under a file.
	if err := os.MkdirAll(filepath.Join(dir, "location_data", "web_cache"), 0o755); err == nil {
		t.Error("a directory could be made under location_data")
	}
}
