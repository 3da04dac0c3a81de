package runtimefiles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"
	"github.com/natefinch/atomic"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/js"
)

// Files is the on-disk state every worker needs, prepared once per cache
// directory by trusted steps: no user code runs while it is made.
type Files struct {
	Entry     string   // worker.ts in the written-out worker program
	Pyodide   string   // the pyodide npm package, symlinks resolved
	Snapshot  string   // memory snapshot; "" when none could be made
	CodeCache string   // DENO_DIR template with V8's code cache; "" when none
	NoDenoDir string   // a DENO_DIR that cannot exist, for workers without a code cache
	needed    []string // every file above that workers need; see missing
	Root      string   // the cache directory, symlinks resolved
	// Key names the snapshot of Pyodide alone, for this worker program,
	// Pyodide and deno; "" when none could be made.
	Key string
	// Deps, when set, are the --Deps packages that snapshot and codeCache
	// hold loaded (see withDeps).
	Deps *Deps
}

// Dir is the working directory of a worker process: one that is there on
// every platform and stays, the program's. A runner can move its process
// out of it (worker/recycle.go).
func (rt *Files) Dir() string { return filepath.Dir(rt.Entry) }

// firstMissing returns the first of paths that does not exist, or "".
func firstMissing(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return p
		}
	}
	return ""
}

// hasAll reports whether dir holds every one of files.
func hasAll(dir string, files []string) bool {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	return firstMissing(paths) == ""
}

// pyodideFiles are the files of the Pyodide package that loading needs.
var pyodideFiles = []string{"pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"}

// Missing returns the first file of rt that is not there, or "". A dozen
// stats: cheap beside a worker's start, which it precedes.
func (rt *Files) Missing() string { return firstMissing(rt.needed) }

// listNeeded fills rt.needed, once rt is complete.
func (rt *Files) listNeeded() {
	rt.needed = append([]string{filepath.Dir(rt.NoDenoDir)}, programFiles(filepath.Dir(rt.Entry))...)
	for _, f := range pyodideFiles {
		rt.needed = append(rt.needed, filepath.Join(rt.Pyodide, f))
	}
	if rt.Snapshot != "" {
		rt.needed = append(rt.needed, rt.Snapshot, rt.CodeCache)
	}
}

// Layout names the places inside the cache directory.
type Layout struct{ Root string }

// Program is where this build's worker program is written out.
func (l Layout) Program() string { return filepath.Join(l.Root, "js", js.Version()) }

// Install is where Pyodide v is installed.
func (l Layout) Install(v string) string { return filepath.Join(l.Root, "pyodide", v) }

// DenoDir is the DENO_DIR of the trusted deno processes.
func (l Layout) DenoDir() string { return filepath.Join(l.Root, "deno") }

// Snapshot is the memory snapshot named key.
func (l Layout) Snapshot(key string) string {
	return filepath.Join(l.Root, "snapshots", key+".bin")
}

// CodeCache is the code cache template of the snapshot named key.
func (l Layout) CodeCache(key string) string { return filepath.Join(l.Root, "codecache", key) }

// NoDenoDir is below a regular file, the cache's lock file (lockDir),
// so no process can create it on any platform, and the cache directory
// holds no file for it alone. See denodir.go.
func (l Layout) NoDenoDir() string { return filepath.Join(l.Root, ".lock", "deno") }

// Maker makes the runtime's files in a cache directory, and the memory
// snapshots workers start from. What a snapshot worker is, and the sandbox
// every worker gets, are not its business: Check and Snapshot are handed in.
type Maker struct {
	Deno     string // path of the deno executable
	CacheDir string
	Log      *zap.Logger
	// Check refuses a runtime whose paths no worker could be given in its
	// permissions.
	Check func(rt *Files) error
	// Snapshot starts a worker of rt with DENO_DIR denoDir that loads
	// Pyodide (and imports rt.Deps, installed), and returns the memory
	// snapshot it sends.
	Snapshot func(ctx context.Context, rt *Files, denoDir string) ([]byte, error)
}

