package mount

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/dustin/go-humanize/english"
)

// Change is what the sandbox did to one file under the mount: new or
// changed content, or deleted. Path is as in File, but attacker-chosen.
type Change struct {
	Path    string
	Data    []byte
	Deleted bool
}

// Apply writes the code's changes back to the folder of a writable mount.
//
// All of them are checked first, paths and limits, so that a bad one is
// refused with nothing written. The limits bound both the changes and the
// folder as they would leave it, measured on the host as Read will count
// it: changes that each pass would otherwise add up, call after call,
// until no call could read the folder in. Each file is then written to a
// temporary file beside it and renamed over it: the host never sees half a
// file, and a symlink at the path is replaced rather than written through.
// Deletions remove files, never folders, and one of a file already gone is
// done.
func (f *Folder) Apply(ctx context.Context, changes []Change, lim Limits) error {
	if !f.Writable {
		return fmt.Errorf("mount at %s: read-only, so nothing was written back (mount it :rw to write back)", f.Sandbox)
	}
	if err := check(runtime.GOOS, changes, lim); err != nil {
		return fmt.Errorf("mount at %s: %w; nothing was written", f.Sandbox, err)
	}
	// Checked once only: stopping half way would leave the folder half
	// changed, and the limits bound the work left.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mount at %s: %w; nothing was written", f.Sandbox, err)
	}
	root, err := f.open()
	if err != nil {
		return fmt.Errorf("%w; nothing was written", err)
	}
	defer root.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	sizes, err := usage(ctx, root)
	if err != nil {
		return fmt.Errorf("mount at %s: measuring the host folder: %w; nothing was written", f.Sandbox, err)
	}
	if err := checkTotal(sizes, changes, lim); err != nil {
		return fmt.Errorf("mount at %s: %w; nothing was written", f.Sandbox, err)
	}
	// Deletions first: the code may have made a folder where a file was.
	done := 0
	for _, deletions := range []bool{true, false} {
		for _, c := range changes {
			if c.Deleted != deletions {
				continue
			}
			if c.Deleted {
				err = remove(root, c.Path)
			} else {
				err = write(root, c.Path, c.Data)
			}
			if err != nil {
				return fmt.Errorf("mount at %s: writing back %s: %w (%d of %d changes were written before it)", f.Sandbox, c.Path, err, done, len(changes))
			}
			done++
		}
	}
	return nil
}

// checkTotal refuses changes that would leave a folder holding sizes (by
// path, as usage measures it) past lim.
func checkTotal(sizes map[string]int64, changes []Change, lim Limits) error {
	for _, c := range changes {
		if c.Deleted {
			delete(sizes, c.Path)
		} else {
			sizes[c.Path] = int64(len(c.Data))
		}
	}
	var total int64
	for _, n := range sizes {
		total += n
	}
	if over := lim.over(len(sizes), total); over != "" {
		return fmt.Errorf("the folder would hold %s of %s after these changes, %s", english.Plural(len(sizes), "file", "files"), humanize.IBytes(uint64(total)), over)
	}
	return nil
}

// check refuses changes that Apply could not write whole on a host running
// goos: a bad path, two changes to one file, a file written both as a file
// and as a folder of another, or more than lim.
func check(goos string, changes []Change, lim Limits) error {
	written := make(map[string]bool, len(changes))
	var size int64
	for _, c := range changes {
		if err := checkPath(goos, c.Path); err != nil {
			return fmt.Errorf("change %q refused: %w", c.Path, err)
		}
		if _, dup := written[c.Path]; dup {
			return fmt.Errorf("change %q refused: more than one change to the file", c.Path)
		}
		written[c.Path] = !c.Deleted
		if !c.Deleted {
			size += int64(len(c.Data))
		}
	}
	for _, c := range changes {
		if c.Deleted {
			continue
		}
		for dir := path.Dir(c.Path); dir != "."; dir = path.Dir(dir) {
			if written[dir] {
				return fmt.Errorf("change %q refused: %s is written as a file too", c.Path, dir)
			}
		}
	}
	if over := lim.over(len(changes), size); over != "" {
		return fmt.Errorf("%s of %s in all, %s", english.Plural(len(changes), "change", "changes"), humanize.IBytes(uint64(size)), over)
	}
	return nil
}

