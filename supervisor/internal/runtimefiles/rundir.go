package runtimefiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"go.uber.org/zap"
)

// RunDirPrefix names the run directories in the system's temporary
// directory: mcp-run-python-XXXXXX.
const RunDirPrefix = "mcp-run-python-"

// runDirLock is the file a live server holds locked in its run directory.
const runDirLock = ".lock"

// bridgeSocketName is the bridge's Unix socket in the run directory.
const bridgeSocketName = "bridge.sock"

// unlockedGrace is how old a run directory without a lock file must be
// before it counts as abandoned: a new one has no lock for a moment.
const unlockedGrace = time.Hour

// RunDir is a server's private directory for what must not outlive it: the
// bridge's socket and the workers' throwaway DENO_DIRs. The server holds a
// lock on a file in it for as long as it runs, and the operating system
// releases that lock when the server dies, however it dies; so a server that
// starts can tell the directories of servers that are gone from those of
// servers that run, and remove the former.
type RunDir struct {
	path string
	lock *flock.Flock
}

// OpenRunDir removes the run directories that servers left behind and makes
// this server's own, locked.
func OpenRunDir(log *zap.Logger) (*RunDir, error) {
	base := RunDirBase()
	sweepRunDirs(base, log)
	dir, err := os.MkdirTemp(base, RunDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	// Its paths go into deno's permissions, which hold real paths (macOS's
	// temporary directory is below /var, really /private/var).
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	lock := flock.New(filepath.Join(dir, runDirLock))
	if ok, err := lock.TryLock(); !ok || err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("run directory: lock %s: %v", dir, err)
	}
	return &RunDir{path: dir, lock: lock}, nil
}

// RunDirBase returns where run directories go: the system's temporary
// directory, or /tmp where the bridge's socket in a run directory there
// would be too long a path for a Unix socket (sun_path holds 104 bytes on
// macOS, whose own TMPDIR, resolved, leaves 9 to spare; 108 on Linux).
func RunDirBase() string {
	base := os.TempDir()
	if runtime.GOOS == "windows" {
		return base // the bridge listens on TCP
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		real = base
	}
	// MkdirTemp's random part is a uint32 in decimal; the path needs a NUL.
	longest := filepath.Join(real, RunDirPrefix+"4294967295", bridgeSocketName)
	if len(longest) < len(syscall.RawSockaddrUnix{}.Path) {
		return base
	}
	return "/tmp"
}

// Close removes the directory. Windows cannot remove a file that is open,
// so the lock goes first.
func (r *RunDir) Close() error {
	_ = r.lock.Unlock()
	return os.RemoveAll(r.path)
}

// workerDir makes a new directory for one worker.
func (r *RunDir) workerDir() (string, error) {
	return os.MkdirTemp(r.path, "worker-")
}

// sweepRunDirs removes the run directories in base whose server is gone:
// their lock can be taken. One that a server is making right now has no
// lock file yet, so a directory without one is left alone while it is new.
func sweepRunDirs(base string, log *zap.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), RunDirPrefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if abandoned(dir) {
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("cannot remove a run directory left by a server that is gone", zap.String("path", dir), zap.Error(err))
				continue
			}
			log.Info("removed a run directory left by a server that is gone", zap.String("path", dir))
		}
	}
}

// abandoned reports whether no server holds dir.
func abandoned(dir string) bool {
	lockPath := filepath.Join(dir, runDirLock)
	if _, err := os.Lstat(lockPath); errors.Is(err, fs.ErrNotExist) {
		info, err := os.Lstat(dir)
		return err == nil && time.Since(info.ModTime()) > unlockedGrace
	}
	lock := flock.New(lockPath)
	ok, err := lock.TryLock()
	if err != nil || !ok {
		return false
	}
	// Released before the removal: Windows removes no open file. A server
	// cannot take it over in between, as none reuses a directory.
	_ = lock.Unlock()
	return true
}

// BridgeSocket is the Unix socket the bridge listens on, in r, or "" for
// TCP on Windows, where deno has no Unix sockets.
func (r *RunDir) BridgeSocket() string {
	if runtime.GOOS == "windows" {
		return ""
	}
	return filepath.Join(r.path, bridgeSocketName)
}
