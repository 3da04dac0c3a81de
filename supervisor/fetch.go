package supervisor

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// Fetch resolves reqs and --deps as a call would, against Pyodide's package
// host and the index of the configuration, and downloads every file of the
// plan, hash-checked, into the package cache, where a later server with the
// same cache directory finds them: with --offline, or with the host and the
// index behind a firewall (a built-in package's file found in the cache is
// never downloaded again). It installs Pyodide if needed, for its lock file,
// but starts no worker and makes no snapshot. With mirror not "", the files
// of Pyodide's built-in packages and its lock file are also copied into that
// directory, which then serves as --pyodide-index-url (see
// [packages.WriteMirror]). Progress lines go to progress.
func (s *Supervisor) Fetch(ctx context.Context, reqs []string, mirror string, progress func(string)) ([]packages.LocalFile, error) {
	pyodide, err := s.maker.Pyodide(ctx, progress)
	if err != nil {
		return nil, err
	}
	in, err := NewInstaller(s.cfg, pyodide, s.log)
	if err != nil {
		return nil, fmt.Errorf("package installer: %w", err)
	}
	all := append(slices.Clone(s.cfg.Deps), reqs...)
	_, local, err := in.resolveAndFetch(ctx, all, nil, map[string]bool{}, progress)
	if err != nil || mirror == "" {
		return local, err
	}
	n, err := packages.WriteMirror(mirror, filepath.Join(pyodide, packages.LockFileName), local)
	if err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("%d files of Pyodide's packages and %s in %s", n, packages.LockFileName, mirror))
	return local, nil
}
