package supervisor

// The cache limit (Config.CacheLimit). A supervisor holds the cache entries
// its runtime uses (its worker program, its Pyodide install, its snapshot
// pair) for as long as it runs, so that no server sharing the cache
// directory removes them, and marks them used at every prune. With a limit,
// it prunes the directory (package cachedir) once its runtime is ready, then
// every pruneEvery, and when asked (pruneCacheSoon, after a new snapshot).
// Other code holds the entries it makes or uses with holdCacheEntry.

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
)

const (
	// pruneEvery is how often a supervisor prunes its cache directory.
	pruneEvery = 10 * time.Minute
	// followEvery is how often it checks whether repair replaced its
	// runtime, to hold the new one's entries instead.
	followEvery = time.Minute
)

// cacheUse is what a supervisor holds in its cache directory. Its zero
// value is ready.
type cacheUse struct {
	follow   sync.Mutex // serializes holdRuntime
	mu       sync.Mutex
	holds    map[*cachedir.Hold]struct{} // every live hold
	runtime  []func()                    // release the holds of heldRT's entries
	heldRT   *runtimeFiles
	started  bool          // keepCache runs
	kick     chan struct{} // asks keepCache to prune; made on first use
	released bool          // the supervisor closed: no more holds
}

// holdCacheEntry holds the cache entry that path is in (a snapshot's .bin
// or code cache, a worker program's directory or a file in it, ...: see
// package cachedir), which need not exist yet, until release is called or
// the supervisor closes: no prune of any server removes it meanwhile. Hold
// an entry before making it or using it; if it is missing once held, make
// it. A path in no entry gives an error wrapping cachedir.ErrNotEntry.
func (s *Supervisor) holdCacheEntry(path string) (release func(), err error) {
	d, err := cachedir.Open(s.cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	h, err := d.Hold(s.ctx, path)
	if err != nil {
		return nil, err
	}
	c := &s.cache
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		_ = h.Release()
		return nil, errClosed
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
			s.log.Warn("cannot release a cache entry", zap.Error(err))
		}
	}), nil
}

// releaseCache releases every hold once the supervisor has closed: Close
// calls it after its goroutines end, and returns only when it has. Holds
// asked for later fail.
func (s *Supervisor) releaseCache() {
	c := &s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	for h := range c.holds {
		_ = h.Release()
	}
	c.holds, c.runtime = nil, nil
}

// holdRuntime holds the cache entries that rt uses, in place of those of
// the runtime it replaces, and starts the cache's upkeep (keepCache) once.
// A failure to hold is logged: the runtime works, but another server's
// prune could remove what it uses, which repair then rebuilds.
func (s *Supervisor) holdRuntime(rt *runtimeFiles) {
	c := &s.cache
	c.follow.Lock()
	defer c.follow.Unlock()
	c.mu.Lock()
	same := c.heldRT == rt
	c.mu.Unlock()
	if same || rt == nil {
		return
	}
	d, err := cachedir.Open(s.cfg.CacheDir)
	if err != nil {
		s.log.Warn("cannot hold the runtime's cache entries", zap.Error(err))
		return
	}
	var releases []func()
	held := map[string]bool{}
	for _, p := range []string{rt.entry, rt.pyodide, rt.snapshot, rt.codeCache} {
		if p == "" {
			continue
		}
		e, err := d.Entry(p)
		if err != nil || held[e.Path] {
			continue // outside the cache's entries, or held already
		}
		held[e.Path] = true
		release, err := s.holdCacheEntry(e.Path)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("cannot hold a cache entry: another server's prune may remove it", zap.String("path", e.Path), zap.Error(err))
			}
			continue
		}
		releases = append(releases, release)
	}
	c.mu.Lock()
	old := c.runtime
	c.runtime, c.heldRT = releases, rt
	start := !c.started && s.ctx.Err() == nil
	c.started = c.started || start
	c.mu.Unlock()
	// After the new holds: an entry in both stays held throughout.
	for _, release := range old {
		release()
	}
	if start {
		s.wg.Go(s.keepCache)
	} else {
		s.pruneCacheSoon() // a new runtime may have made a new snapshot
	}
}

