// Package filestore keeps the files that a call's code creates or changes,
// so that its tool result can link to them and resources/read can answer
// their URIs: session://{id}/{path} for a Python session's files, kept until
// the session ends, and call://{id}/{path} for a fresh call's, kept for a
// while. Paths, contents and URIs all come from hostile callers.
package filestore

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/gofrs/flock"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// Config is a store's configuration.
type Config struct {
	// Dir holds the files. It must be private to this store: Open removes
	// what an earlier store left in it, and fails while another holds it.
	Dir string
	// MaxBytes caps the total size of the files kept.
	MaxBytes int64
	// MaxFiles caps their number, as empty files cost memory and inodes
	// though no bytes; 0 means 10000.
	MaxFiles int
	// MaxBytesPerPrincipal and MaxFilesPerPrincipal, when above 0, cap what
	// one owner keeps, so that one caller cannot fill the store, whose
	// sessions' files are never evicted. The owner "" (callers the server
	// cannot tell apart) has only the store's caps.
	MaxBytesPerPrincipal int64
	MaxFilesPerPrincipal int
	// TTL is how long a call's files are kept.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

const (
	defaultMaxFiles = 10000
	// lockName is the file in Dir that a live store holds locked.
	lockName = ".lock"
)

// ErrNotFound is the error of Get for every URI it does not answer: unknown,
// expired, malformed or another owner's, so that an answer tells a caller
// nothing about files it may not read.
var ErrNotFound = errors.New("file not found")

// ErrFull is the cause of Put's error when a file does not fit in the caps.
var ErrFull = errors.New("file store full")

// Entry describes a kept file.
type Entry struct {
	URI      string
	Name     string // the path's last element
	Path     string // relative to the call's working directory
	MIMEType string
	Size     int64
}

// Store keeps files on disk under a random name each, with an index in
// memory. It is safe for concurrent use.
type Store struct {
	cfg  Config
	log  *zap.Logger
	lock *flock.Flock

	// One lock serializes reads and writes of the files as well as of the
	// index, so that no file is removed while it is read: Windows could not.
	mu     sync.Mutex
	scopes map[Scope]*scopeFiles
	calls  *list.List // of *file: the calls' files, oldest first
	bytes  int64
	count  int
	// callBytes is the part of bytes that call files hold.
	callBytes int64
	// owners is what each owner keeps.
	owners map[identity.Principal]*usage
	closed bool
}

// usage is what an owner keeps.
type usage struct {
	bytes int64
	files int
}

// scopeFiles are a scope's files, which only their owner may see.
type scopeFiles struct {
	owner identity.Principal
	files map[string]*file // by path
	bytes int64
}

// file is a kept file.
type file struct {
	Entry
	scope   Scope
	disk    string        // its name in Dir
	expires time.Time     // zero for a session's files
	elem    *list.Element // in Store.calls, nil for a session's files
}

func (f *file) expired(now time.Time) bool {
	return !f.expires.IsZero() && !now.Before(f.expires)
}

// Open makes a store in cfg.Dir, creating the directory, and removes the
// files an earlier store left there: files do not outlive their server.
// It removes only files named as it names them, in case Dir is not what it
// should be.
func Open(cfg Config, log *zap.Logger) (*Store, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("file store: no directory")
	case cfg.MaxBytes <= 0:
		return nil, fmt.Errorf("file store: the size cap must be positive, not %d", cfg.MaxBytes)
	case cfg.MaxFiles < 0:
		return nil, fmt.Errorf("file store: the file count cap must not be negative, not %d", cfg.MaxFiles)
	case cfg.MaxBytesPerPrincipal < 0 || cfg.MaxFilesPerPrincipal < 0:
		return nil, fmt.Errorf("file store: the caps per owner must not be negative, not %d bytes and %d files", cfg.MaxBytesPerPrincipal, cfg.MaxFilesPerPrincipal)
	case cfg.TTL <= 0:
		return nil, fmt.Errorf("file store: the TTL must be positive, not %s", cfg.TTL)
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = defaultMaxFiles
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("file store: %w", err)
	}
	// Another live store in Dir would lose its files to our clean-up.
	lock := flock.New(filepath.Join(cfg.Dir, lockName))
	if ok, err := lock.TryLock(); err != nil {
		return nil, fmt.Errorf("file store: lock %s: %w", cfg.Dir, err)
	} else if !ok {
		return nil, fmt.Errorf("file store: %s: %w", cfg.Dir, errInUse)
	}
	s := &Store{cfg: cfg, log: log, lock: lock, scopes: map[Scope]*scopeFiles{}, calls: list.New(), owners: map[identity.Principal]*usage{}}
	if err := s.removeAll(); err != nil {
		log.Warn("cannot remove the files an earlier run left", zap.String("dir", cfg.Dir), zap.Error(err))
	}
	return s, nil
}

