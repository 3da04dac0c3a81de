package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
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
func (m Mount) Read(ctx context.Context, lim Limits) ([]File, []Skipped, error) {
	root, err := os.OpenRoot(m.Host)
	if err != nil {
		// The host's path is the operator's business, not the caller's:
		// errors name the mount by where the sandbox sees it.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, nil, fmt.Errorf("mount at %s: the host folder cannot be opened: %w", m.Sandbox, err)
	}
	defer root.Close()
	var files []File
	var skipped []Skipped
	var size int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if reason := leftOut(root, p, d); reason != "" {
			skipped = append(skipped, Skipped{p, reason})
			return nil
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() { // swapped since leftOut looked
			skipped = append(skipped, Skipped{p, "not a regular file"})
			return nil
		}
		if over := lim.over(len(files)+1, size+info.Size()); over != "" {
			return fmt.Errorf("the folder holds %s; mount a smaller folder or raise the limit", over)
		}
		// Cut at the size the limits were checked against, should the
		// file grow while it is read.
		data, err := io.ReadAll(io.LimitReader(f, info.Size()))
		if err != nil {
			return err
		}
		size += int64(len(data))
		files = append(files, File{p, data})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mount at %s: %w", m.Sandbox, err)
	}
	return files, skipped, nil
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
	if pathErr, ok := errors.AsType[*fs.PathError](err); ok {
		err = pathErr.Err // the path is the Skipped's already
	}
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
