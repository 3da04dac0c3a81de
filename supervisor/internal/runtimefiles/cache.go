package runtimefiles

// The cache limit (Config.CacheLimit). A supervisor holds the cache entries
// its runtime uses (its worker program, its Pyodide install, its snapshot
// pair) for as long as it runs, so that no server sharing the cache
// directory removes them, and marks them used at every prune. With a limit,
// it prunes the directory (package cachedir) once its runtime is ready, then
// every pruneEvery, and when asked (PruneSoon, after a new snapshot).
// Other code holds the entries it makes or uses with Cache.Hold.

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

const (
	// pruneEvery is how often a supervisor prunes its cache directory.
	pruneEvery = 10 * time.Minute
	// followEvery is how often it checks whether repair replaced its
	// runtime, to hold the new one's entries instead.
	followEvery = time.Minute
)

// Cache is what a supervisor holds in its cache directory, and its
// pruning: see NewCache.
type Cache struct {
	ctx     context.Context // the supervisor's: holds end, and upkeep stops, when it closes
	wg      *tracker.Tracker
	log     *zap.Logger
	dir     string        // the cache directory
	limit   int64         // Config.CacheLimit; 0 for none
	current func() *Files // the runtime now, which the upkeep follows

	follow   sync.Mutex // serializes HoldRuntime
	mu       sync.Mutex
	holds    map[*cachedir.Hold]struct{} // every live hold
	runtime  []func()                    // release the holds of heldRT's entries
	heldRT   *Files
	started  bool          // keep runs
	kick     chan struct{} // asks keep to prune; made on first use
	released bool          // the supervisor closed: no more holds
}

// NewCache returns the holds of a supervisor on its cache directory dir,
// pruned to limit bytes (0: never pruned), whose runtime is current's.
// The upkeep runs on a goroutine of wg until ctx ends.
func NewCache(ctx context.Context, wg *tracker.Tracker, log *zap.Logger, dir string, limit int64, current func() *Files) *Cache {
	return &Cache{ctx: ctx, wg: wg, log: log, dir: dir, limit: limit, current: current}
}

// Hold holds the cache entry that path is in (a snapshot's .bin
// or code cache, a worker program's directory or a file in it, ...: see
// package cachedir), which need not exist yet, until release is called or
// the supervisor closes: no prune of any server removes it meanwhile. Hold
// an entry before making it or using it; if it is missing once held, make
// it. A path in no entry gives an error wrapping cachedir.ErrNotEntry.
func (c *Cache) Hold(path string) (release func(), err error) {
	d, err := cachedir.Open(c.dir)
	if err != nil {
		return nil, err
	}
	h, err := d.Hold(c.ctx, path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		_ = h.Release()
		return nil, tracker.ErrClosed
	}
	if c.holds == nil {
		c.holds = map[*cachedir.Hold]struct{}{}
	}
	c.holds[h] = struct{}{}
	c.mu.Unlock()
	return sync.OnceFunc(func() {
		c.mu.Lock()
		delete(c.holds, h)
		c.mu.Unlock()
		if err := h.Release(); err != nil {
			c.log.Warn("cannot release a cache entry", zap.Error(err))
		}
	}), nil
}

// Release releases every hold once the supervisor has closed: Close
// calls it after its goroutines end, and returns only when it has. Holds
// asked for later fail.
func (c *Cache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	for h := range c.holds {
		_ = h.Release()
	}
	c.holds, c.runtime = nil, nil
}

// HoldRuntime holds the cache entries that rt uses, in place of those of
// the runtime it replaces, and starts the cache's upkeep (keep) once.
// A failure to hold is logged: the runtime works, but another server's
// prune could remove what it uses, which repair then rebuilds.
func (c *Cache) HoldRuntime(rt *Files) {
	c.follow.Lock()
	defer c.follow.Unlock()
	c.mu.Lock()
	same := c.heldRT == rt
	c.mu.Unlock()
	if same || rt == nil {
		return
	}
	d, err := cachedir.Open(c.dir)
	if err != nil {
		c.log.Warn("cannot hold the runtime's cache entries", zap.Error(err))
		return
	}
	var releases []func()
	held := map[string]bool{}
	for _, p := range []string{rt.Entry, rt.Pyodide, rt.Snapshot, rt.CodeCache} {
		if p == "" {
			continue
		}
		e, err := d.Entry(p)
		if err != nil || held[e.Path] {
			continue // outside the cache's entries, or held already
		}
		held[e.Path] = true
		release, err := c.Hold(e.Path)
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("cannot hold a cache entry: another server's prune may remove it", zap.String("path", e.Path), zap.Error(err))
			}
			continue
		}
		releases = append(releases, release)
	}
	c.mu.Lock()
	old := c.runtime
	c.runtime, c.heldRT = releases, rt
	start := !c.started && c.ctx.Err() == nil
	c.started = c.started || start
	c.mu.Unlock()
	// After the new holds: an entry in both stays held throughout.
	for _, release := range old {
		release()
	}
	if start {
		c.wg.Go(c.keep)
	} else {
		c.PruneSoon() // a new runtime may have made a new snapshot
	}
}

