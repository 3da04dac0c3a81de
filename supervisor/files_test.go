package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
)

// execute runs req and fails the test if it could not run.
func execute(t *testing.T, s *Supervisor, req Request) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.Code, err)
	}
	return res
}

// Globals become globals before the code runs, converted as upstream's
// were through JavaScript: whole numbers are ints, and __name__ stays.
func TestGlobals(t *testing.T) {
	s := start(t, Config{Workers: 1})
	res := execute(t, s, Request{
		Code:    "[type(a).__name__, type(f).__name__, b, c['d'], __name__]",
		Globals: json.RawMessage(`{"a": 1.0, "f": 2.5, "b": [1, null, true], "c": {"d": "e"}, "__name__": "spoofed"}`),
	})
	want := `["int","float",[1,null,true],"e","__main__"]`
	var got any
	if err := json.Unmarshal(res.ReturnValue, &got); err != nil || res.Status != StatusSuccess {
		t.Fatalf("%s %s %q", res.Status, res.ReturnValue, res.Error)
	}
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("globals seen as %s, want %s", b, want)
	}
}

func TestFilesAndFiguresComeBack(t *testing.T) {
	s := start(t, Config{Workers: 1, Files: true, FilesLimit: 1000})
	code := `import os
os.makedirs('out', exist_ok=True)
open('out/data.csv', 'w').write('a,b\n1,2\n')
open('big.bin', 'wb').write(b'x' * 2000)
open('/tmp/elsewhere.txt', 'w').write('not under the working directory')
os.symlink('/etc/passwd', 'link')
class Chart:
    def _repr_png_(self):
        return b'\x89PNG fake'
Chart()`
	res := execute(t, s, Request{Code: code})
	if res.Status != StatusSuccess {
		t.Fatalf("%s %q", res.Status, res.Error)
	}
	var got []string
	for _, f := range res.Files {
		got = append(got, f.Path+"="+string(f.Data))
		if f.Omitted && f.Size != 2000 {
			t.Errorf("omitted %s has size %d, want 2000", f.Path, f.Size)
		}
	}
	if s := strings.Join(got, " "); s != "big.bin= out/data.csv=a,b\n1,2\n" {
		t.Errorf("files = %q", s)
	}
	if out := strings.Join(res.Output, "\n"); !strings.Contains(out, "[file not returned: big.bin is 2.0 KiB") {
		t.Errorf("output %q does not say big.bin was not returned", out)
	}
	if len(res.Figures) != 1 || res.Figures[0].MIMEType != "image/png" || string(res.Figures[0].Data) != "\x89PNG fake" {
		t.Errorf("figures = %+v", res.Figures)
	}

	// Text and SVG images, a broken display method, and nothing written.
	res = execute(t, s, Request{Code: `class Broken:
    def _repr_png_(self): raise ValueError
    def _repr_svg_(self): return '<svg/>'
Broken()`})
	if len(res.Figures) != 1 || res.Figures[0].MIMEType != "image/svg+xml" || string(res.Figures[0].Data) != "<svg/>" || len(res.Files) != 0 {
		t.Errorf("figures = %+v, files = %+v", res.Figures, res.Files)
	}
}

func TestFilesOffByDefault(t *testing.T) {
	s := start(t, Config{Workers: 1})
	res := execute(t, s, Request{Code: "open('a.txt', 'w').write('x')"})
	if len(res.Files) != 0 {
		t.Errorf("files came back without Config.Files: %+v", res.Files)
	}
}

