// Package mount shows host folders to the sandbox (--mount): the trusted Go
// side copies a folder's files into the interpreter's in-memory file system
// before the code runs and, for a writable mount, writes what the code
// changed back to the folder afterwards. The worker itself never gets any
// permission on the host file system.
//
// Threat model: the host folder is the user's, and what is in it is trusted
// as much as the user trusts it. The changes written back come from hostile
// code: every path, name and byte of them is attacker-chosen. Whatever they
// say, nothing is read or written outside the folder, no symlink is made on
// the host, no more than Limits is written nor left in the folder, no name
// with a control or bidi character is made, and nothing on sys.path is
// writable. The folder's own content is trusted but may change while it is
// read: a FIFO swapped in for a file never blocks the read.
//
// "Never outside the folder" holds by construction rather than by checking
// paths: every access goes through an os.Root opened on the folder (the
// very folder the server started with: see Folder), which refuses any
// name, "..", absolute symlink or symlink that leads out of it, including
// one swapped in while we work. The path checks in Apply come on top of
// that, so that a bad change is refused before anything is written rather
// than half way through.
package mount

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"
)

// Mount is a host folder shown to the sandbox.
type Mount struct {
	Host     string // host folder, cleaned; absolute once Resolve has run
	Sandbox  string // absolute POSIX path inside the interpreter, cleaned
	Writable bool   // rw: the code's changes are written back to Host
}

// form is how a --mount value is written, for errors about one.
const form = `HOST:SANDBOX[:ro|rw], such as ./data:/data or C:\data:/data:rw`

// reserved are Pyodide's own directories: a mount over /lib would hide the
// standard library, and /dev and /proc are the interpreter's devices.
var reserved = []string{"/lib", "/dev", "/proc"}

// importDir is the code's working directory, and so first on sys.path of
// every interpreter (as "", twice); its other entries are under /lib. A
// folder the code can write there is one whose csv.py every later
// caller's `import csv` runs.
const importDir = "/home/pyodide"

// Parse reads a --mount value HOST:SANDBOX[:ro|rw], read-only unless rw.
//
// HOST may start with a Windows drive letter (C:\data or C:/data), and is
// parsed so on every GOOS: a configuration means the same wherever it is
// read. Apart from that, HOST holds no ':'; SANDBOX never does. Parse does
// not look at the host: Resolve does.
func Parse(spec string) (Mount, error) {
	bad := func(format string, args ...any) (Mount, error) {
		return Mount{}, fmt.Errorf("--mount %q: %s; want %s", spec, fmt.Sprintf(format, args...), form)
	}
	drive := 0
	if len(spec) > 2 && isLetter(spec[0]) && spec[1] == ':' && (spec[2] == '\\' || spec[2] == '/') {
		drive = 2
	}
	i := strings.IndexByte(spec[drive:], ':')
	if i < 0 {
		return bad("no SANDBOX path")
	}
	host, rest := spec[:drive+i], spec[drive+i+1:]
	sandbox, mode, hasMode := strings.Cut(rest, ":")
	m := Mount{Host: filepath.Clean(host), Sandbox: path.Clean(sandbox)}
	switch {
	case host == "":
		return bad("empty HOST")
	case strings.ContainsRune(spec, 0):
		return bad("a NUL byte")
	case !strings.HasPrefix(sandbox, "/"):
		return bad("SANDBOX %q is not an absolute path", sandbox)
	case m.Sandbox == "/":
		return bad("SANDBOX may not be /, which holds Pyodide's own files")
	case hasMode && strings.Contains(mode, ":"):
		return bad("too many ':'")
	}
	for _, r := range reserved {
		if within(m.Sandbox, r) {
			return bad("SANDBOX %s is in Pyodide's own %s", m.Sandbox, r)
		}
	}
	switch {
	case !hasMode || mode == "ro":
	case mode == "rw":
		m.Writable = true
	default:
		return bad("mode %q is neither ro nor rw", mode)
	}
	if m.Writable && m.onSysPath() {
		return bad("SANDBOX %s holds %s, the working directory, which is on sys.path: what one call wrote there, every later call would import; mount it read-only, or :rw in a folder of its own such as %s/work", m.Sandbox, importDir, importDir)
	}
	return m, nil
}

// Resolve makes Host absolute and checks it is a folder, so that a mistake
// in a flag shows at start rather than at the first call, and the folder
// stays the same one if the working directory changes.
func (m Mount) Resolve() (Mount, error) {
	abs, err := filepath.Abs(m.Host)
	if err != nil {
		return Mount{}, fmt.Errorf("--mount %s: %w", m, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return Mount{}, fmt.Errorf("--mount %s: host folder: %w", m, err)
	}
	if !info.IsDir() {
		return Mount{}, fmt.Errorf("--mount %s: host path %s is not a folder", m, abs)
	}
	m.Host = abs
	return m, nil
}

// onSysPath says whether the mount holds the working directory, which is
// on sys.path.
func (m Mount) onSysPath() bool { return within(importDir, m.Sandbox) }

// CheckOverlap refuses two mounts at the same or nested sandbox paths: the
// files under the inner one would belong to both, and be written back twice.
// It also refuses a host folder the code can write (:rw) that another mount
// shows on sys.path, as Parse refuses one :rw there. Host folders are
// compared as Resolve left them, by their paths.
func CheckOverlap(ms []Mount) error {
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			if within(a.Sandbox, b.Sandbox) || within(b.Sandbox, a.Sandbox) {
				return fmt.Errorf("--mount %s and --mount %s overlap in the sandbox; give each its own path", a, b)
			}
		}
	}
	for _, w := range ms {
		for _, r := range ms {
			if w.Writable && r.onSysPath() && (hostWithin(r.Host, w.Host) || hostWithin(w.Host, r.Host)) {
				return fmt.Errorf("--mount %s writes the host folder that --mount %s shows on sys.path, at the working directory: what one call wrote there, every later call would import", w, r)
			}
		}
	}
	return nil
}

// hostWithin reports whether the clean host path p is dir or under it.
func hostWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// String is the mount as a --mount value, for messages.
func (m Mount) String() string {
	mode := "ro"
	if m.Writable {
		mode = "rw"
	}
	return m.Host + ":" + m.Sandbox + ":" + mode
}

// within reports whether the clean POSIX path p is dir or under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Limits bound what one mount copies in, what one call writes back to it,
// and what the folder holds after a write-back, each on its own: a folder
// too big would make every call slow and fill the worker's memory, and
// hostile code must neither fill the host's disk nor grow the folder past
// what the next call can copy in. Zero is no limit. Errors past them name the flags that set them, --mount-limit
// and --mount-files.
type Limits struct {
	MaxBytes int64 // file contents in all
	MaxFiles int   // files in all; for a call's changes, deletions included
}

// The flags that set Limits, for the errors past them to name.
const (
	bytesFlag = "--mount-limit"
	filesFlag = "--mount-files"
)

// over says which limit n files of size bytes in all pass, and the flag
// that raises it, or "" when they pass none.
func (l Limits) over(n int, size int64) string {
	switch {
	case l.MaxFiles > 0 && n > l.MaxFiles:
		return fmt.Sprintf("more than %d files, the limit set by %s", l.MaxFiles, filesFlag)
	case l.MaxBytes > 0 && size > l.MaxBytes:
		return fmt.Sprintf("more than %s, the limit set by %s", humanize.IBytes(uint64(l.MaxBytes)), bytesFlag)
	}
	return ""
}