// Prepare makes the runtime: the worker program, Pyodide (downloaded by
// deno's npm resolution, the one step with write permission) and the memory
// snapshot. Steps already done by an earlier run are skipped.
func (m *Maker) Prepare(ctx context.Context, progress func(string)) (*Files, error) {
	if err := os.MkdirAll(m.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	// Deno checks the path a file really has against its permission lists:
	// a cache reached through a symlink (macOS's /var is /private/var)
	// would deny every read.
	root, err := filepath.EvalSymlinks(m.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	l := Layout{Root: root}
	unlock, err := lockDir(l.Root)
	if err != nil {
		return nil, err
	}
	defer unlock()

	denoVersion, err := m.denoVersion(ctx)
	if err != nil {
		return nil, err
	}
	progress("deno " + denoVersion)

	rt := &Files{Entry: filepath.Join(l.Program(), js.Entry), NoDenoDir: l.NoDenoDir(), Root: l.Root}
	if err := writeProgram(l.Program()); err != nil {
		return nil, fmt.Errorf("write the worker program: %w", err)
	}

	pyodideVersion, err := js.PyodideVersion()
	if err != nil {
		return nil, err
	}
	if rt.Pyodide, err = m.installPyodide(ctx, l, pyodideVersion, progress); err != nil {
		return nil, err
	}

	// Every worker gets these paths in its permissions: a cache directory
	// deno cannot be given (a comma in its path) fails here, once, and no
	// worker start checks them again.
	if err := m.Check(rt); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}

	sum := sha256.Sum256([]byte(js.Version() + "\x00" + pyodideVersion + "\x00" + denoVersion))
	key := hex.EncodeToString(sum[:8])
	snap, codeCache := l.Snapshot(key), l.CodeCache(key)
	// A snapshot or a template that is not one (left by an older version,
	// or changed on disk) is remade rather than fail every worker.
	if checkSnapshot(snap) != nil || checkTemplate(codeCache) != nil {
		progress("making the Pyodide memory snapshot")
		if err := m.MakeSnapshot(ctx, rt, snap, codeCache); err != nil {
			// Workers still start without one, only slower.
			m.Log.Sugar().Warnf("no memory snapshot, workers will load Pyodide plainly: %v", err)
			rt.listNeeded()
			return rt, nil
		}
	}
	rt.Snapshot, rt.CodeCache, rt.Key = snap, codeCache, key
	rt.listNeeded()
	progress("runtime ready in " + m.CacheDir)
	return rt, nil
}

// Pyodide installs Pyodide into the cache directory unless it is
// there, under the lock of the cache's preparation, and returns its
// directory.
func (m *Maker) Pyodide(ctx context.Context, progress func(string)) (string, error) {
	if err := os.MkdirAll(m.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	root, err := filepath.EvalSymlinks(m.CacheDir)
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	l := Layout{Root: root}
	unlock, err := lockDir(l.Root)
	if err != nil {
		return "", err
	}
	defer unlock()
	version, err := js.PyodideVersion()
	if err != nil {
		return "", err
	}
	return m.installPyodide(ctx, l, version, progress)
}

func (m *Maker) denoVersion(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, m.Deno, "--version")
	cmd.Env = m.denoEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("deno at %q does not run (install it or pass --deno): %w", m.Deno, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	version, ok := strings.CutPrefix(first, "deno ")
	if !ok {
		return "", fmt.Errorf("deno at %q: unexpected version output %q", m.Deno, first)
	}
	version, _, _ = strings.Cut(version, " ")
	return version, nil
}

// programFiles lists the files of the worker program written out to dir.
func programFiles(dir string) []string {
	var paths []string
	_ = fs.WalkDir(js.Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, filepath.Join(dir, filepath.FromSlash(name)))
		}
		return nil
	})
	return paths
}

// writeProgram writes the embedded worker program to dir, unless a complete
// copy is there: dir is named by the program's hash and filled atomically.
// A copy that lost files is written anew.
func writeProgram(dir string) error {
	if firstMissing(programFiles(dir)) == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, js.Files()); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return nil // another process wrote it first
		}
		return err
	}
	return nil
}

// installPyodide runs `deno install` for the pinned Pyodide in its own
// directory and returns the package directory with symlinks resolved.
func (m *Maker) installPyodide(ctx context.Context, l Layout, version string, progress func(string)) (string, error) {
	dir := l.Install(version)
	pkg := filepath.Join(dir, "node_modules", "pyodide")
	if real, err := filepath.EvalSymlinks(pkg); err == nil && hasAll(real, pyodideFiles) {
		return real, nil
	}
	progress("downloading Pyodide " + version + " with deno's npm resolution")
	// An install that lost files would look up to date to deno.
	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	config, err := fs.ReadFile(js.Files(), "deno.json")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "deno.json"), config, 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, m.Deno, "install", "--quiet", "--node-modules-dir=auto")
	cmd.Dir = dir
	cmd.Env = append(m.denoEnv(), installEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install Pyodide %s: %w: %s", version, err, strings.TrimSpace(stderr.String()))
	}
	real, err := filepath.EvalSymlinks(pkg)
	if err != nil {
		return "", fmt.Errorf("install Pyodide %s: %w", version, err)
	}
	if !hasAll(real, pyodideFiles) {
		return "", fmt.Errorf("install Pyodide %s: the package in %s lacks some of %v", version, real, pyodideFiles)
	}
	return real, nil
}