// errInUse is Open's error for a directory another live store holds.
var errInUse = errors.New("in use by another server")

// maxSlots bounds the directories OpenFree tries: far more servers than
// ever share a cache directory.
const maxSlots = 256

// OpenFree opens a store in the first directory under parent that no live
// store holds: parent/0, parent/1 and so on. Several servers may share a
// cache directory, and files do not outlive their server, so a dead
// server's directory is the next one's, and none is left behind for long.
// cfg.Dir is ignored.
func OpenFree(parent string, cfg Config, log *zap.Logger) (*Store, error) {
	for i := range maxSlots {
		cfg.Dir = filepath.Join(parent, strconv.Itoa(i))
		s, err := Open(cfg, log)
		if !errors.Is(err, errInUse) {
			return s, err
		}
	}
	return nil, fmt.Errorf("file store: all %d directories under %s are in use", maxSlots, parent)
}

// Put keeps data as the file at path p of scope, for owner, the principal
// who may Get it. A file already at p is replaced. When the file does
// not fit, expired files go first, then the oldest files of calls other
// than scope: owner's own when it is past its caps, anyone's when the
// store is; a session's files never go. If it still does not fit, Put
// keeps nothing and its error, which names the cap, wraps ErrFull.
func (s *Store) Put(owner identity.Principal, scope Scope, p string, data []byte) (Entry, error) {
	if !scope.valid() {
		return Entry{}, fmt.Errorf("invalid scope id %q", scope.id)
	}
	if err := checkPath(p); err != nil {
		return Entry{}, err
	}
	size := int64(len(data))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Entry{}, errors.New("file store closed")
	}
	if sf := s.scopes[scope]; sf != nil {
		if sf.owner != owner {
			return Entry{}, fmt.Errorf("%s belongs to another owner", scope)
		}
		// Gone even if the new version is not kept: a link to the old one
		// would show what the file no longer holds.
		if old := sf.files[p]; old != nil {
			s.remove(old)
		}
	}
	now := s.cfg.Now()
	if err := s.makeRoom(owner, scope, size, now); err != nil {
		return Entry{}, err
	}
	f := &file{
		Entry: Entry{URI: scope.uri(p), Name: path.Base(p), Path: p, MIMEType: mimeType(p, data), Size: size},
		scope: scope,
		disk:  randomName(),
	}
	if err := writeNew(filepath.Join(s.cfg.Dir, f.disk), data); err != nil {
		s.log.Error("cannot write a file to keep", zap.String("uri", f.URI), zap.Error(err))
		// Where the server keeps files is no business of the client's.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Entry{}, fmt.Errorf("file store: cannot write the file: %w", err)
	}
	s.add(owner, f, now)
	return f.Entry, nil
}

