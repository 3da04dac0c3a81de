package packages

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

const (
	testTag   = "cpython-314"
	testMagic = "2b0e0d0a"
	testKey   = "cpython-314-pyodide-314.0.7"
)

// cachedWheel puts a wheel with a submodule into a new cache under root
// (the cache directory: the package cache is its packages/).
func cachedWheel(t *testing.T, root string) (*Cache, LocalFile) {
	t.Helper()
	c, err := NewCache(filepath.Join(root, "packages"), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := pt.Wheel{Name: "bc", Version: "1.0", Source: "X = 1\n", Files: map[string]string{"sub/mod.py": "Y = 2\n", "data.txt": "not code"}}
	data, _ := w.Build()
	f := LocalFile{PlanFile: PlanFile{Name: "bc", Version: "1.0", Filename: w.Filename(), SHA256: pt.SHA256(data)}}
	f.Path = c.Path(f.SHA256, f.Filename)
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return c, f
}

// pycOf is a .pyc as the compile worker makes it: magic, flags, the
// source's hash, then (here) a stand-in for the code.
func pycOf(flags uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x2b\x0e\x0d\x0a") // testMagic
	binary.Write(&b, binary.LittleEndian, flags)
	b.WriteString("8bytehsh")
	b.WriteString("marshalled code")
	return b.Bytes()
}

// archiveOf is a zip of the named members.
func archiveOf(t *testing.T, members map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(members)) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestStoreBytecode(t *testing.T) {
	root := t.TempDir()
	c, f := cachedWheel(t, root)
	if _, _, done := c.Compiled(f, testKey); done {
		t.Fatal("compiled before anything was stored")
	}
	pyc := pycOf(1)
	archive := archiveOf(t, map[string][]byte{
		"bc/__pycache__/__init__.cpython-314.pyc": pyc,
		"bc/sub/__pycache__/mod.cpython-314.pyc":  pyc,
	})
	m := Bytecode{Tag: testTag, Magic: testMagic, Modules: 2}
	path, err := c.StoreBytecode(f, testKey, m, archive)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(f.Path), "bytecode", testKey, f.Filename); path != want {
		t.Fatalf("variant at %s, want %s", path, want)
	}
	if SourcePath(path) != f.Path || SourcePath(f.Path) != f.Path {
		t.Errorf("SourcePath(%s) = %s, want %s", path, SourcePath(path), f.Path)
	}
	// A new process checks the variant against its manifest.
	c2, _ := NewCache(c.Dir(), CacheOptions{})
	got, size, done := c2.Compiled(f, testKey)
	if !done || got != path {
		t.Fatalf("Compiled = %q, %v; want %q, true", got, done, path)
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
	}
	orig, _ := zip.OpenReader(f.Path)
	defer orig.Close()
	for _, zf := range orig.File {
		if !slices.Contains(names, zf.Name) {
			t.Errorf("the variant lacks the wheel's %s", zf.Name)
		}
	}
	for _, want := range []string{"bc/__pycache__/__init__.cpython-314.pyc", "bc/sub/__pycache__/mod.cpython-314.pyc"} {
		if !slices.Contains(names, want) {
			t.Errorf("the variant lacks %s: %v", want, names)
		}
	}
	// The cache directory counts the variant in the wheel's entry.
	d, _ := cachedir.Open(root)
	listing, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wheelInfo, _ := os.Stat(f.Path)
	manifest, _ := os.Stat(filepath.Join(filepath.Dir(path), manifestName))
	var entries []string
	for _, e := range listing.Entries {
		entries = append(entries, e.Name)
		if e.Kind == cachedir.Wheel && e.Size != wheelInfo.Size()+size+manifest.Size() {
			t.Errorf("the wheel's entry has %d bytes, want %d: the wheel, its variant and the manifest", e.Size, wheelInfo.Size()+size+manifest.Size())
		}
	}
	if len(entries) != 1 {
		t.Errorf("entries %v, want the wheel's alone", entries)
	}
	// Damaged: removed, and made again.
	if err := os.WriteFile(path, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	c3, _ := NewCache(c.Dir(), CacheOptions{})
	if _, _, done := c3.Compiled(f, testKey); done {
		t.Error("a damaged variant is used")
	}
	if _, err := os.Stat(filepath.Dir(path)); err == nil {
		t.Error("a damaged variant is kept")
	}
}

func TestStoreBytecodeNothingCompiled(t *testing.T) {
	c, f := cachedWheel(t, t.TempDir())
	path, err := c.StoreBytecode(f, testKey, Bytecode{Tag: testTag, Magic: testMagic, Skipped: 2}, nil)
	if err != nil || path != "" {
		t.Fatalf("StoreBytecode = %q, %v; want \"\", nil", path, err)
	}
	if got, _, done := c.Compiled(f, testKey); !done || got != "" {
		t.Fatalf("Compiled = %q, %v; want \"\", true: the original, not compiled again", got, done)
	}
}

// TestStoreBytecodeRefuses: what the compile worker sends is checked: only
// unchecked-hash .pyc files of the interpreter's magic, beside a module of
// the wheel, land in the cache.
func TestStoreBytecodeRefuses(t *testing.T) {
	good := pycOf(1)
	for _, tc := range []struct {
		name    string
		members map[string][]byte
		m       Bytecode
		want    string
	}{
		{"not beside a module", map[string][]byte{"bc/__pycache__/other.cpython-314.pyc": good}, Bytecode{}, "no module's bytecode"},
		{"not a pyc", map[string][]byte{"bc/evil.py": good}, Bytecode{}, "no module's bytecode"},
		{"outside the wheel", map[string][]byte{"../__pycache__/x.cpython-314.pyc": good}, Bytecode{}, "no module's bytecode"},
		{"another tag", map[string][]byte{"bc/__pycache__/__init__.cpython-313.pyc": good}, Bytecode{}, "no module's bytecode"},
		{"another magic", map[string][]byte{"bc/__pycache__/__init__.cpython-314.pyc": append([]byte("\x00\x00\x0d\x0a"), good[4:]...)}, Bytecode{}, "not an unchecked-hash .pyc"},
		{"checked hash", map[string][]byte{"bc/__pycache__/__init__.cpython-314.pyc": pycOf(3)}, Bytecode{}, "not an unchecked-hash .pyc"},
		{"timestamp-based", map[string][]byte{"bc/__pycache__/__init__.cpython-314.pyc": pycOf(0)}, Bytecode{}, "not an unchecked-hash .pyc"},
		{"truncated", map[string][]byte{"bc/__pycache__/__init__.cpython-314.pyc": good[:10]}, Bytecode{}, "not an unchecked-hash .pyc"},
		{"bad tag", map[string][]byte{}, Bytecode{Tag: "../x"}, "bad cache tag"},
		{"bad magic", map[string][]byte{}, Bytecode{Magic: "zz"}, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := cachedWheel(t, t.TempDir())
			m := Bytecode{Tag: testTag, Magic: testMagic, Modules: 1}
			if tc.m.Tag != "" {
				m.Tag = tc.m.Tag
			}
			if tc.m.Magic != "" {
				m.Magic = tc.m.Magic
			}
			_, err := c.StoreBytecode(f, testKey, m, archiveOf(t, tc.members))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StoreBytecode: %v, want an error with %q", err, tc.want)
			}
			if _, _, done := c.Compiled(f, testKey); done {
				t.Error("a refused archive counts as compiled")
			}
		})
	}
	t.Run("not a zip", func(t *testing.T) {
		c, f := cachedWheel(t, t.TempDir())
		if _, err := c.StoreBytecode(f, testKey, Bytecode{Tag: testTag, Magic: testMagic, Modules: 1}, []byte("junk")); err == nil {
			t.Fatal("junk stored")
		}
	})
}

func TestPycSource(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"__pycache__/six.cpython-314.pyc", "six.py"},
		{"pkg/__pycache__/__init__.cpython-314.pyc", "pkg/__init__.py"},
		{"pkg/sub/__pycache__/m.cpython-314.pyc", "pkg/sub/m.py"},
		{"pkg/__pycache__/m.cpython-313.pyc", ""},
		{"pkg/m.cpython-314.pyc", ""},
		{"pkg/__pycache__/.cpython-314.pyc", ""},
		{"pkg/../__pycache__/m.cpython-314.pyc", ""},
		{"/__pycache__/m.cpython-314.pyc", ""},
		{"pkg\\__pycache__/m.cpython-314.pyc", ""},
	} {
		got, ok := pycSource(tc.name, testTag)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("pycSource(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