// keepCache is the cache's upkeep until the supervisor closes: it prunes
// at once (the runtime was just prepared, perhaps with a new snapshot), then
// every pruneEvery and when asked, and follows the runtime that repair puts
// in place.
func (s *Supervisor) keepCache() {
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	follow := time.NewTicker(followEvery)
	defer follow.Stop()
	kick := s.cacheKick()
	s.pruneCache()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-follow.C:
			s.holdRuntime(s.runtime.files())
		case <-prune.C:
			s.pruneCache()
		case <-kick:
			s.pruneCache()
		}
	}
}

// cacheKick returns the channel that asks keepCache for a prune.
func (s *Supervisor) cacheKick() chan struct{} {
	c := &s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kick == nil {
		c.kick = make(chan struct{}, 1)
	}
	return c.kick
}

// pruneCacheSoon asks for a prune of the cache directory without waiting
// for it: call it after making an entry (a snapshot pair) that may take the
// cache past its limit.
func (s *Supervisor) pruneCacheSoon() {
	select {
	case s.cacheKick() <- struct{}{}:
	default: // one is asked for already
	}
}

// pruneCache marks what the supervisor holds used now and, with a cache
// limit, prunes the cache directory, logging what it removed.
func (s *Supervisor) pruneCache() {
	c := &s.cache
	c.mu.Lock()
	holds := slices.Collect(maps.Keys(c.holds))
	c.mu.Unlock()
	keep := CurrentCacheEntries(s.cfg.CacheDir)
	for _, h := range holds {
		_ = h.Touch()
		// Kept by name too: where flock is emulated with POSIX locks
		// (NFS), this process's own locks do not exclude its prunes.
		keep = append(keep, h.Path())
	}
	if s.cfg.CacheLimit <= 0 {
		return
	}
	d, err := cachedir.Open(s.cfg.CacheDir)
	if err != nil {
		s.log.Warn("cannot prune the cache directory", zap.Error(err))
		return
	}
	res, err := d.Prune(s.ctx, s.cfg.CacheLimit, cachedir.PruneOptions{
		KeepRecent: cachedir.DefaultKeepRecent,
		Keep:       keep,
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("cannot prune the cache directory", zap.Error(err))
		}
		return
	}
	limit := humanize.IBytes(uint64(s.cfg.CacheLimit))
	if len(res.Removed) > 0 {
		s.log.Info("pruned the cache directory: removed the least recently used entries",
			zap.Strings("removed", entryNames(res.Removed)), zap.String("freed", humanize.IBytes(uint64(res.Freed()))),
			zap.String("total", humanize.IBytes(uint64(res.Total))), zap.String("limit", limit))
	}
	if res.Total > s.cfg.CacheLimit {
		s.log.Info("the cache directory stays above its limit: the rest is in use, used recently, or cannot be removed",
			zap.String("total", humanize.IBytes(uint64(res.Total))), zap.String("limit", limit), zap.Int("spared", len(res.Spared)))
	}
	for _, sp := range res.Spared {
		if sp.Err != nil {
			s.log.Debug("cannot remove a cache entry", zap.String("entry", sp.Name), zap.Error(sp.Err))
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

// CurrentCacheEntries returns the paths, in the cache directory cacheDir,
// of the entries that this build's runtime needs and that are known without
// running deno: its worker program and its Pyodide install. Prunes keep
// them (cachedir.PruneOptions.Keep), whether or not a server runs.
func CurrentCacheEntries(cacheDir string) []string {
	d, err := cachedir.Open(cacheDir)
	if err != nil {
		return nil
	}
	l := layout{d.Root()}
	paths := []string{l.program()}
	if v, err := js.PyodideVersion(); err == nil {
		paths = append(paths, l.install(v))
	}
	return paths
}