// Get is the file at uri, if owner put it and it has not expired; else the
// error is ErrNotFound.
func (s *Store) Get(owner identity.Principal, uri string) (Entry, []byte, error) {
	scope, p, ok := parseURI(uri)
	if !ok {
		return Entry{}, nil, ErrNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := s.visible(owner, scope)
	if sf == nil || sf.files[p] == nil {
		return Entry{}, nil, ErrNotFound
	}
	f := sf.files[p]
	data, err := os.ReadFile(filepath.Join(s.cfg.Dir, f.disk))
	if err != nil {
		s.log.Warn("cannot read a kept file", zap.String("uri", f.URI), zap.Error(err))
		return Entry{}, nil, ErrNotFound
	}
	return f.Entry, data, nil
}

// Has reports whether Get would find a file at uri for owner, without
// reading it.
func (s *Store) Has(owner identity.Principal, uri string) bool {
	scope, p, ok := parseURI(uri)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := s.visible(owner, scope)
	return sf != nil && sf.files[p] != nil
}

// List is the files of scope that owner put and that have not expired,
// sorted by path.
func (s *Store) List(owner identity.Principal, scope Scope) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := s.visible(owner, scope)
	if sf == nil {
		return nil
	}
	var entries []Entry
	for _, f := range sf.files {
		entries = append(entries, f.Entry)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return entries
}

// Drop removes the files of scope, as when its session ends.
func (s *Store) Drop(scope Scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sf := s.scopes[scope]; sf != nil {
		for _, f := range sf.files {
			s.remove(f)
		}
	}
}

// Remove forgets owner's file at path in scope, if there is one: a
// session's code deleted it.
func (s *Store) Remove(owner identity.Principal, scope Scope, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sf := s.visible(owner, scope); sf != nil {
		if f := sf.files[p]; f != nil {
			s.remove(f)
		}
	}
}

// Sweep removes the files that have expired. Get, List and Put remove those
// they come across; Sweep, run now and then, frees the space of the rest.
func (s *Store) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.cfg.Now())
}

// Bytes is the total size of the files kept.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Close removes all the files and releases Dir for another store. The
// store keeps nothing afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	clear(s.scopes)
	clear(s.owners)
	s.calls.Init()
	s.bytes, s.callBytes, s.count = 0, 0, 0
	err := s.removeAll()
	// After the removal: a store that takes Dir over removes our files.
	return errors.Join(err, s.lock.Unlock())
}

// visible is scope's files if owner may see them, with the expired ones
// removed, or nil.
func (s *Store) visible(owner identity.Principal, scope Scope) *scopeFiles {
	sf := s.scopes[scope]
	if sf == nil || sf.owner != owner {
		return nil
	}
	now := s.cfg.Now()
	for _, f := range sf.files {
		if f.expired(now) {
			s.remove(f)
		}
	}
	return sf
}

// makeRoom evicts files until one of size fits in owner's caps and the
// store's, keeping scope's own: the result of a call must not link to files
// that its later files pushed out. It evicts nothing unless that makes
// room.
func (s *Store) makeRoom(owner identity.Principal, scope Scope, size int64, now time.Time) error {
	if s.ownerFits(owner, size, usage{}) && s.fits(size, usage{}) {
		return nil
	}
	s.expire(now)
	// An owner past its caps makes room among its own files only.
	mine := func(f *file) bool { return s.scopes[f.scope].owner == owner }
	if free := s.evictable(scope, mine); !s.ownerFits(owner, size, free) {
		u := s.used(owner)
		if s.cfg.MaxFilesPerPrincipal > 0 && u.files-free.files >= s.cfg.MaxFilesPerPrincipal {
			return fmt.Errorf("%w: you keep the %d files one caller may keep (--max-files-per-principal); a session's files go when it ends", ErrFull, s.cfg.MaxFilesPerPrincipal)
		}
		return fmt.Errorf("%w: a %s file does not fit in the %s one caller may keep (--files-store-limit-per-principal), of which you use %s; a session's files go when it ends",
			ErrFull, humanize.IBytes(uint64(size)), humanize.IBytes(uint64(s.cfg.MaxBytesPerPrincipal)), humanize.IBytes(uint64(u.bytes-free.bytes)))
	}
	anyone := func(*file) bool { return true }
	if free := s.evictable(scope, anyone); !s.fits(size, free) {
		if s.count-free.files >= s.cfg.MaxFiles {
			return fmt.Errorf("%w: the server keeps its maximum of %d files (--max-files)", ErrFull, s.cfg.MaxFiles)
		}
		return fmt.Errorf("%w: a %s file does not fit in the %s cap (--files-store-limit), of which %s is in use",
			ErrFull, humanize.IBytes(uint64(size)), humanize.IBytes(uint64(s.cfg.MaxBytes)), humanize.IBytes(uint64(s.bytes-free.bytes)))
	}
	// Both can be met: the owner's files first, then anyone's.
	s.evict(scope, mine, func() bool { return s.ownerFits(owner, size, usage{}) }, size)
	s.evict(scope, anyone, func() bool { return s.fits(size, usage{}) }, size)
	return nil
}

