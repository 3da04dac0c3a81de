package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
			write(t, filepath.Join(dir, locationData, "web_cache", "0123", "body"), "x")
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
			write(t, filepath.Join(template, "v8_code_cache_v2"), "code")
			write(t, filepath.Join(template, "gen", "file", "x.js"), "js")
			tc.make(t, template)
			err := sealTemplate(template)
			if tc.sealed != (err == nil) || (err != nil && !errors.Is(err, errBadTemplate)) {
				t.Fatalf("sealTemplate: %v, want accepted %v", err, tc.sealed)
			}
			run := &runDir{path: t.TempDir()}
			dir, err := privateDenoDir(run, template)
			if !tc.sealed {
				if !errors.Is(err, errBadTemplate) {
					t.Errorf("privateDenoDir from a template that is not one: %v, want errBadTemplate", err)
				}
				if entries, _ := os.ReadDir(run.path); len(entries) != 0 {
					t.Errorf("privateDenoDir left %d entries in the run directory", len(entries))
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

// write makes a file with its directories.
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
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
	l := layout{root}
	if err := os.MkdirAll(l.noDenoDir(), 0o755); err == nil {
		t.Errorf("made %s: a worker could keep a DENO_DIR there", l.noDenoDir())
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ".lock" {
		t.Errorf("the cache directory holds %v, want .lock alone", entries)
	}
}
