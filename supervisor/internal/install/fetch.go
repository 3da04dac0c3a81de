package install

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	"go.uber.org/zap"
)

// Fetch resolves reqs and c's --deps as a call would, against Pyodide's
// package host and c's index, and downloads every file of the plan,
// hash-checked, into the package cache; the Pyodide installed in
// pyodideDir gives the lock file. With mirror not "", the files of
// Pyodide's built-in packages and its lock file are also copied into that
// directory (see [packages.WriteMirror]). Progress lines go to progress.
func Fetch(ctx context.Context, c Config, pyodideDir string, reqs []string, mirror string, progress func(string), log *zap.Logger) ([]packages.LocalFile, error) {
	in, err := New(c, pyodideDir, nil, log)
	if err != nil {
		return nil, fmt.Errorf("package installer: %w", err)
	}
	all := append(slices.Clone(c.Deps), reqs...)
	_, local, err := in.resolveAndFetch(ctx, all, nil, map[string]bool{}, progress, nil)
	if err != nil || mirror == "" {
		return local, err
	}
	n, err := packages.WriteMirror(mirror, filepath.Join(pyodideDir, packages.LockFileName), local)
	if err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("%d files of Pyodide's packages and %s in %s", n, packages.LockFileName, mirror))
	return local, nil
}
