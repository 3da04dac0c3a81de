package mount

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func put(p, data string) Change { return Change{Path: p, Data: []byte(data)} }
func del(p string) Change       { return Change{Path: p, Deleted: true} }

type applyTest struct {
	name    string
	files   map[string]string // on the host before
	setup   func(t *testing.T, host, outside string)
	ro      bool
	lim     Limits
	changes []Change
	want    map[string]string // on the host after; nil: as before
	err     []string          // what the error says, nil for none
}

func TestApply(t *testing.T) {
	outLink := func(name, target string) func(*testing.T, string, string) {
		return func(t *testing.T, host, _ string) {
			symlink(t, filepath.FromSlash(target), filepath.Join(host, name))
		}
	}
	tests := []applyTest{{
		name:    "create nested",
		changes: []Change{put("a/b/c.txt", "new"), put("top", "")},
		want:    map[string]string{"a/b/c.txt": "new", "top": ""},
	}, {
		name:    "change",
		files:   map[string]string{"x.txt": "old", "y.txt": "same"},
		changes: []Change{put("x.txt", "new")},
		want:    map[string]string{"x.txt": "new", "y.txt": "same"},
	}, {
		name:    "delete",
		files:   map[string]string{"x.txt": "old", "sub/y.txt": "y"},
		changes: []Change{del("x.txt"), del("sub/y.txt")},
		want:    map[string]string{},
	}, {
		name:    "delete what is gone",
		files:   map[string]string{"x.txt": "x"},
		changes: []Change{del("gone.txt"), del("no/folder.txt")},
	}, {
		name:    "a file becomes a folder",
		files:   map[string]string{"a": "file"},
		changes: []Change{put("a/b", "b"), del("a")},
		want:    map[string]string{"a/b": "b"},
	}, {
		name:    "a folder becomes a file",
		files:   map[string]string{"d/x": "x"},
		changes: []Change{put("d", "file"), del("d/x")},
		want:    map[string]string{"d": "file"},
	}, {
		name:    "a folder with files left does not become a file",
		files:   map[string]string{"d/x": "x", "d/y": "y"},
		changes: []Change{put("d", "file"), del("d/x")},
		want:    map[string]string{"d/y": "y"},
		err:     []string{"writing back d", "1 of 2 changes were written before it"},
	}, {
		name:    "a folder is not deleted",
		files:   map[string]string{"d/x": "x"},
		changes: []Change{del("d")},
		err:     []string{"only files are deleted"},
	}, {
		name:    "a host symlink out is replaced, not written through",
		setup:   outLink("link", "../outside/secret"),
		changes: []Change{put("link", "pwned")},
		want:    map[string]string{"link": "pwned"},
	}, {
		name:    "a host symlink in is replaced, not written through",
		files:   map[string]string{"real": "real"},
		setup:   outLink("link", "real"),
		changes: []Change{put("link", "new")},
		want:    map[string]string{"real": "real", "link": "new"},
	}, {
		name:    "a host symlink out is deleted, not its target",
		setup:   outLink("link", "../outside/secret"),
		changes: []Change{del("link")},
		want:    map[string]string{},
	}, {
		name:    "no writing through a host folder symlink out",
		setup:   outLink("dir", "../outside"),
		changes: []Change{put("dir/secret", "pwned")},
		want:    map[string]string{"dir": "-> ../outside"},
		err:     []string{"writing back dir/secret", "path escapes"},
	}, {
		name:    "no deleting through a host folder symlink out",
		setup:   outLink("dir", "../outside"),
		changes: []Change{del("dir/secret")},
		want:    map[string]string{"dir": "-> ../outside"},
		err:     []string{"path escapes"},
	}, {
		name:    "read-only",
		files:   map[string]string{"x": "x"},
		ro:      true,
		changes: []Change{put("x", "new"), del("x")},
		err:     []string{"read-only", ":rw", "nothing was written"},
	}, {
		name:    "at the limits",
		lim:     Limits{MaxBytes: 4, MaxFiles: 3},
		files:   map[string]string{"c": "c"},
		changes: []Change{put("a", "ab"), put("b", "cd"), del("c")},
		want:    map[string]string{"a": "ab", "b": "cd"},
	}, {
		name:    "too many bytes",
		lim:     Limits{MaxBytes: 4},
		changes: []Change{put("a", "ab"), put("b", "cde")},
		err:     []string{"2 changes of 5 B in all", "more than 4 B", "--mount-limit", "nothing was written"},
	}, {
		name:    "too many files, deletions included",
		lim:     Limits{MaxFiles: 2},
		files:   map[string]string{"c": "c"},
		changes: []Change{put("a", "a"), put("b", "b"), del("c")},
		err:     []string{"3 changes of 2 B in all", "more than 2 files", "--mount-files", "nothing was written"},
	}, {
		// Each call's changes pass; what they leave in the folder is
		// measured on the host, or call after call would grow it until
		// no call could read it in.
		name:    "the folder past its bytes after the changes",
		lim:     Limits{MaxBytes: 4},
		files:   map[string]string{"a": "abc"},
		changes: []Change{put("b", "de")},
		err:     []string{"the folder would hold 2 files of 5 B after these changes", "more than 4 B", "--mount-limit", "nothing was written"},
	}, {
		name:    "the folder past its files after the changes",
		lim:     Limits{MaxFiles: 3},
		files:   map[string]string{"a": "a"},
		changes: []Change{put("b", ""), put("c", ""), put("d/e", "")},
		err:     []string{"the folder would hold 4 files of 1 B after these changes", "more than 3 files", "--mount-files", "nothing was written"},
	}, {
		name:    "a symlink inside counts as Read counts it",
		lim:     Limits{MaxBytes: 6},
		files:   map[string]string{"real": "abc"},
		setup:   outLink("link", "real"),
		changes: []Change{put("x", "a")},
		err:     []string{"the folder would hold 3 files of 7 B after these changes", "--mount-limit"},
	}, {
		name:    "a file replaced counts once",
		lim:     Limits{MaxBytes: 4, MaxFiles: 1},
		files:   map[string]string{"a": "abc"},
		changes: []Change{put("a", "abcd")},
		want:    map[string]string{"a": "abcd"},
	}, {
		name:    "deletions make room",
		lim:     Limits{MaxBytes: 4, MaxFiles: 2},
		files:   map[string]string{"a": "abc", "b": "b"},
		changes: []Change{del("a"), put("c", "cde")},
		want:    map[string]string{"b": "b", "c": "cde"},
	}}
	for _, bad := range []struct{ path, err string }{
		{"../outside/secret", `".." path element`},
		{"a/../../outside/secret", `".." path element`},
		{"/etc/passwd", "an absolute path"},
		{`..\outside\secret`, "a backslash"},
		{"a//b", "an empty path element"},
		{"a/", "an empty path element"},
		{"./a", `"." path element`},
		{"", "an empty path"},
		{"a\x00b", "a NUL byte"},
		{"\xff", "UTF-8"},
		{"ok.txt", "more than one change"},
		{"ok.txt/b", "ok.txt is written as a file too"},
		{"new\nline.txt", "U+000A"},
		{"invoice\u202Efdp.exe", "U+202E"},
	} {
		tests = append(tests, applyTest{
			name:    "refused: " + bad.err + ": " + bad.path,
			files:   map[string]string{"x": "x"},
			changes: []Change{put("ok.txt", "ok"), del("x"), put(bad.path, "pwned")},
			err:     []string{bad.err, "nothing was written"},
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, outside := folders(t, tt.files, tt.setup)
			before := tree(t, host)
			m := Mount{Host: host, Sandbox: "/data", Writable: !tt.ro}
			err := Pin(m).Apply(context.Background(), tt.changes, tt.lim)
			if err != nil {
				t.Log(err)
			}
			if tt.err != nil {
				errorSays(t, err, append(tt.err, "mount at "+m.Sandbox)...)
				if strings.Contains(err.Error(), m.Host) {
					t.Errorf("error %q shows the host folder to the caller", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == nil {
				want = before
			}
			got := tree(t, host)
			if !maps.Equal(got, want) {
				t.Errorf("the host has %v, want %v", got, want)
			}
			noTemp(t, got)
			if got := tree(t, outside); !maps.Equal(got, map[string]string{"secret": "secret"}) {
				t.Errorf("outside the folder: %v", got)
			}
		})
	}
}

// noTemp fails t if Apply left a temporary file in files.
func noTemp(t *testing.T, files map[string]string) {
	t.Helper()
	for p := range files {
		if strings.HasPrefix(path.Base(p), tempPrefix) {
			t.Errorf("%s left behind", p)
		}
	}
}

func TestApplyWritesNothingWhenCancelled(t *testing.T) {
	host, _ := folders(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Pin(Mount{Host: host, Sandbox: "/data", Writable: true}).Apply(ctx, []Change{put("a", "a")}, Limits{})
	if err == nil {
		t.Error("applied with a cancelled context")
	}
	if got := tree(t, host); len(got) > 0 {
		t.Errorf("wrote %v", got)
	}
}

// TestApplyConcurrently writes back from many calls at once, each within
// the limits alone: the folder stays within them all the same.
func TestApplyConcurrently(t *testing.T) {
	host, _ := folders(t, nil, nil)
	f := Pin(Mount{Host: host, Sandbox: "/data", Writable: true})
	lim := Limits{MaxBytes: 4}
	var wg sync.WaitGroup
	var written atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			if f.Apply(context.Background(), []Change{put(fmt.Sprint(i), "x")}, lim) == nil {
				written.Add(1)
			}
		})
	}
	wg.Wait()
	if got := tree(t, host); len(got) != 4 || written.Load() != 4 {
		t.Errorf("%d write-backs succeeded and the folder holds %v; want 4 files of 1 B", written.Load(), got)
	}
}

func TestApplyKeepsTheMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes on Windows")
	}
	host, _ := folders(t, map[string]string{"run.sh": "old"}, nil)
	name := filepath.Join(host, "run.sh")
	if err := os.Chmod(name, 0o750); err != nil {
		t.Fatal(err)
	}
	changes := []Change{put("run.sh", "new"), put("new.txt", "new")}
	if err := Pin(Mount{Host: host, Sandbox: "/data", Writable: true}).Apply(context.Background(), changes, Limits{}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(name); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("got %v, %v; want mode 0750", info.Mode(), err)
	}
	if info, err := os.Stat(filepath.Join(host, "new.txt")); err != nil || info.Mode().Perm()&0o111 != 0 {
		t.Errorf("a new file: got %v, %v; want it not executable", info.Mode(), err)
	}
}

