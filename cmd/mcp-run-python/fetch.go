package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// fetcher is what the fetch mode needs of the engine.
type fetcher interface {
	Fetch(ctx context.Context, reqs []string, mirror string, progress func(string)) ([]packages.LocalFile, error)
}

// fetchCommand is the fetch mode: it resolves reqs (and --deps) as a call
// would and downloads every file, hash-checked, into the package cache,
// saying each step on stderr and each file on stdout. A server with the
// same --cache-dir then installs them with --offline, or with Pyodide's
// package host and the index behind a firewall; with mirror, a directory
// gets the files of Pyodide's packages too, for --pyodide-index-url.
func fetchCommand(ctx context.Context, eng engine, reqs []string, mirror string, std streams) int {
	f, ok := eng.(fetcher)
	if !ok {
		fmt.Fprintln(std.err, "mcp-run-python: this engine cannot fetch packages")
		return exitFailure
	}
	local, err := f.Fetch(ctx, reqs, mirror, func(step string) { fmt.Fprintln(std.err, step) })
	if err != nil {
		fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
		return exitFailure
	}
	var total int64
	for _, l := range local {
		n := l.Size
		if fi, err := os.Stat(l.Path); err == nil {
			n = fi.Size()
		}
		total += n
		fmt.Fprintf(std.out, "%s %s from the %s, %s: %s\n", l.Name, l.Version, origin(l.Origin), size(n), l.Path)
	}
	what := strings.Join(reqs, " ")
	if what == "" {
		what = "--deps"
	}
	fmt.Fprintf(std.out, "%d files, %s, in the package cache for %s\n", len(local), size(total), what)
	return exitOK
}

// origin names where a fetched file came from.
func origin(o packages.Origin) string {
	if o == packages.OriginLock {
		return "Pyodide package host"
	}
	return "index"
}