func TestMounts(t *testing.T) {
	ro, rw := t.TempDir(), t.TempDir()
	write := func(dir, name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ro, "in.txt", "read me")
	write(rw, "keep.txt", "old")
	write(rw, "sub/gone.txt", "delete me")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	write(filepath.Dir(outside), "outside.txt", "untouched")
	mounts := []mount.Mount{{Host: ro, Sandbox: "/data"}, {Host: rw, Sandbox: "/home/pyodide/work", Writable: true}}
	s := start(t, Config{Workers: 1, Files: true, Mounts: mounts})

	code := `import errno, os
text = open('/data/in.txt').read()
try:
    open('/data/in.txt', 'w').write('changed in the sandbox')
    raise AssertionError('a read-only mount took a write')
except OSError as e:
    assert e.errno == errno.EROFS, e
open('work/keep.txt', 'w').write('new')
open('work/made.txt', 'w').write(text)
os.remove('work/sub/gone.txt')
os.symlink(` + "'" + outside + "'" + `, 'work/link')
text`
	res := execute(t, s, Request{Code: code})
	if res.Status != StatusSuccess || string(res.ReturnValue) != `"read me"` {
		t.Fatalf("%s %s %q", res.Status, res.ReturnValue, res.Error)
	}
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	checks := []struct{ dir, name, want string }{
		{ro, "in.txt", "read me"}, // read-only: never written back
		{rw, "keep.txt", "new"},
		{rw, "made.txt", "read me"},
		{filepath.Dir(outside), "outside.txt", "untouched"},
	}
	for _, c := range checks {
		if got := read(c.dir, c.name); got != c.want {
			t.Errorf("%s = %q, want %q", filepath.Join(c.dir, c.name), got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(rw, "sub", "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt deleted in the sandbox is still on the host: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(rw, "link")); !os.IsNotExist(err) {
		t.Errorf("a symlink made in the sandbox was made on the host: %v", err)
	}
	// Under the working directory, the mount's changes come back as files too.
	var paths []string
	for _, f := range res.Files {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, " "); got != "work/keep.txt work/made.txt work/sub/gone.txt" {
		t.Errorf("files = %q", got)
	}

	// A fresh interpreter sees the host as it is now.
	res = execute(t, s, Request{Code: "open('/home/pyodide/work/keep.txt').read()"})
	if string(res.ReturnValue) != `"new"` {
		t.Errorf("next call read %s %q", res.ReturnValue, res.Error)
	}
}

// A folder past the mount limit fails the call with an error that names
// the limit, rather than a sandbox with half a folder.
func TestMountPastItsLimit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Workers: 1, Mounts: []mount.Mount{{Host: dir, Sandbox: "/data"}}, MountLimits: mount.Limits{MaxBytes: 1024}})
	_, err := s.Run(context.Background(), Request{Code: "1"})
	if err == nil || !strings.Contains(err.Error(), "--mount-limit") {
		t.Errorf("Exec = %v, want an error naming --mount-limit", err)
	}
}

// A session's mounted files are put once; its writes go back after each call.
func TestSessionWithMount(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Config{Workers: 1, Files: true, Mounts: []mount.Mount{{Host: dir, Sandbox: "/data", Writable: true}}})
	ss := newSession(t, s)
	for i, code := range []string{"n = 1\nopen('/data/n.txt', 'w').write(str(n))", "n += 1\nopen('/data/n.txt', 'w').write(str(n))"} {
		runIn(t, ss, code)
		b, err := os.ReadFile(filepath.Join(dir, "n.txt"))
		if err != nil || string(b) != string(rune('1'+i)) {
			t.Fatalf("after call %d the host has %q (%v)", i+1, b, err)
		}
	}
	res := runIn(t, ss, "open('report.txt', 'w').write('r')")
	if len(res.Files) != 1 || res.Files[0].Path != "report.txt" {
		t.Errorf("session files = %+v", res.Files)
	}
}

// A tree too big to look at whole must not read as deleted files: a rw
// mount beside a working directory holding more than the scan's bound
// keeps its host files.
func TestBigTreeDeletesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("user data"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Workers: 1, Files: true, FilesLimit: 1 << 20, Mounts: []mount.Mount{{Host: dir, Sandbox: "/home/pyodide/rw", Writable: true}}})
	res := execute(t, s, Request{Code: "import os\nos.makedirs('d')\nfor i in range(10001):\n    open(f'd/f{i}', 'w').close()"})
	if res.Status != StatusSuccess {
		t.Fatalf("%s %q", res.Status, res.Error)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "precious.txt")); err != nil || string(b) != "user data" {
		t.Errorf("the host file is %q (%v) after a call that never touched it", b, err)
	}
	if out := strings.Join(res.Output, "\n"); !strings.Contains(out, "more than 10000 files under /home/pyodide") {
		t.Errorf("output %q does not say the tree was cut", out)
	}
}

// The notes about a files frame are one line each, however many entries a
// forged frame lists; what past bridge.MaxEntries was refused is said too.
func TestTakeFilesNotesStayShort(t *testing.T) {
	cf := &callFiles{cfg: Config{Files: true, FilesLimit: 1024}, log: zap.NewNop()}
	files := bridge.Files{RefusedChanges: 390_000, RefusedFigures: 3}
	for i := range 1000 {
		files.Changes = append(files.Changes, bridge.ChangedFile{Change: bridge.Change{Path: fmt.Sprintf("%s/f%d", WorkDir, i), Size: 1 << 20, Omitted: true}})
	}
	var res Result
	var lines []Line
	cf.takeFiles(context.Background(), &res, files, func(l Line) { lines = append(lines, l) })
	want := []string{
		"[files not returned: f0 is 1.0 MiB, f1 is 1.0 MiB, f2 is 1.0 MiB, f3 is 1.0 MiB, f4 is 1.0 MiB and 995 more, past the 1.0 KiB limit of files a call returns]",
		"[refused, past the 10000 files and 10000 figures a call may send back: 390000 files (neither returned nor written back) and 3 figures]",
	}
	if got := strings.Join(res.Output, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(lines) != len(want) {
		t.Errorf("%d lines went to OnLine, want %d", len(lines), len(want))
	}
}
