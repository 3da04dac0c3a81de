package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want Mount
	}{
		{"/home/me/data:/data", Mount{Host: filepath.Clean("/home/me/data"), Sandbox: "/data"}},
		{"/home/me/data:/data:ro", Mount{Host: filepath.Clean("/home/me/data"), Sandbox: "/data"}},
		{"./data/:/data/:rw", Mount{Host: "data", Sandbox: "/data", Writable: true}},
		{"data:/mnt/x/../y", Mount{Host: "data", Sandbox: "/mnt/y"}},
		{"/h:/libs", Mount{Host: filepath.Clean("/h"), Sandbox: "/libs"}},
		{"/h:/home/pyodide/lib", Mount{Host: filepath.Clean("/h"), Sandbox: "/home/pyodide/lib"}},
		{"/h:/home/pyodide", Mount{Host: filepath.Clean("/h"), Sandbox: "/home/pyodide"}},
		{"/h:/home/pyodide/work:rw", Mount{Host: filepath.Clean("/h"), Sandbox: "/home/pyodide/work", Writable: true}},
		{"/h:/homework:rw", Mount{Host: filepath.Clean("/h"), Sandbox: "/homework", Writable: true}},
		{"/a,b:/c,d", Mount{Host: filepath.Clean("/a,b"), Sandbox: "/c,d"}},
		{`C:\data:/data:rw`, Mount{Host: filepath.Clean(`C:\data`), Sandbox: "/data", Writable: true}},
		{`c:/data:/data`, Mount{Host: filepath.Clean(`c:/data`), Sandbox: "/data"}},
		{`D:\:/d:ro`, Mount{Host: filepath.Clean(`D:\`), Sandbox: "/d"}},
		{`\\server\share\x:/share`, Mount{Host: filepath.Clean(`\\server\share\x`), Sandbox: "/share"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ spec, why string }{
		{"", "no SANDBOX path"},
		{"/data", "no SANDBOX path"},
		{`C:\data`, "no SANDBOX path"},
		{":/data", "empty HOST"},
		{"/h:data", `SANDBOX "data" is not an absolute path`},
		{"/h:", `SANDBOX "" is not an absolute path`},
		{`/h:C:\data`, `SANDBOX "C" is not an absolute path`},
		{"/h:/", "may not be /"},
		{"/h:/x/..", "may not be /"},
		{"/h:/lib", "Pyodide's own /lib"},
		{"/h:/lib/python3.13/site-packages", "Pyodide's own /lib"},
		{"/h:/x/../lib", "Pyodide's own /lib"},
		{"/h:/dev", "Pyodide's own /dev"},
		{"/h:/proc/self", "Pyodide's own /proc"},
		{"/h:/data:rx", `mode "rx" is neither ro nor rw`},
		{"/h:/data:RW", `mode "RW" is neither ro nor rw`},
		{"/h:/data:", `mode "" is neither ro nor rw`},
		{"/h:/data:rw:x", "too many ':'"},
		// What the code writes on sys.path, every later call imports.
		{"/h:/home/pyodide:rw", "on sys.path"},
		{"/h:/home/pyodide/:rw", "on sys.path"},
		{"/h:/home:rw", "on sys.path"},
		{"/h:/da\x00ta", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := Parse(tt.spec)
			errorSays(t, err, tt.why, fmt.Sprintf("--mount %q", tt.spec), "HOST:SANDBOX[:ro|rw]")
		})
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeTree(t, dir, map[string]string{"file": ""})
	tests := []struct {
		name, host, want, err string
	}{
		{"an absolute folder", dir, dir, ""},
		{"a relative folder", ".", must(filepath.Abs(".")), ""},
		{"a file", file, "", "is not a folder"},
		{"nothing", filepath.Join(dir, "missing"), "", "host folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Mount{Host: tt.host, Sandbox: "/data"}.Resolve()
			if tt.err != "" {
				errorSays(t, err, tt.err, tt.host)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tt.want || got.Sandbox != "/data" {
				t.Errorf("got %+v, want host %s", got, tt.want)
			}
		})
	}
}

func TestCheckOverlap(t *testing.T) {
	tests := []struct {
		sandboxes []string
		overlap   bool
	}{
		{nil, false},
		{[]string{"/a"}, false},
		{[]string{"/a", "/b", "/ab", "/c/a"}, false},
		{[]string{"/a", "/a"}, true},
		{[]string{"/a", "/b", "/a/b"}, true},
		{[]string{"/a/b/c", "/a"}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.sandboxes, ","), func(t *testing.T) {
			var ms []Mount
			for _, s := range tt.sandboxes {
				ms = append(ms, Mount{Host: "/h", Sandbox: s})
			}
			if err := CheckOverlap(ms); (err != nil) != tt.overlap {
				t.Errorf("got %v, want an overlap: %t", err, tt.overlap)
			}
		})
	}
}

// TestCheckOverlapOnSysPath refuses a host folder the code can write
// (:rw) that another mount shows at the working directory, on sys.path.
func TestCheckOverlapOnSysPath(t *testing.T) {
	h := func(p string) string { return filepath.FromSlash(p) }
	tests := []struct {
		name   string
		mounts []Mount
		err    bool
	}{
		{"the same folder", []Mount{{Host: h("/a"), Sandbox: "/home/pyodide"}, {Host: h("/a"), Sandbox: "/data", Writable: true}}, true},
		{"a folder in it", []Mount{{Host: h("/a"), Sandbox: "/home/pyodide"}, {Host: h("/a/sub"), Sandbox: "/data", Writable: true}}, true},
		{"a folder around it", []Mount{{Host: h("/a/sub"), Sandbox: "/home"}, {Host: h("/a"), Sandbox: "/data", Writable: true}}, true},
		{"another folder", []Mount{{Host: h("/a"), Sandbox: "/home/pyodide"}, {Host: h("/ab"), Sandbox: "/data", Writable: true}}, false},
		{"read-only both", []Mount{{Host: h("/a"), Sandbox: "/home/pyodide"}, {Host: h("/a"), Sandbox: "/data"}}, false},
		{"off sys.path", []Mount{{Host: h("/a"), Sandbox: "/home/pyodide/lib"}, {Host: h("/a"), Sandbox: "/data", Writable: true}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckOverlap(tt.mounts)
			if !tt.err {
				if err != nil {
					t.Error(err)
				}
				return
			}
			errorSays(t, err, "sys.path", tt.mounts[1].String())
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// errorSays fails t unless err is an error that says every one of wants.
func errorSays(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one that says %q", wants)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// writeTree makes files, given by slash path and content, under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

// symlink makes a symlink, and skips the test where this user may not.
func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		if os.IsPermission(err) || strings.Contains(err.Error(), "privilege") {
			t.Skipf("no symlinks here: %v", err)
		}
		t.Fatal(err)
	}
}

// tree returns the files under dir by slash path: a file's content, or
// "-> target" for a symlink.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(name string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(must(filepath.Rel(dir, name)))
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(name)
			got[rel] = "-> " + filepath.ToSlash(target)
			return err
		}
		data, err := os.ReadFile(name)
		got[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
