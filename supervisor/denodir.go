package supervisor

import (
	"fmt"
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
// trusted worker making the memory snapshot filled with V8's code cache,
// removed once the worker has exited. Whatever a worker writes there dies
// with it.

// privateDenoDir copies the code cache template into a new directory for
// one worker in run. A file named location_data, where the Cache API would
// keep its data, makes caches.open fail rather than fill the disk.
func privateDenoDir(run *runDir, template string) (string, error) {
	dir, err := run.workerDir()
	if err != nil {
		return "", fmt.Errorf("worker DENO_DIR: %w", err)
	}
	if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("worker DENO_DIR: copy the code cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "location_data"), nil, 0o444); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("worker DENO_DIR: %w", err)
	}
	return dir, nil
}
