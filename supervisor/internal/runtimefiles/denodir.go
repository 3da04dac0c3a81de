package runtimefiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Deno writes caches into its DENO_DIR whatever --deny-write says: V8's code
// cache, module analysis, transpiled TypeScript, and the data code stores
// through the Cache API (caches.open). Had workers one DENO_DIR, a call could
// leave something there for later calls to find or load. Without any
// (--no-code-cache and a DENO_DIR that cannot exist), a worker compiles
// Pyodide's JavaScript afresh. Measured with `make bench` on two cores, no
// code cache against a private copy: back-to-back calls 521 against 225 ms,
// spawn to first result 554 against 283 ms, 3.7 against 6.8 calls/s.
//
// So each worker gets a DENO_DIR of its own: a copy of a template that the
// worker making the memory snapshot filled with V8's code cache, removed
// once the worker has exited. Whatever a worker writes there dies with it.
// The snapshot worker runs the import-time code of the packages its
// snapshot holds (--deps, a learned set), which anyone who can publish to
// the index wrote: its DENO_DIR is blocked as a serving worker's is, and
// what it leaves becomes a template only if it is one (checkTemplate).

// locationData is where deno keeps what code stores through the Cache API
// (and localStorage): a read-only file in its place makes caches.open fail
// rather than fill the disk.
const locationData = "location_data"

// maxTemplateSize bounds a code cache template. V8's code cache of Pyodide
// and the worker program takes about 4 MiB; packages add none, as their
// code is Python.
const maxTemplateSize = 64 << 20

// ErrBadTemplate marks a code cache template that no worker may start from.
var ErrBadTemplate = errors.New("the code cache template is damaged")

// blockLocationData puts the read-only file in the place of the Cache API's
// data in DENO_DIR dir.
func blockLocationData(dir string) error {
	return os.WriteFile(filepath.Join(dir, locationData), nil, 0o444)
}

// nodeLink is the one symbolic link deno puts into its DENO_DIR: the node
// executable of its Node compatibility, a link to deno itself.
var nodeLink = filepath.Join("node_compat_bin", "node")

// checkTemplate reports why dir is no code cache template, or nil: a
// template holds directories and regular files only (and nodeLink), no
// Cache API data, and at most maxTemplateSize bytes.
func checkTemplate(dir string) error {
	var size int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case path == filepath.Join(dir, locationData):
			return fmt.Errorf("%s holds the Cache API's data", path)
		case d.IsDir(), d.Type() == fs.ModeSymlink && path == filepath.Join(dir, nodeLink):
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if size += info.Size(); size > maxTemplateSize {
			return fmt.Errorf("%s holds more than %d MiB", dir, maxTemplateSize>>20)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadTemplate, err)
	}
	return nil
}

// PrivateDenoDir copies the code cache template into a new directory for
// one worker in run, with the Cache API blocked (blockLocationData). A
// template that is not one gives an error wrapping ErrBadTemplate.
func PrivateDenoDir(run *RunDir, template string) (string, error) {
	if err := checkTemplate(template); err != nil {
		return "", fmt.Errorf("worker DENO_DIR: %w", err)
	}
	dir, err := run.workerDir()
	if err != nil {
		return "", fmt.Errorf("worker DENO_DIR: %w", err)
	}
	if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("worker DENO_DIR: copy the code cache: %w", err)
	}
	if err := blockLocationData(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("worker DENO_DIR: %w", err)
	}
	return dir, nil
}

// sealTemplate makes dir, the DENO_DIR a snapshot worker has left, a code
// cache template: its own block goes, and the rest must be one.
func sealTemplate(dir string) error {
	block := filepath.Join(dir, locationData)
	if info, err := os.Lstat(block); err == nil && info.Mode().IsRegular() && info.Size() == 0 {
		if err := os.Remove(block); err != nil {
			return err
		}
	}
	return checkTemplate(dir)
}
