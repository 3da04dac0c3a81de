package cachedir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

const (
	// lockPerm lets other users of the directory lock the file too.
	lockPerm = 0o644
	// holdPoll is how often a hold tries again while a pruner removes its
	// entry, which takes milliseconds.
	holdPoll = 10 * time.Millisecond
)

// Hold is a shared lock on an entry: while it is held, no prune removes the
// entry. Release it when the entry is no longer used; the system releases
// it if the process dies. A Hold is safe for concurrent use.
type Hold struct {
	path string // the entry's main path

	mu   sync.Mutex
	lock *flock.Flock // nil once released
}

// HoldEntry holds the entry whose main path is path (see the package doc:
// a snapshot's is its .bin file, a wheel's its sha256 directory), which need
// not exist yet, and marks it used. It waits only while a pruner is removing
// the entry, or until ctx ends; once it returns, the entry is there unless
// it was removed just before, in which case the caller makes it again.
func HoldEntry(ctx context.Context, path string) (*Hold, error) {
	lockPath := path + lockExt
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("hold %s: %w", path, err)
	}
	for {
		l := flock.New(lockPath, flock.SetPermissions(lockPerm))
		if _, err := l.TryRLockContext(ctx, holdPoll); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("hold %s: %w", path, err)
		}
		same, err := sameFile(l, lockPath)
		if err != nil {
			_ = l.Unlock()
			return nil, fmt.Errorf("hold %s: %w", path, err)
		}
		if same {
			_ = Touch(path)
			return &Hold{path: path, lock: l}, nil
		}
		// A pruner removed the entry, and the lock file with it, between
		// our opening this file and locking it: lock the one at the path.
		_ = l.Unlock()
	}
}

// Hold holds the entry that path is in (its main path, a member, or a file
// in one), as [HoldEntry] does. A path in no entry gives an error wrapping
// [ErrNotEntry].
func (d Dir) Hold(ctx context.Context, path string) (*Hold, error) {
	e, err := d.Entry(path)
	if err != nil {
		return nil, err
	}
	return HoldEntry(ctx, e.Path)
}

// Path returns the main path of the entry held.
func (h *Hold) Path() string { return h.path }

// Touch marks the entry used now, as long as it is held: a long-lived
// holder calls it now and then. It does nothing once the hold is released.
func (h *Hold) Touch() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lock == nil {
		return nil
	}
	return Touch(h.path)
}

// Release marks the entry used now and releases the hold. Calls after the
// first do nothing.
func (h *Hold) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lock == nil {
		return nil
	}
	_ = Touch(h.path) // a missing entry (never made) has nothing to mark
	err := h.lock.Unlock()
	h.lock = nil
	if err != nil {
		return fmt.Errorf("release %s: %w", h.path, err)
	}
	return nil
}

// Touch marks the entry whose main path is path used now, by setting the
// path's modification time: the mark of users that do not hold the entry.
// Unlike os.Chtimes it also works on Windows while other processes have the
// file open.
func Touch(path string) error {
	if err := setModTime(path, time.Now()); err != nil {
		return fmt.Errorf("mark %s used: %w", path, err)
	}
	return nil
}

// sameFile reports whether path still names the file that l has open and
// locked.
func sameFile(l *flock.Flock, path string) (bool, error) {
	locked, err := l.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(locked, now), nil
}
