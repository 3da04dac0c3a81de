package packages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/natefinch/atomic"
	"golang.org/x/sync/errgroup"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
)

// Cache is a content-addressed store of package files under a directory:
//
//	<dir>/wheels/sha256/<hex>/<file name>   files, checked against <hex>
//	<dir>/index/<key>/<project>.json        index pages, for offline use
//
// Files are written to a temporary file in their final directory, checked,
// and renamed into place, so a reader never sees a partial file and two
// processes filling the same entry both end with the same, whole file.
// Within a process, concurrent fetches of one file share a single download
// (a singleflight keyed by the entry's path).
// Entries are kept across restarts; a file found in the cache is checked
// against its sha256 once per process before it is trusted.
//
// The cache directory's pruning (package cachedir) removes the entries used
// least recently: a fetch holds a file's entry (<hex>) while it checks or
// downloads it, and marks it used, and so does reading an index page.
//
// A Cache is safe for concurrent use.
type Cache struct {
	dir      string
	offline  bool
	client   *http.Client
	progress func(string)
	transfer func(filename string, bytes, size int64)
	parallel int
	shared   *cacheShared
}

// cacheShared is the state all copies made by WithProgress share.
type cacheShared struct {
	mu       sync.Mutex
	inflight map[string]*flight // downloads in progress, by final path
	verified map[string]bool    // final paths whose content was checked
}

// CacheOptions configures a [Cache].
type CacheOptions struct {
	// Offline makes the cache answer only from what it holds: a file or
	// index page that is not there is an error of kind KindOfflineMiss.
	Offline bool
	// HTTPClient is used for downloads; nil means a default client.
	HTTPClient *http.Client
	// Progress receives progress lines; nil discards them.
	Progress func(msg string)
	// Parallel bounds concurrent downloads of one Fetch; 0 means 4.
	Parallel int
}

// LocalFile is a file of a [Plan] present in the cache.
type LocalFile struct {
	PlanFile
	// Path is the absolute path of the checked file in the cache.
	Path string `json:"path"`
}

// NewCache opens (creating if needed) the cache under dir.
func NewCache(dir string, opts CacheOptions) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(abs, "wheels", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	c := &Cache{
		dir:      abs,
		offline:  opts.Offline,
		client:   opts.HTTPClient,
		progress: opts.Progress,
		parallel: opts.Parallel,
		shared:   &cacheShared{inflight: map[string]*flight{}, verified: map[string]bool{}},
	}
	if c.client == nil {
		c.client = newHTTPClient()
	}
	if c.parallel <= 0 {
		c.parallel = 4
	}
	return c, nil
}

// WithProgress returns a Cache that shares this one's files, downloads in
// flight and checks, but sends progress lines to fn (nil discards them):
// one per call, so each call's lines reach that call's client.
func (c *Cache) WithProgress(fn func(msg string)) *Cache {
	cp := *c
	cp.progress = fn
	return &cp
}

// WithTransfer returns a Cache like c that tells fn how a download goes:
// its file, the bytes come so far, and its size (0 when unknown), at its
// start and as each chunk comes. nil tells nobody. A file found in the
// cache, or downloaded by another call at the same time, tells nothing.
func (c *Cache) WithTransfer(fn func(filename string, bytes, size int64)) *Cache {
	cp := *c
	cp.transfer = fn
	return &cp
}

// Dir returns the cache's absolute directory.
func (c *Cache) Dir() string { return c.dir }

// Offline reports whether the cache is in offline mode.
func (c *Cache) Offline() bool { return c.offline }

func (c *Cache) say(format string, args ...any) {
	if c.progress != nil {
		c.progress(fmt.Sprintf(format, args...))
	}
}

// Path returns where the file with this sha256 and name lives in the
// cache, whether or not it is there.
func (c *Cache) Path(sha256hex, filename string) string {
	return filepath.Join(c.dir, "wheels", "sha256", sha256hex, filename)
}

// Has reports whether f is in the cache with the right content.
func (c *Cache) Has(f PlanFile) bool {
	return sha256RE.MatchString(f.SHA256) && plainFilename(f.Filename) && c.present(c.Path(f.SHA256, f.Filename), f.SHA256)
}