func TestCheckPath(t *testing.T) {
	device, bad, end := "a Windows device", "which Windows does not allow", "ends in a dot or space"
	tests := []struct {
		path           string
		posix, windows string // what the error says, "" for none
	}{
		{"a.txt", "", ""},
		{"dir/sub/file.tar.gz", "", ""},
		{".hidden", "", ""},
		{"..hidden/a..b", "", ""},
		// Control and bidi characters, refused on every host.
		{"new\nline", "U+000A", "U+000A"},
		{"dir/cr\r", "U+000D", "U+000D"},
		{"esc\x1b[31m", "U+001B", "U+001B"},
		{"del\x7f", "U+007F", "U+007F"},
		{"next\u0085line", "U+0085", "U+0085"},
		{"report\u202Efdp.exe", "U+202E", "U+202E"},
		{"a\u2066b\u2069", "U+2066", "U+2066"},
		{"rlm\u200F", "U+200F", "U+200F"},
		{"alm\u061C", "U+061C", "U+061C"},
		{"line\u2028sep", "U+2028", "U+2028"},
		{"para\u2029sep", "U+2029", "U+2029"},
		{"café/日本語/👩\u200d💻.txt", "", ""},
		{strings.Repeat("x", 255), "", ""},
		{strings.Repeat("x", 256), "256 bytes", "256 bytes"},
		{strings.Repeat("a/", 511) + "xy", "", ""},
		{strings.Repeat("a/", 511) + "xyz", "1025 bytes", "1025 bytes"},
		{"", "an empty path", "an empty path"},
		{"/etc/passwd", "absolute", "absolute"},
		{"..", `".."`, `".."`},
		{"../x", `".."`, `".."`},
		{"a/../../x", `".."`, `".."`},
		{"./a", `"."`, `"."`},
		{"a/.", `"."`, `"."`},
		{"a//b", "empty path element", "empty path element"},
		{"a/", "empty path element", "empty path element"},
		{`..\x`, "backslash", "backslash"},
		{"a\x00b", "NUL", "NUL"},
		{"\xff", "UTF-8", "UTF-8"},
		// Names only Windows refuses.
		{"CON", "", device},
		{"con", "", device},
		{"con.txt", "", device},
		{"Con .txt", "", device},
		{"nul.tar.gz", "", device},
		{"AUX", "", device},
		{"PRN", "", device},
		{"COM1", "", device},
		{"com9.log", "", device},
		{"LPT1", "", device},
		{"lpt0", "", device},
		{"COM¹", "", device},
		{"LPT³", "", device},
		{"CONIN$", "", device},
		{"conout$", "", device},
		{"dir/NUL/file", "", device},
		{"a<b", "", bad},
		{"a>b", "", bad},
		{"a:b", "", bad},
		{`a"b`, "", bad},
		{"a|b", "", bad},
		{"a?b", "", bad},
		{"a*b", "", bad},
		{"tab\there", "U+0009", "U+0009"},
		{"dot.", "", end},
		{"space ", "", end},
		{"dir./x", "", end},
		// Names that look like devices but are not.
		{"CONSOLE", "", ""},
		{"COM10", "", ""},
		{"COM", "", ""},
		{"LPTx", "", ""},
		{"NULL", "", ""},
		{"xCON.txt", "", ""},
		{"com¹²", "", ""},
	}
	for _, tt := range tests {
		for _, goos := range []string{"linux", "darwin", "windows"} {
			want := tt.posix
			if goos == "windows" {
				want = tt.windows
			}
			err := checkPath(goos, tt.path)
			if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
				t.Errorf("checkPath(%s, %q) = %v, want %q", goos, tt.path, err, want)
			}
		}
	}
}
