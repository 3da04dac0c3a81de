package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Folder is a mount pinned to the host folder its Host named when Pin ran:
// should the path later name another folder (the folder renamed and a
// symlink put in its place, say), Read and Apply refuse rather than copy
// in or write back whatever it now leads to.
type Folder struct {
	Mount
	id  fs.FileInfo // the folder Pin opened, for os.SameFile
	err error       // why Pin could not open it

	// mu is held by Apply from its measure of the folder to its last
	// write, so that two calls writing back at once cannot each pass the
	// limits and together go past them.
	mu sync.Mutex
}

// Pin opens m's host folder once, at the server's start, and keeps who it
// is. A folder that cannot be opened gives a Folder whose every Read and
// Apply fails with the reason.
func Pin(m Mount) *Folder {
	f := &Folder{Mount: m}
	root, err := os.OpenRoot(m.Host)
	if err == nil {
		f.id, err = identity(root)
		root.Close()
	}
	if err != nil {
		f.err = fmt.Errorf("mount at %s: the host folder cannot be opened: %w", m.Sandbox, pathless(err))
	}
	return f
}

// open opens the host folder for one Read or Apply, and checks it is the
// one Pin opened. The check is on the opened folder, not on its path: what
// the root then reaches is what was checked.
func (f *Folder) open() (*os.Root, error) {
	if f.err != nil {
		return nil, f.err
	}
	root, err := os.OpenRoot(f.Host)
	if err != nil {
		// The host's path is the operator's business, not the caller's:
		// errors name the mount by where the sandbox sees it.
		return nil, fmt.Errorf("mount at %s: the host folder cannot be opened: %w", f.Sandbox, pathless(err))
	}
	id, err := identity(root)
	if err == nil && !os.SameFile(f.id, id) {
		err = errors.New("the host folder is not the one the server was started with: its path now leads to another (restart the server to mount that one)")
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("mount at %s: %w", f.Sandbox, err)
	}
	return root, nil
}

// identity is who the folder open in root is: from the open folder itself,
// because on Windows a FileInfo from a path reads its file ID through the
// path again when compared.
func identity(root *os.Root) (fs.FileInfo, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Stat()
}

// pathless drops the path from a *fs.PathError, which would show the host
// folder's.
func pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