// keep is the cache's upkeep until the supervisor closes: it prunes
// at once (the runtime was just prepared, perhaps with a new snapshot), then
// every pruneEvery and when asked, and follows the runtime that repair puts
// in place.
func (c *Cache) keep() {
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	follow := time.NewTicker(followEvery)
	defer follow.Stop()
	kick := c.kicks()
	c.prune()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-follow.C:
			c.HoldRuntime(c.current())
		case <-prune.C:
			c.prune()
		case <-kick:
			c.prune()
		}
	}
}

// kicks returns the channel that asks keep for a prune.
func (c *Cache) kicks() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kick == nil {
		c.kick = make(chan struct{}, 1)
	}
	return c.kick
}

// PruneSoon asks for a prune of the cache directory without waiting
// for it: call it after making an entry (a snapshot pair) that may take the
// cache past its limit.
func (c *Cache) PruneSoon() {
	select {
	case c.kicks() <- struct{}{}:
	default: // one is asked for already
	}
}

// prune marks what the supervisor holds used now and, with a cache
// limit, prunes the cache directory, logging what it removed.
func (c *Cache) prune() {
	c.mu.Lock()
	holds := slices.Collect(maps.Keys(c.holds))
	c.mu.Unlock()
	keep := CurrentEntries(c.dir)
	for _, h := range holds {
		_ = h.Touch()
		// Kept by name too: where flock is emulated with POSIX locks
		// (NFS), this process's own locks do not exclude its prunes.
		keep = append(keep, h.Path())
	}
	if c.limit <= 0 {
		return
	}
	d, err := cachedir.Open(c.dir)
	if err != nil {
		c.log.Warn("cannot prune the cache directory", zap.Error(err))
		return
	}
	res, err := d.Prune(c.ctx, c.limit, cachedir.PruneOptions{
		KeepRecent: cachedir.DefaultKeepRecent,
		Keep:       keep,
	})
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("cannot prune the cache directory", zap.Error(err))
		}
		return
	}
	limit := humanize.IBytes(uint64(c.limit))
	if len(res.Removed) > 0 {
		c.log.Info("pruned the cache directory: removed the least recently used entries",
			zap.Strings("removed", entryNames(res.Removed)), zap.String("freed", humanize.IBytes(uint64(res.Freed()))),
			zap.String("total", humanize.IBytes(uint64(res.Total))), zap.String("limit", limit))
	}
	if res.Total > c.limit {
		c.log.Info("the cache directory stays above its limit: the rest is in use, used recently, or cannot be removed",
			zap.String("total", humanize.IBytes(uint64(res.Total))), zap.String("limit", limit), zap.Int("spared", len(res.Spared)))
	}
	for _, sp := range res.Spared {
		if sp.Err != nil {
			c.log.Debug("cannot remove a cache entry", zap.String("entry", sp.Name), zap.Error(sp.Err))
		}
	}
}

// entryNames returns the names of entries.
func entryNames(entries []cachedir.Entry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names
}

// CurrentEntries returns the paths, in the cache directory cacheDir,
// of the entries that this build's runtime needs and that are known without
// running deno: its worker program and its Pyodide install. Prunes keep
// them (cachedir.PruneOptions.Keep), whether or not a server runs.
func CurrentEntries(cacheDir string) []string {
	d, err := cachedir.Open(cacheDir)
	if err != nil {
		return nil
	}
	l := Layout{d.Root()}
	paths := []string{l.Program()}
	if v, err := js.PyodideVersion(); err == nil {
		paths = append(paths, l.Install(v))
	}
	return paths
}
