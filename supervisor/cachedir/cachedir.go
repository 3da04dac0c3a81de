// Package cachedir keeps the cache directory of mcp-run-python within a size
// limit: it removes the entries used least recently, never one in use, while
// several servers (processes, on one machine or sharing a file system that
// supports locks) use the directory at once. It also lists the entries, for
// the cache command.
//
// # Entries
//
// An entry is what is used and removed as one. Each has a main path, which
// names it:
//
//	js/<version>/                          Program: a worker program
//	pyodide/<version>/                     Pyodide: an npm install of Pyodide
//	snapshots/<key>.bin, codecache/<key>/  Snapshot: a memory snapshot and its V8 code-cache template
//	packages/wheels/sha256/<sha256>/       Wheel: a package file, by its content's hash, and its compiled variants
//	packages/index/<index>/<project>.json  IndexPage: an index page, kept for offline use
//
// A snapshot is a pair whose main path is the .bin file; either half may be
// missing (one is made without the other) and the pair is still one entry.
// Nothing else is an entry, and nothing else is ever removed: deno's own
// download cache (deno/), the files calls returned (files/, which keep to
// their own limit), the lock .lock, not-a-directory (of older versions), temporary files. Only
// names of the forms above are entries, so that a file of some other kind is
// never taken for one.
//
// # Use
//
// A server that uses an entry holds it for as long as it uses it:
// [HoldEntry] (or [Dir.Hold]) takes a shared lock on the entry's lock file,
// its main path with ".lock" added (snapshots/<key>.bin.lock), beside the
// entry rather than in it, since Windows cannot rename a directory that holds
// an open file. The locks are github.com/gofrs/flock's: flock(2) on Unix,
// LockFileEx on Windows, both held per open file (two holds in one process
// exclude a pruner as two processes do) and released by the system when the
// process dies. (Where flock is emulated with POSIX locks, as on NFS, locks
// of one process do not exclude each other: a server also names what it
// holds in [PruneOptions.Keep] of its own prunes.) Holding an entry that does
// not exist yet is allowed, and is the safe order: hold, then make it if it
// is missing, then use it.
//
// The last use of an entry is the latest modification time of its members
// (not the access time, which noatime and relatime leave stale). Making an
// entry sets it; taking and releasing a hold set the main path's to now, and
// [Touch] does for users that do not hold (index pages are read and replaced
// whole, in one step each, and need no hold). A long-lived holder touches its
// holds now and then ([Hold.Touch]), so that its entries do not look unused
// once it ends.
//
// # Removal
//
// [Dir.Prune] works under the cache directory's own lock, <root>/.lock, under
// which servers also prepare their runtime: prunes never overlap, see
// entries as they are, and never remove what a preparation is making and has
// not held yet. It measures the entries, sorts them by last use, and removes
// the oldest until their total is within the limit, sparing those that are
// held, kept ([PruneOptions.Keep]) or used within [PruneOptions.KeepRecent]
// (which covers the moment between making or using an entry and holding it).
//
// To remove an entry a pruner takes its lock exclusively, without waiting:
// if a server holds it, the entry is spared, and so is one used since it was
// measured. Then it renames each member to a ".trash-" name in the same
// directory (a rename is atomic: a member is there whole or not at all, and
// a failure puts back what was moved), removes the lock file and releases
// it. No holder sees an entry half removed, since none holds it meanwhile.
// The trash is deleted after the cache's lock is released; trash left by a
// pruner that died is deleted by the next, and so are temporaries (.tmp-*)
// more than a day old, left by a server that died while making an entry. On
// Windows a file that some process has open can be neither renamed nor
// deleted: such an entry is spared, and a lock file that cannot be deleted
// yet is left for a later prune.
//
// A lock file may be removed between a holder's opening it and locking it.
// So a holder, once it has the lock, checks that the path still names the
// file it locked, and starts again with the file at the path if not; a
// pruner does the same check. Lock files whose entry is gone (held, then
// never made) are removed by prunes under the same protocol.
//
// Sizes are apparent sizes, the sum of the sizes of the members' regular
// files: a file hard-linked elsewhere (deno links Pyodide's files from its
// download cache) is counted in full.
package cachedir