// evictable is what removing the calls' files that match would free,
// scope's own excepted.
func (s *Store) evictable(scope Scope, match func(*file) bool) usage {
	var u usage
	for e := s.calls.Front(); e != nil; e = e.Next() {
		if f := e.Value.(*file); f.scope != scope && match(f) {
			u.bytes += f.Size
			u.files++
		}
	}
	return u
}

// evict removes the calls' files that match, oldest first and scope's own
// excepted, until done; there must be enough of them.
func (s *Store) evict(scope Scope, match func(*file) bool, done func() bool, size int64) {
	evicted := 0
	for e := s.calls.Front(); e != nil && !done(); {
		f := e.Value.(*file)
		e = e.Next()
		if f.scope != scope && match(f) {
			s.remove(f)
			evicted++
		}
	}
	if evicted > 0 {
		s.log.Debug("evicted calls' files to make room", zap.Int("files", evicted), zap.Int64("size", size))
	}
}

// used is what owner keeps.
func (s *Store) used(owner identity.Principal) usage {
	if u := s.owners[owner]; u != nil {
		return *u
	}
	return usage{}
}

// fits reports whether a file of size fits in the store's caps once files
// of free are gone.
func (s *Store) fits(size int64, free usage) bool {
	return s.bytes-free.bytes+size <= s.cfg.MaxBytes && s.count-free.files < s.cfg.MaxFiles
}

// ownerFits reports whether a file of size fits in owner's caps once files
// of free are gone.
func (s *Store) ownerFits(owner identity.Principal, size int64, free usage) bool {
	if owner == "" {
		return true
	}
	u := s.used(owner)
	return (s.cfg.MaxBytesPerPrincipal <= 0 || u.bytes-free.bytes+size <= s.cfg.MaxBytesPerPrincipal) &&
		(s.cfg.MaxFilesPerPrincipal <= 0 || u.files-free.files < s.cfg.MaxFilesPerPrincipal)
}

// expire removes the calls' files that have expired.
func (s *Store) expire(now time.Time) {
	for e := s.calls.Front(); e != nil; {
		f := e.Value.(*file)
		e = e.Next()
		if f.expired(now) {
			s.remove(f)
		}
	}
}

// add indexes f, written to disk, as owner's.
func (s *Store) add(owner identity.Principal, f *file, now time.Time) {
	sf := s.scopes[f.scope]
	if sf == nil {
		sf = &scopeFiles{owner: owner, files: map[string]*file{}}
		s.scopes[f.scope] = sf
	}
	sf.files[f.Path] = f
	sf.bytes += f.Size
	s.bytes += f.Size
	s.count++
	u := s.owners[sf.owner]
	if u == nil {
		u = &usage{}
		s.owners[sf.owner] = u
	}
	u.bytes += f.Size
	u.files++
	if f.scope.call {
		f.expires = now.Add(s.cfg.TTL)
		f.elem = s.calls.PushBack(f)
		s.callBytes += f.Size
	}
}

// remove forgets f and removes it from disk.
func (s *Store) remove(f *file) {
	sf := s.scopes[f.scope]
	delete(sf.files, f.Path)
	if len(sf.files) == 0 {
		delete(s.scopes, f.scope)
	}
	sf.bytes -= f.Size
	s.bytes -= f.Size
	s.count--
	if u := s.owners[sf.owner]; u != nil {
		u.bytes -= f.Size
		if u.files--; u.files <= 0 {
			delete(s.owners, sf.owner)
		}
	}
	if f.elem != nil {
		s.calls.Remove(f.elem)
		s.callBytes -= f.Size
	}
	// One that stays on disk is removed by Close, or by the next Open.
	if err := os.Remove(filepath.Join(s.cfg.Dir, f.disk)); err != nil {
		s.log.Warn("cannot remove a kept file", zap.String("uri", f.URI), zap.Error(err))
	}
}

// removeAll removes every file in Dir that a store could have written.
func (s *Store) removeAll() error {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && isRandomName(e.Name()) {
			errs = append(errs, os.Remove(filepath.Join(s.cfg.Dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// writeNew writes data to a new file at name. A reader finds the file only
// through the index, which learns of it once it is whole, so it needs no
// rename to appear at once; nor a sync, as it does not outlive the process.
func writeNew(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
	}
	return err
}
