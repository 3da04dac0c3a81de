package packages

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/natefinch/atomic"
)

// LockFileName is the name of Pyodide's lock file, in a Pyodide install and
// at the root of its package host.
const LockFileName = "pyodide-lock.json"

// WriteMirror copies the files of Pyodide's built-in packages among files
// (those of [OriginLock]) and the lock file at lockPath into dir, flat, as
// Pyodide's package host lays them out, so that dir serves as the host
// (--pyodide-index-url) of a server of the same Pyodide. A file already
// there with the right sha256 is kept; each is written whole or not at
// all. It returns how many files it copied or found.
func WriteMirror(dir, lockPath string, files []LocalFile) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("mirror: %w", err)
	}
	n := 0
	for _, f := range files {
		if f.Origin != OriginLock {
			continue
		}
		if !plainFilename(f.Filename) {
			return n, fmt.Errorf("mirror: bad file name %q", f.Filename)
		}
		dst := filepath.Join(dir, f.Filename)
		if got, err := hashFile(dst); err == nil && got == f.SHA256 {
			n++
			continue
		}
		if err := copyChecked(f.Path, dst, f.SHA256); err != nil {
			return n, fmt.Errorf("mirror: %s: %w", f.Filename, err)
		}
		n++
	}
	if err := copyChecked(lockPath, filepath.Join(dir, LockFileName), ""); err != nil {
		return n, fmt.Errorf("mirror: %s: %w", LockFileName, err)
	}
	return n, nil
}

// copyChecked copies src to dst atomically, checking its sha256 against
// want first unless want is "": a cache file changed on disk is not
// spread.
func copyChecked(src, dst, want string) error {
	if want != "" {
		got, err := hashFile(src)
		if err != nil {
			return err
		}
		if got != want {
			return errors.New("the cached file's sha256 is " + got + ", not " + want)
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomic.WriteFile(dst, in)
}