// maxPath bounds a path under the mount, as macOS's PATH_MAX does a whole
// one: os.Root walks a name one element at a time, so nothing else would
// stop the code from nesting folders deeper than the host's tools can reach.
const maxPath = 1024

// checkPath says why p cannot name a file under the mount on a host running
// goos: the sandbox's names are POSIX ones, a host's may be narrower. The
// os.Root would keep even a bad path inside the folder; this refuses it
// before anything is written, and takes goos so that every host's rules
// are tested on any.
func checkPath(goos, p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	case strings.ContainsRune(p, 0):
		return errors.New("a NUL byte")
	case strings.ContainsRune(p, '\\'):
		return errors.New("a backslash")
	case strings.HasPrefix(p, "/"):
		return errors.New("an absolute path")
	case len(p) > maxPath:
		return fmt.Errorf("a path of %d bytes, more than hosts hold", len(p))
	}
	if i := strings.IndexFunc(p, misleading); i >= 0 {
		r, _ := utf8.DecodeRuneInString(p[i:])
		return fmt.Errorf("the character %U, which shows a name as another or breaks it across lines", r)
	}
	for name := range strings.SplitSeq(p, "/") {
		switch {
		case name == "":
			return errors.New("an empty path element")
		case name == "." || name == "..":
			return fmt.Errorf("a %q path element", name)
		case len(name) > 255:
			return fmt.Errorf("a name of %d bytes, more than hosts hold", len(name))
		case goos == "windows":
			if err := checkWindowsName(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// misleading says whether r is a control character (a newline splits a
// name across the host's listings and logs) or one that reorders the text
// around it (U+202E shows "txt.exe" as "exe.txt"); neither belongs in a
// file name.
func misleading(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// checkWindowsName refuses the names Windows cannot hold, or would open a
// device for.
func checkWindowsName(name string) error {
	if i := strings.IndexFunc(name, func(r rune) bool { return r < ' ' || strings.ContainsRune(`<>:"|?*`, r) }); i >= 0 {
		return fmt.Errorf("the name %q holds %q, which Windows does not allow", name, name[i])
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return fmt.Errorf("the name %q ends in a dot or space, which Windows drops", name)
	}
	// Older Windows reserve a device name whatever extension follows it.
	base, _, _ := strings.Cut(name, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return fmt.Errorf("the name %q is a Windows device", name)
	}
	if len(base) > 3 && (base[:3] == "COM" || base[:3] == "LPT") {
		if digit, n := utf8.DecodeRuneInString(base[3:]); 3+n == len(base) && strings.ContainsRune("0123456789¹²³", digit) {
			return fmt.Errorf("the name %q is a Windows device", name)
		}
	}
	return nil
}

// tempPrefix starts the names of the files Apply writes before renaming
// them into place.
const tempPrefix = ".mcp-run-python-"

// write puts data at p through a temporary file in the same folder and a
// rename, keeping the mode of the file it replaces.
func write(root *os.Root, p string, data []byte) (err error) {
	dir := path.Dir(p)
	if err := root.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	perm := fs.FileMode(0o666)
	if info, err := root.Lstat(p); err == nil {
		switch {
		case info.Mode().IsRegular():
			perm = info.Mode().Perm()
		case info.IsDir():
			// The code removed the folder's files and made a file of its
			// name; a folder still holding any stays, with an error.
			if err := root.Remove(p); err != nil {
				return err
			}
		}
	}
	tmp := path.Join(dir, tempPrefix+rand.Text()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return root.Rename(tmp, p)
}

// remove deletes the file at p, which may already be gone, but no folder.
func remove(root *os.Root, p string) error {
	info, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		return errors.New("a folder on the host, and only files are deleted")
	}
	if err := root.Remove(p); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