import (
	"context"
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

// Kind is what an entry holds.
type Kind string

// The kinds of entries.
const (
	Program   Kind = "program"  // js/<version>/
	Pyodide   Kind = "pyodide"  // pyodide/<version>/
	Snapshot  Kind = "snapshot" // snapshots/<key>.bin and codecache/<key>/
	Wheel     Kind = "wheel"    // packages/wheels/sha256/<sha256>/
	IndexPage Kind = "index"    // packages/index/<index>/<project>.json
)

// Entry is an entry of the cache directory.
type Entry struct {
	Kind Kind
	// Name is the main path relative to the cache directory, with forward
	// slashes, such as "snapshots/0123456789abcdef.bin".
	Name string
	// Path is the main path, absolute. A snapshot's may be missing while
	// its code cache is there.
	Path string
	// Members are the entry's files and directories that exist, absolute:
	// Path, and a snapshot's code cache. Set by listing.
	Members []string
	// Size is the total size of the members' regular files, in bytes. Set
	// by listing.
	Size int64
	// LastUsed is the latest modification time of the members. Set by
	// listing.
	LastUsed time.Time
	// InUse reports that a server held the entry when it was listed. Set by
	// [Dir.List] only.
	InUse bool
}

// ErrNotEntry is the error for a path that is in no entry of the cache
// directory.
var ErrNotEntry = errors.New("not in an entry of the cache directory")

// Dir is a cache directory.
type Dir struct {
	root string // absolute, symlinks resolved
}

// Open returns the cache directory at root, which need not exist yet. Its
// path is made absolute with symlinks resolved when it exists, as servers
// resolve it (deno checks the real paths of files against its permissions),
// so that the paths they hold are found inside it.
func Open(root string) (Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Dir{}, fmt.Errorf("cache directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return Dir{root: abs}, nil
}

// Root returns the directory's absolute path.
func (d Dir) Root() string { return d.root }

// Entry returns the entry that path (absolute, or relative to the working
// directory) is in: its main path, a member, or any file in a member. Only
// Kind, Name and Path are set. A path in no entry gives an error wrapping
// [ErrNotEntry].
func (d Dir) Entry(path string) (Entry, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Entry{}, fmt.Errorf("cache entry %s: %w", path, err)
	}
	rel, err := filepath.Rel(d.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return Entry{}, fmt.Errorf("%s: %w %s", path, ErrNotEntry, d.root)
	}
	kind, main, ok := locate(strings.Split(filepath.ToSlash(rel), "/"))
	if !ok {
		return Entry{}, fmt.Errorf("%s: %w %s", path, ErrNotEntry, d.root)
	}
	return d.entry(kind, main), nil
}

// entry returns the entry of kind with main path main (relative, slashes).
func (d Dir) entry(kind Kind, main string) Entry {
	return Entry{Kind: kind, Name: main, Path: filepath.Join(d.root, filepath.FromSlash(main))}
}

// memberPaths returns every path a member of e may have, main path first.
func (d Dir) memberPaths(e Entry) []string {
	if e.Kind != Snapshot {
		return []string{e.Path}
	}
	key := strings.TrimSuffix(filepath.Base(e.Path), snapshotExt)
	return []string{e.Path, filepath.Join(d.root, "codecache", key)}
}

const (
	lockExt     = ".lock"
	snapshotExt = ".bin"
	pageExt     = ".json"
	trashPrefix = ".trash-"
	// tmpPrefix starts the temporaries servers make next to the entries
	// they fill (js/.tmp-*, codecache/.tmp-*).
	tmpPrefix = ".tmp-"
	// staleAge is the age past which such a temporary is taken for the
	// leftover of a server that died while making it.
	staleAge = 24 * time.Hour
)

// locate returns the kind and main path (slash-separated) of the entry that
// the path of parts, relative to the root, is in.
func locate(parts []string) (Kind, string, bool) {
	n := len(parts)
	switch {
	case n >= 2 && parts[0] == "js" && plainName(parts[1]):
		return Program, "js/" + parts[1], true
	case n >= 2 && parts[0] == "pyodide" && plainName(parts[1]):
		return Pyodide, "pyodide/" + parts[1], true
	case n == 2 && parts[0] == "snapshots" && strings.HasSuffix(parts[1], snapshotExt) && isHex(strings.TrimSuffix(parts[1], snapshotExt)):
		return Snapshot, "snapshots/" + parts[1], true
	case n >= 2 && parts[0] == "codecache" && isHex(parts[1]):
		return Snapshot, "snapshots/" + parts[1] + snapshotExt, true
	case n >= 4 && parts[0] == "packages" && parts[1] == "wheels" && parts[2] == "sha256" && isHex(parts[3]) && len(parts[3]) == 64:
		return Wheel, strings.Join(parts[:4], "/"), true
	case n == 4 && parts[0] == "packages" && parts[1] == "index" && plainName(parts[2]) &&
		strings.HasSuffix(parts[3], pageExt) && plainName(strings.TrimSuffix(parts[3], pageExt)):
		return IndexPage, strings.Join(parts, "/"), true
	}
	return "", "", false
}

// wantsDir reports whether the member at rel (slash-separated) of an entry
// of kind is a directory, not a regular file.
func wantsDir(kind Kind, rel string) bool {
	switch kind {
	case IndexPage:
		return false
	case Snapshot:
		return strings.HasPrefix(rel, "codecache/")
	}
	return true
}

// plainName reports whether name can be an entry's: not hidden (temporaries
// and trash are), not a lock file.
func plainName(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, lockExt)
}

