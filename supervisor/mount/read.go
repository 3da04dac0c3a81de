package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
)

// File is one file copied into the sandbox. Path is relative to the mount,
// slash-separated and clean, as the sandbox and Change use it on every GOOS.
type File struct {
	Path string
	Data []byte
}

// Skipped is a host file Read left out, and why, for the caller to log: a
// file silently missing in the sandbox would puzzle whoever mounted it.
type Skipped struct {
	Path   string
	Reason string
}

// Read returns the folder's regular files, and the entries it left out:
// symlinks that lead out of the folder (or are absolute, or broken),
// symlinks to folders (which could loop), special files, and names that
// could not be written back on this host. A symlink to a file inside the
// folder is read as that file. Past lim it returns only an error, which
// names the mount, the limit and the flag that sets it.
//
// Read never blocks on what is in the folder: each file is opened without
// blocking (a FIFO swapped in for a file would otherwise hold the call
// until something wrote to it) and its type checked on the open file.
func (f *Folder) Read(ctx context.Context, lim Limits) ([]File, []Skipped, error) {
	root, err := f.open()
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	var files []File
	var skipped []Skipped
	var size int64
	skip := func(s Skipped) { skipped = append(skipped, s) }
	err = visit(ctx, root, skip, func(p string) error {
		file, info, err := openRegular(root, p)
		if errors.Is(err, errNotRegular) { // swapped since visit looked
			skip(Skipped{p, err.Error()})
			return nil
		}
		if err != nil {
			return err
		}
		defer file.Close()
		if over := lim.over(len(files)+1, size+info.Size()); over != "" {
			return fmt.Errorf("the folder holds %s; mount a smaller folder or raise the limit", over)
		}
		// Cut at the size the limits were checked against, should the
		// file grow while it is read.
		data, err := io.ReadAll(io.LimitReader(file, info.Size()))
		if err != nil {
			return err
		}
		size += int64(len(data))
		files = append(files, File{p, data})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mount at %s: %w", f.Sandbox, err)
	}
	return files, skipped, nil
}

// errNotRegular is openRegular's error for what is not a regular file.
var errNotRegular = errors.New("not a regular file")

// openRegular opens the regular file at p to read, and returns it with
// what it is. It never blocks: the file is opened without waiting (for a
// FIFO's writer, say), and its type is checked on the open file, so that
// one swapped in after a look at the folder is seen.
func openRegular(root *os.Root, p string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%w when opened (mode %v)", errNotRegular, info.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// visit calls read with the path of each file of the folder open in root
// that Read copies in, and skip with each it leaves out and why.
func visit(ctx context.Context, root *os.Root, skip func(Skipped), read func(p string) error) error {
	return fs.WalkDir(walkFS{root.FS(), root}, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if reason := leftOut(root, p, d); reason != "" {
			skip(Skipped{p, reason})
			return nil
		}
		return read(p)
	})
}

// walkFS is a root's fs.FS whose ReadDir opens a folder without blocking,
// should a FIFO have been swapped in for it.
type walkFS struct {
	fs.FS
	root *os.Root
}

func (w walkFS) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := w.root.OpenFile(name, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// usage measures what the folder open in root holds as Read counts it:
// the size of each file it would copy in, by path. It opens no file.
func usage(ctx context.Context, root *os.Root) (map[string]int64, error) {
	sizes := map[string]int64{}
	err := visit(ctx, root, func(Skipped) {}, func(p string) error {
		info, err := root.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist): // gone since visit looked
			return nil
		case err != nil:
			return err
		case info.Mode().IsRegular():
			sizes[p] = info.Size()
		}
		return nil
	})
	return sizes, err
}

// leftOut says why Read leaves out the entry d at p, or "" if it reads it.
func leftOut(root *os.Root, p string, d fs.DirEntry) string {
	if err := checkPath(runtime.GOOS, p); err != nil {
		return "its name could not be written back: " + err.Error()
	}
	if d.Type().IsRegular() {
		return ""
	}
	// The root follows a symlink only while it stays inside the folder.
	info, err := root.Stat(p)
	err = pathless(err) // the path is the Skipped's already
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "a broken symlink"
	case err != nil:
		return "a symlink out of the folder, or an absolute one: " + err.Error()
	case info.IsDir():
		return "a symlink to a folder, not followed: it could loop"
	case !info.Mode().IsRegular():
		return fmt.Sprintf("a special file (mode %v), not a regular one", info.Mode())
	}
	return ""
}