// Fetch makes sure every file of the plan is in the cache, downloading
// (or copying from a local mirror) what is missing, and returns them in
// plan order. It stops at the first failure, which is an [*Error].
func (c *Cache) Fetch(ctx context.Context, plan Plan) ([]LocalFile, error) {
	out := make([]LocalFile, len(plan.Files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.parallel)
	for i, f := range plan.Files {
		g.Go(func() error {
			lf, err := c.FetchFile(gctx, f)
			out[i] = lf
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// FetchFile makes sure one file is in the cache and returns it. Failures
// are [*Error]s: KindHashMismatch (nothing is kept), KindOfflineMiss,
// KindUnreachable, KindNotFound (the source has no such file).
func (c *Cache) FetchFile(ctx context.Context, f PlanFile) (LocalFile, error) {
	if err := ctx.Err(); err != nil {
		return LocalFile{}, err
	}
	req := f.Name + "==" + f.Version
	if !sha256RE.MatchString(f.SHA256) {
		return LocalFile{}, newError(req, KindInvalid, nil, "%s has no valid sha256 to check it against", f.Filename)
	}
	if !plainFilename(f.Filename) {
		return LocalFile{}, newError(req, KindInvalid, nil, "bad file name %q", f.Filename)
	}
	final := c.Path(f.SHA256, f.Filename)
	lf := LocalFile{PlanFile: f, Path: final}
	// No prune removes the entry while it is checked or downloaded; the
	// release marks it used, so that it stays while the caller reads it.
	// A cache where no lock can be made (read-only) is used unheld.
	if h, err := cachedir.HoldEntry(ctx, filepath.Dir(final)); err == nil {
		defer h.Release()
	} else if ctx.Err() != nil {
		return LocalFile{}, ctx.Err()
	}
	if c.present(final, f.SHA256) {
		c.say("%s: in the cache", f.Filename)
		return lf, nil
	}
	if c.offline {
		return LocalFile{}, newError(req, KindOfflineMiss, nil,
			"offline mode, and %s is not in the package cache %s", f.Filename, c.dir)
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, f, final)
		if err == nil {
			return lf, nil
		}
		if ctx.Err() != nil {
			return LocalFile{}, ctx.Err()
		}
		// The download we joined belonged to a call that gave up: try
		// again ourselves.
		if attempt < 3 && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return LocalFile{}, fetchError(req, f, err)
	}
}

// flight is one download in progress; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// once downloads f into final unless a download of it is already in
// flight in this process, in which case it waits for that one (or for ctx).
//
// This is a singleflight, written out rather than taken from
// golang.org/x/sync/singleflight: its DoChan runs the work on a goroutine
// of its own, so a caller that gives up would return while its download is
// still writing into the cache, and its Do cannot be abandoned by a caller
// whose context ends. Here the first caller downloads on its own goroutine
// (so when it returns, its temporary file is gone) and the others may stop
// waiting at any time.
func (c *Cache) once(ctx context.Context, f PlanFile, final string) error {
	sh := c.shared
	sh.mu.Lock()
	if fl, ok := sh.inflight[final]; ok {
		sh.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fl.done:
			return fl.err
		}
	}
	fl := &flight{done: make(chan struct{})}
	sh.inflight[final] = fl
	sh.mu.Unlock()

	fl.err = c.download(ctx, f, final)

	sh.mu.Lock()
	delete(sh.inflight, final)
	sh.mu.Unlock()
	close(fl.done)
	return fl.err
}

// fetchError turns a download failure into an *Error.
func fetchError(req string, f PlanFile, err error) error {
	var he *hashError
	var ue *UnreachableError
	switch {
	case errors.As(err, &he):
		return newError(req, KindHashMismatch, nil,
			"%s has sha256 %s, but the %s says %s; the file was discarded",
			f.Filename, he.got, f.Origin.describe(), he.want)
	case errors.As(err, &ue):
		return unreachable(req, f.Origin, err, "cannot download %s", f.Filename)
	case errors.Is(err, errNotFound):
		return newError(req, KindNotFound, nil, "%s is missing at %s", f.Filename, f.Source)
	case errors.As(err, new(*sizeError)):
		return newError(req, KindHashMismatch, nil, "%s: %v; the file was discarded", f.Filename, err)
	}
	return fmt.Errorf("package cache: %s: %w", f.Filename, err)
}

// present reports whether final exists with the right content, checking
// the content once per process. A damaged entry is removed.
func (c *Cache) present(final, want string) bool {
	c.shared.mu.Lock()
	ok := c.shared.verified[final]
	c.shared.mu.Unlock()
	if ok {
		if _, err := os.Stat(final); err == nil {
			return true
		}
	}
	got, err := hashFile(final)
	if err != nil {
		return false
	}
	if got != want {
		os.Remove(final)
		return false
	}
	c.shared.mu.Lock()
	c.shared.verified[final] = true
	c.shared.mu.Unlock()
	return true
}

// download fetches f.Source into final, checked against f.SHA256.
func (c *Cache) download(ctx context.Context, f PlanFile, final string) (err error) {
	if c.present(final, f.SHA256) {
		return nil // another goroutine or process got there first
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(dir) // only if empty: nothing is kept of a failure
		}
	}()
	rc, _, length, err := open(ctx, c.client, f.Source, "")
	if err != nil {
		return err
	}
	defer rc.Close()
	size := f.Size
	if size <= 0 && length > 0 {
		size = length
	}
	if size > 0 {
		c.say("downloading %s (%s)", f.Filename, humanize.Bytes(uint64(size)))
	} else {
		c.say("downloading %s", f.Filename)
	}
	tmp, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return err
	}
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	var dst io.Writer = io.MultiWriter(tmp, h)
	if c.transfer != nil {
		c.transfer(f.Filename, 0, size)
		dst = &transferWriter{w: dst, name: f.Filename, size: size, fn: c.transfer}
	}
	n, err := io.Copy(dst, io.LimitReader(rc, maxWheelSize+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isRemote(f.Source) {
			return &UnreachableError{URL: f.Source, Err: err}
		}
		return err
	}
	if err := checkSize(n, f.Size); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return &hashError{file: f.Filename, want: f.SHA256, got: got}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return err
	}
	renamed = true
	c.shared.mu.Lock()
	c.shared.verified[final] = true
	c.shared.mu.Unlock()
	return nil
}

// transferWriter tells fn how many bytes went through it.
type transferWriter struct {
	w    io.Writer
	name string
	n    int64
	size int64
	fn   func(filename string, bytes, size int64)
}

// Write implements io.Writer.
func (t *transferWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	t.fn(t.name, t.n, t.size)
	return n, err
}

// hashError is a content that does not match its promised sha256.
type hashError struct {
	file, want, got string
}

// Error says which file and both hashes.
func (e *hashError) Error() string {
	return fmt.Sprintf("%s: sha256 is %s, expected %s", e.file, e.got, e.want)
}

// sizeError is a download of the wrong size.
type sizeError struct {
	got, want int64
}

// Error says what size was expected.
func (e *sizeError) Error() string {
	if e.want <= 0 {
		return fmt.Sprintf("larger than the limit of %d bytes", int64(maxWheelSize))
	}
	return fmt.Sprintf("got %d bytes, the index says %d", e.got, e.want)
}

func checkSize(n, want int64) error {
	if n > maxWheelSize || (want > 0 && n != want) {
		return &sizeError{got: n, want: want}
	}
	return nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fetchVerified reads a whole file into memory and checks its size and
// sha256 (which must be given).
func fetchVerified(ctx context.Context, client *http.Client, src, want string, size, limit int64) ([]byte, error) {
	if !sha256RE.MatchString(want) {
		return nil, fmt.Errorf("%s: no sha256 to check it against", src)
	}
	data, _, err := readAll(ctx, client, src, "", limit)
	if err != nil {
		return nil, err
	}
	if err := checkSize(int64(len(data)), size); err != nil {
		return nil, err
	}
	if got := sha256Hex(data); got != want {
		return nil, &hashError{file: filepath.Base(src), want: want, got: got}
	}
	return data, nil
}

// projectPath is where the page of project name from index is kept.
func (c *Cache) projectPath(index, name string) string {
	return filepath.Join(c.dir, "index", sha256Hex([]byte(index))[:16], Normalize(name)+".json")
}

// saveProject keeps an index page for offline use.
func (c *Cache) saveProject(index string, p *Project) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	path := c.projectPath(index, p.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomic.WriteFile(path, bytes.NewReader(data))
}

// loadProject reads a kept index page; a missing one wraps errNotFound.
func (c *Cache) loadProject(index, name string) (*Project, error) {
	return c.readProject(c.projectPath(index, name))
}

// loadAnyProject reads the page of project name kept from any index, the
// one used last when there are several: offline, what an earlier index
// gave is what the cache holds. A missing one wraps errNotFound.
func (c *Cache) loadAnyProject(name string) (*Project, error) {
	paths, _ := filepath.Glob(filepath.Join(c.dir, "index", "*", Normalize(name)+".json"))
	var last string
	var lastUse time.Time
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && (last == "" || fi.ModTime().After(lastUse)) {
			last, lastUse = p, fi.ModTime()
		}
	}
	if last == "" {
		return nil, errNotFound
	}
	return c.readProject(last)
}

// readProject reads the kept index page at path and marks it used.
func (c *Cache) readProject(path string) (*Project, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	var p Project
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&p); err != nil {
		return nil, fmt.Errorf("package cache: %s: %w", path, err)
	}
	_ = cachedir.Touch(path) // a prune keeps what is used
	return &p, nil
}