// isHex reports whether s is a non-empty string of lower-case hex digits.
func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// places returns the directories (relative, slashes) whose children are
// members of entries, but for the packages/index/<index> directories.
func places() []string {
	return []string{"js", "pyodide", "snapshots", "codecache", "packages/wheels/sha256"}
}

// scan is what a walk of the cache directory found.
type scan struct {
	entries []Entry  // with Members, Size and LastUsed; unsorted
	locks   []string // lock files beside entries' places, absolute
	trash   []string // trash left behind, absolute
	stale   []string // temporaries older than staleAge, absolute
}

// scan walks the places of entries and measures each entry.
func (d Dir) scan(ctx context.Context, now time.Time) (scan, error) {
	var sc scan
	byName := map[string]*Entry{}
	var order []string
	dirs := places()
	if index, err := os.ReadDir(filepath.Join(d.root, "packages", "index")); err == nil {
		for _, de := range index {
			if de.IsDir() && plainName(de.Name()) {
				dirs = append(dirs, "packages/index/"+de.Name())
			}
		}
	}
	for _, place := range dirs {
		children, err := os.ReadDir(filepath.Join(d.root, filepath.FromSlash(place)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return sc, fmt.Errorf("cache directory: %w", err)
		}
		for _, de := range children {
			if err := ctx.Err(); err != nil {
				return sc, err
			}
			name := de.Name()
			path := filepath.Join(d.root, filepath.FromSlash(place), name)
			switch {
			case strings.HasPrefix(name, trashPrefix):
				sc.trash = append(sc.trash, path)
				continue
			case strings.HasPrefix(name, tmpPrefix):
				if info, err := de.Info(); err == nil && now.Sub(info.ModTime()) > staleAge {
					sc.stale = append(sc.stale, path)
				}
				continue
			case strings.HasSuffix(name, lockExt):
				sc.locks = append(sc.locks, path)
				continue
			}
			rel := place + "/" + name
			kind, main, ok := locate(strings.Split(rel, "/"))
			if !ok || de.IsDir() != wantsDir(kind, rel) {
				continue
			}
			e := byName[main]
			if e == nil {
				entry := d.entry(kind, main)
				e = &entry
				byName[main] = e
				order = append(order, main)
			}
			size, last := measure(ctx, path)
			e.Members = append(e.Members, path)
			e.Size += size
			if last.After(e.LastUsed) {
				e.LastUsed = last
			}
		}
	}
	for _, name := range order {
		e := byName[name]
		// The main path first, as memberPaths lists them.
		slices.SortStableFunc(e.Members, func(a, b string) int {
			switch {
			case a == e.Path:
				return -1
			case b == e.Path:
				return 1
			}
			return 0
		})
		sc.entries = append(sc.entries, *e)
	}
	return sc, nil
}

// measure returns the total size of the regular files at or under path and
// the modification time of path itself. What vanishes meanwhile is skipped.
func measure(ctx context.Context, path string) (int64, time.Time) {
	info, err := os.Lstat(path)
	if err != nil {
		return 0, time.Time{}
	}
	if !info.IsDir() {
		if info.Mode().IsRegular() {
			return info.Size(), info.ModTime()
		}
		return 0, info.ModTime()
	}
	var size int64
	_ = filepath.WalkDir(path, func(_ string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone, or unreadable: not counted
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return size, info.ModTime()
}

// lastUse returns the latest modification time of the members of e that
// exist, and those members.
func (d Dir) lastUse(e Entry) (time.Time, []string) {
	var last time.Time
	var members []string
	for _, p := range d.memberPaths(e) {
		info, err := os.Lstat(p)
		if err != nil {
			continue
		}
		members = append(members, p)
		if info.ModTime().After(last) {
			last = info.ModTime()
		}
	}
	return last, members
}

// Area is a part of the cache directory that holds no entries.
type Area struct {
	// Name is its name in the cache directory, such as "deno".
	Name string
	// Size is the total size of its regular files, in bytes.
	Size int64
}

// Listing is what the cache directory holds.
type Listing struct {
	// Entries are the entries, least recently used first.
	Entries []Entry
	// Total is the total size of the entries, in bytes; InUse the part of
	// it that servers hold.
	Total, InUse int64
	// Others are the rest of the directory's top level, which is not
	// pruned: deno's download cache, the returned files, the locks.
	Others []Area
}

// List lists the entries of the cache directory and whether servers hold
// them, and measures the rest. It changes nothing: an entry without a lock
// file is not held. A directory that does not exist is empty.
func (d Dir) List(ctx context.Context) (Listing, error) {
	var l Listing
	sc, err := d.scan(ctx, time.Now())
	if err != nil {
		return l, err
	}
	for _, e := range sc.entries {
		if e.Kind == Wheel && emptyDir(e.Path) {
			continue // left by a failed download (older versions kept it): there is no wheel
		}
		e.InUse = held(e.Path + lockExt)
		l.Total += e.Size
		if e.InUse {
			l.InUse += e.Size
		}
		l.Entries = append(l.Entries, e)
	}
	sortByUse(l.Entries)
	top, err := os.ReadDir(d.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l, fmt.Errorf("cache directory: %w", err)
	}
	for _, de := range top {
		switch de.Name() {
		case "js", "pyodide", "snapshots", "codecache", "packages":
			continue
		}
		size, _ := measure(ctx, filepath.Join(d.root, de.Name()))
		l.Others = append(l.Others, Area{Name: de.Name(), Size: size})
	}
	return l, ctx.Err()
}

// emptyDir reports whether path is a directory that holds nothing.
func emptyDir(path string) bool {
	children, err := os.ReadDir(path)
	return err == nil && len(children) == 0
}

// sortByUse sorts entries least recently used first, then by name.
func sortByUse(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// held reports whether someone holds the lock file at path: whether its
// exclusive lock cannot be taken at once. A missing lock file is not held,
// and is not made.
func held(path string) bool {
	l := flock.New(path, flock.SetFlag(os.O_RDONLY))
	ok, err := l.TryLock()
	if err != nil {
		return false // missing (no server holds the entry), or unreadable
	}
	if ok {
		_ = l.Unlock()
	}
	return !ok
}
