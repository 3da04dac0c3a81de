package packages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteMirror: the mirror gets the lock's files, flat, and the lock
// file, not the index's; a cached file whose content changed is not copied.
func TestWriteMirror(t *testing.T) {
	cache := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(cache, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lockPath := write(LockFileName, `{"info":{"python":"3.14.2"},"packages":{}}`)
	native := LocalFile{PlanFile: PlanFile{Name: "native", Filename: "native-1.0-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
		SHA256: sha256Hex([]byte("native")), Origin: OriginLock}, Path: write("a", "native")}
	lib := LocalFile{PlanFile: PlanFile{Name: "lib", Filename: "lib-2.0-py3-none-any.whl",
		SHA256: sha256Hex([]byte("lib")), Origin: OriginLock}, Path: write("b", "lib")}
	pure := LocalFile{PlanFile: PlanFile{Name: "pure", Filename: "pure-1.0-py3-none-any.whl",
		SHA256: sha256Hex([]byte("pure")), Origin: OriginIndex}, Path: write("c", "pure")}
	changed := LocalFile{PlanFile: PlanFile{Name: "changed", Filename: "changed-1.0-py3-none-any.whl",
		SHA256: sha256Hex([]byte("original")), Origin: OriginLock}, Path: write("d", "changed on disk")}

	tests := []struct {
		name    string
		files   []LocalFile
		want    []string // files in the mirror after it
		n       int
		wantErr string
	}{
		{"lock files and the lock", []LocalFile{lib, native, pure}, []string{lib.Filename, native.Filename, LockFileName}, 2, ""},
		{"again, kept", []LocalFile{lib, native}, []string{lib.Filename, native.Filename, LockFileName}, 2, ""},
		{"changed in the cache", []LocalFile{changed}, nil, 0, "changed-1.0-py3-none-any.whl: the cached file's sha256 is"},
	}
	dir := filepath.Join(t.TempDir(), "mirror")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr != "" {
				dir = filepath.Join(t.TempDir(), "mirror")
			}
			n, err := WriteMirror(dir, lockPath, tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("WriteMirror: %v, want an error with %q", err, tt.wantErr)
				}
			} else if err != nil || n != tt.n {
				t.Fatalf("WriteMirror: %d, %v; want %d", n, err, tt.n)
			}
			entries, _ := os.ReadDir(dir)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("mirror holds %q, want %q", got, tt.want)
			}
			for _, f := range []LocalFile{lib, native} {
				if data, err := os.ReadFile(filepath.Join(dir, f.Filename)); err == nil && sha256Hex(data) != f.SHA256 {
					t.Errorf("%s in the mirror has the wrong content", f.Filename)
				}
			}
		})
	}
}
