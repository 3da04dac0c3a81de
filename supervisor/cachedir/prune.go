package cachedir

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// DefaultKeepRecent is the KeepRecent of servers and of the cache command:
// longer than a call takes from fetching its packages to reading them, and
// than a server takes from making an entry to holding it.
const DefaultKeepRecent = 10 * time.Minute

// rootLockPoll is how often Prune tries the cache's lock while a server
// prepares its runtime, which can take minutes.
const rootLockPoll = 100 * time.Millisecond

// PruneOptions are the choices of [Dir.Prune].
type PruneOptions struct {
	// KeepRecent spares the entries used less than this long ago; 0 spares
	// none for their age.
	KeepRecent time.Duration
	// Keep spares the entries that these paths are in (see [Dir.Entry]),
	// such as the runtime of the running build.
	Keep []string
	// OnWait, if not nil, is called once if Prune has to wait for the
	// cache's lock: a server is preparing its runtime.
	OnWait func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reason is why Prune spared an entry it would have removed.
type Reason string

// The reasons to spare an entry.
const (
	InUse       Reason = "in use"            // a server holds it
	Kept        Reason = "kept"              // listed in PruneOptions.Keep
	Recent      Reason = "used recently"     // within PruneOptions.KeepRecent
	Unremovable Reason = "cannot be removed" // see Spared.Err
)

// Spared is an entry that Prune would have removed, and why it did not.
type Spared struct {
	Entry
	Reason Reason
	// Err is why an Unremovable entry could not be removed: on Windows, a
	// member that some process has open.
	Err error
}

// PruneResult is what Prune did.
type PruneResult struct {
	// Removed are the entries removed, least recently used first.
	Removed []Entry
	// Spared are the entries Prune would have removed to reach the limit,
	// had they not been spared, least recently used first.
	Spared []Spared
	// Total is the total size of the entries left, in bytes.
	Total int64
}

// Freed returns the total size of the entries removed, in bytes.
func (r PruneResult) Freed() int64 {
	var n int64
	for _, e := range r.Removed {
		n += e.Size
	}
	return n
}

// Prune removes the least recently used entries until the entries take no
// more than limit bytes, sparing those in use, kept or used recently (see the
// package doc for how). A limit of 0 or less removes no entry. Either way it
// deletes trash and lock files left behind, and temporaries of servers that
// died while making an entry. It waits for the cache's lock while a server
// prepares its runtime, or until ctx ends.
//
// An error is one that stops the whole prune; an entry that cannot be
// removed is spared and named in the result.
func (d Dir) Prune(ctx context.Context, limit int64, opts PruneOptions) (PruneResult, error) {
	if _, err := os.Stat(d.root); errors.Is(err, fs.ErrNotExist) {
		return PruneResult{}, nil
	}
	unlock, err := d.lockRoot(ctx, opts.OnWait)
	if err != nil {
		return PruneResult{}, err
	}
	res, trash, err := d.prune(ctx, limit, opts)
	unlock()
	// Nothing can see the trash: it goes after the lock is released.
	for _, t := range trash {
		_ = os.RemoveAll(t) // what stays is deleted by a later prune
	}
	return res, err
}

// prune is Prune under the cache's lock; it returns the trash to delete.
func (d Dir) prune(ctx context.Context, limit int64, opts PruneOptions) (PruneResult, []string, error) {
	var res PruneResult
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	sc, err := d.scan(ctx, now())
	if err != nil {
		return res, nil, err
	}
	trash := append(sc.trash, sc.stale...)
	for _, e := range sc.entries {
		res.Total += e.Size
	}
	// Lock files whose entry is gone: held, and never made.
	names := map[string]bool{}
	for _, e := range sc.entries {
		names[e.Path+lockExt] = true
	}
	for _, l := range sc.locks {
		if names[l] {
			continue
		}
		main := strings.TrimSuffix(l, lockExt)
		if e, err := d.Entry(main); err == nil && e.Path == main {
			_, _, _ = d.remove(e, true)
		}
	}
	if limit <= 0 {
		return res, trash, nil
	}
	keep := map[string]bool{}
	for _, p := range opts.Keep {
		if e, err := d.Entry(p); err == nil {
			keep[e.Path] = true
		}
	}
	entries := slices.Clone(sc.entries)
	sortByUse(entries)
	recent := now().Add(-opts.KeepRecent)
	for _, e := range entries {
		if res.Total <= limit {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, trash, err
		}
		switch {
		case keep[e.Path]:
			res.Spared = append(res.Spared, Spared{Entry: e, Reason: Kept})
			continue
		case opts.KeepRecent > 0 && e.LastUsed.After(recent):
			res.Spared = append(res.Spared, Spared{Entry: e, Reason: Recent})
			continue
		}
		moved, stays, err := d.remove(e, false)
		if stays == gone {
			res.Total -= e.Size
			continue
		}
		if stays != "" {
			res.Spared = append(res.Spared, Spared{Entry: e, Reason: stays, Err: err})
			continue
		}
		trash = append(trash, moved...)
		res.Removed = append(res.Removed, e)
		res.Total -= e.Size
	}
	return res, trash, nil
}

// lockRoot takes the cache directory's lock, the one servers prepare their
// runtime under, calling onWait if it has to wait.
func (d Dir) lockRoot(ctx context.Context, onWait func()) (func(), error) {
	l := flock.New(filepath.Join(d.root, ".lock"))
	ok, err := l.TryLock()
	if err == nil && !ok {
		if onWait != nil {
			onWait()
		}
		ok, err = l.TryLockContext(ctx, rootLockPoll)
	}
	if err != nil || !ok {
		_ = l.Close()
		return nil, fmt.Errorf("lock the cache directory %s: %w", d.root, err)
	}
	return func() { _ = l.Unlock() }, nil
}

// remove removes e (of which only Kind, Path, Name and LastUsed are used)
// if its lock can be taken at once: it renames its members to trash, which
// it returns, and removes its lock file. An orphan is a lock file seen
// without its entry: it is removed only if the entry is still missing. An
// entry that stays gets the reason, with the error for Unremovable.
func (d Dir) remove(e Entry, orphan bool) (trash []string, stays Reason, err error) {
	lockPath := e.Path + lockExt
	flag := os.O_CREATE | os.O_RDONLY
	if orphan {
		flag = os.O_RDONLY // gone meanwhile: nothing to do
	}
	l := flock.New(lockPath, flock.SetFlag(flag), flock.SetPermissions(lockPerm))
	locked, err := l.TryLock()
	if err != nil {
		return nil, Unremovable, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if !locked {
		return nil, InUse, nil
	}
	unlocked := false
	defer func() {
		if !unlocked {
			_ = l.Unlock()
		}
	}()
	// A pruner that does not take the cache's lock (another build's) may
	// have removed the lock file meanwhile: leave the entry to it.
	if same, err := sameFile(l, lockPath); err != nil || !same {
		return nil, InUse, err
	}
	last, members := d.lastUse(e)
	switch {
	case orphan && len(members) > 0:
		return nil, InUse, nil // made after all
	case orphan:
	case len(members) == 0:
		// Removed meanwhile, by a pruner that does not take the cache's
		// lock; its lock file, made again just now, goes below.
		stays = gone
	case last.After(e.LastUsed):
		return nil, Recent, nil // used since it was measured
	}
	var moved [][2]string
	for _, m := range members {
		t := trashName(m)
		err := os.Rename(m, t)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// All or nothing: put back what was moved.
			for _, mv := range slices.Backward(moved) {
				_ = os.Rename(mv[1], mv[0])
			}
			return nil, Unremovable, fmt.Errorf("remove %s: %w", e.Name, err)
		}
		moved = append(moved, [2]string{m, t})
		trash = append(trash, t)
	}
	// The lock file goes last, while it is locked: a holder that opened it
	// meanwhile then sees that the path no longer names it. Windows deletes
	// no file that is open: there it goes once unlocked, unless someone
	// opened it meanwhile, and then a later prune removes it.
	removeErr := os.Remove(lockPath)
	_ = l.Unlock()
	unlocked = true
	if removeErr != nil && !errors.Is(removeErr, fs.ErrNotExist) {
		_ = os.Remove(lockPath)
	}
	return trash, stays, nil
}

// gone is remove's word for an entry that was no longer there.
const gone Reason = "gone"

// trashName returns a new name for path in its directory, which marks it as
// trash.
func trashName(path string) string {
	return filepath.Join(filepath.Dir(path), trashPrefix+filepath.Base(path)+"-"+rand.Text()[:12])
}
