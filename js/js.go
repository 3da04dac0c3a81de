// Package js holds the program each Deno worker process runs: worker.ts, the
// main thread that talks to the supervisor, and runner.ts with the modules it
// imports and the Python modules it installs (runner.py and those it
// imports), the Web Worker that runs Python in Pyodide. The files are
// embedded so the binary is all a user installs; the supervisor writes them
// to its cache. The tests (*_test.ts, *_test.py) are left out.
package js

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

// Entry is the file deno runs.
const Entry = "worker.ts"

//go:embed worker.ts runner.ts boot.ts files.ts frames.ts output.ts packages.ts pymodules.ts run.ts snapshotfile.ts
//go:embed runner.py ask.py bytecode.py encode.py fetch.py tools.py
//go:embed deno.json
var files embed.FS

// Files returns the worker program's files.
func Files() fs.FS { return files }

// Version identifies this build of the worker program: a snapshot or runtime
// directory made by another build is never reused.
func Version() string { return version() }

// version hashes the files once, when first asked: not at init, which every
// start of the program waits for.
var version = sync.OnceValue(hashFiles)

func hashFiles() string {
	h := sha256.New()
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// PyodideVersion returns the Pyodide version deno.json pins, such as "314.0.7".
func PyodideVersion() (string, error) {
	b, err := files.ReadFile("deno.json")
	if err != nil {
		return "", err
	}
	var cfg struct {
		Imports map[string]string `json:"imports"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("js/deno.json: %w", err)
	}
	spec := cfg.Imports["pyodide"]
	version, ok := strings.CutPrefix(spec, "npm:pyodide@")
	if !ok || version == "" {
		return "", fmt.Errorf("js/deno.json: pyodide import %q does not pin a version", spec)
	}
	return version, nil
}