// MakeSnapshot has a worker (Snapshot) load Pyodide and the runner module (and
// rt.deps, imported), then sends the memory snapshot over the bridge. With
// codeCache, the worker's DENO_DIR, filled with V8's code cache of what it
// loaded, becomes the template of workers' DENO_DIRs at that path; "" gives
// it none.
func (m *Maker) MakeSnapshot(ctx context.Context, rt *Files, path, codeCache string) error {
	denoDir := rt.NoDenoDir
	if codeCache != "" {
		if err := os.MkdirAll(filepath.Dir(codeCache), 0o755); err != nil {
			return err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(codeCache), ".tmp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp) // gone once renamed
		if err := blockLocationData(tmp); err != nil {
			return err
		}
		denoDir = tmp
	}
	data, err := m.Snapshot(ctx, rt, denoDir)
	if err != nil {
		return err
	}
	if codeCache != "" {
		// Before the snapshot is written: one without its template would
		// be remade, with it.
		if err := sealTemplate(denoDir); err != nil {
			return fmt.Errorf("make snapshot: what the worker left in its DENO_DIR is refused: %w", err)
		}
	}
	if data, err = packSnapshot(data); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Written whole or not at all, so that workers never restore from half
	// a snapshot: natefinch/atomic syncs before it renames, and replaces
	// atomically on Windows too, which google/renameio does not support.
	if err := atomic.WriteFile(path, bytes.NewReader(data)); err != nil {
		return err
	}
	if codeCache == "" {
		return nil
	}
	_ = os.RemoveAll(codeCache) // a template left without its snapshot
	return os.Rename(denoDir, codeCache)
}

// RemakeSnapshot makes rt's snapshot again, one that workers failed to
// restore from: the runtime keeper's remake (see
// Keeper.RemakeSnapshot).
func (m *Maker) RemakeSnapshot(ctx context.Context, rt *Files) {
	// Workers copy the code cache meanwhile: it stays as it is.
	if err := m.MakeSnapshot(ctx, rt, rt.Snapshot, ""); err != nil {
		m.Log.Error("cannot remake the memory snapshot", zap.Error(err))
	}
}

// ErrGone marks a worker start that failed for a file of the
// runtime gone: the next start rebuilds it (see Keeper.Repair).
var ErrGone = errors.New("a file of the Python runtime is gone")

// lockDir serialises preparation between processes sharing a cache: flock
// on Unix, LockFileEx on Windows, both released by the system if the
// process dies.
func lockDir(dir string) (func(), error) {
	lock := flock.New(filepath.Join(dir, ".lock"))
	if err := lock.Lock(); err != nil {
		return nil, fmt.Errorf("lock cache: %w", err)
	}
	return func() { _ = lock.Unlock() }, nil
}

// denoEnv is the environment of the trusted deno processes.
func (m *Maker) denoEnv() []string { return DenoEnv(Layout{m.CacheDir}.DenoDir()) }

// DenoEnv is the whole environment of every deno process: nothing of ours
// leaks to code that can read it.
func DenoEnv(denoDir string) []string {
	return []string{
		"DENO_DIR=" + denoDir,
		"DENO_NO_UPDATE_CHECK=1",
		"DENO_NO_PROMPT=1",
		"NO_COLOR=1",
		// glibc's malloc (Linux; other systems ignore these) otherwise
		// keeps what a worker freed: the snapshot's bytes, read and
		// copied once at start, stayed resident for the worker's life in
		// per-thread arenas, about 40 MiB of each idle worker. Large blocks
		// then come from mmap and go back on free.
		"MALLOC_ARENA_MAX=2",
		"MALLOC_MMAP_THRESHOLD_=131072",
	}
}

// installEnv is what the download step takes from our environment: where
// the registry is, how to reach it, and which certificates to trust. Like
// npm, it trusts the system's certificate store as well as deno's own.
func installEnv() []string {
	env := []string{"DENO_TLS_CA_STORE=mozilla,system"}
	for _, name := range []string{
		"NPM_CONFIG_REGISTRY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
		"DENO_TLS_CA_STORE", "DENO_CERT", "SSL_CERT_FILE", "SSL_CERT_DIR", "HOME",
	} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
