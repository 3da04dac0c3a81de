package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// Snapshots learned from use: when calls keep naming the same packages in
// their PEP 723 block, the supervisor makes a memory snapshot with those
// packages loaded, in the background, after the set's second use, and
// keeps one warm worker restored from it while the set stays in use. A
// later call with that set gets that worker: a fresh interpreter, but
// with the packages' import already done (and before any user code ran).
const (
	learnAfter = 2                // uses of a set before its snapshot is made
	maxLearned = 4                // learned sets kept, least recently used evicted
	hotFor     = 10 * time.Minute // a set unused this long gets no warm worker
	maxSets    = 256              // sets counted
)

// learner counts the package sets of calls and keeps the runtimes of the
// learned ones.
type learner struct {
	mu      sync.Mutex
	uses    *expirable.LRU[string, int]
	learned map[string]*learnedSet
	making  bool // a snapshot is being made: one at a time
}

// learnedSet is a set with its snapshot made.
type learnedSet struct {
	rt      *runtimeFiles
	lastUse time.Time
	release func() // of its holds on the cache's entries
}

func newLearner() *learner {
	return &learner{uses: expirable.NewLRU[string, int](maxSets, nil, hotFor), learned: map[string]*learnedSet{}}
}

// setKey names the set of package files wheels on top of rt. Their paths
// in the content-addressed cache name their contents.
func setKey(rt *runtimeFiles, wheels []bridge.Wheel) string {
	h := sha256.New()
	h.Write([]byte(rt.key))
	if rt.deps != nil {
		h.Write([]byte(rt.snapshot))
	}
	names := make([]string, len(wheels))
	for i, w := range wheels {
		names[i] = w.Path
	}
	slices.Sort(names)
	for _, n := range names {
		h.Write([]byte("\x00" + n))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// hot returns the learned sets used recently, most recent first: the pool
// keeps a warm worker of each (as many as it can).
func (l *learner) hot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k, ls := range l.learned {
		if time.Since(ls.lastUse) < hotFor {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return l.learned[b].lastUse.Compare(l.learned[a].lastUse) })
	return keys
}

// runtime returns the runtime of learned set key, or nil.
func (l *learner) runtime(key string) *runtimeFiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		return ls.rt
	}
	return nil
}

// forget drops learned set key, whose files are gone or damaged: its calls
// get plain workers, and its next use makes its snapshot again.
func (l *learner) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		ls.release()
		delete(l.learned, key)
	}
}

// use counts a call's set of packages (the files wheels, installed on top
// of rt) and returns the kind of worker to ask the pool for: the set's key
// once its snapshot is made, else "". At the set's learnAfter-th use it
// starts making the snapshot.
func (s *Supervisor) learnUse(rt *runtimeFiles, wheels []bridge.Wheel) string {
	if len(wheels) == 0 || rt.key == "" {
		return ""
	}
	l := s.learn
	key := setKey(rt, wheels)
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		ls.lastUse = time.Now()
		return key
	}
	n, _ := l.uses.Get(key)
	l.uses.Add(key, n+1)
	if n+1 >= learnAfter && !l.making {
		l.making = true
		s.wg.Go(func() { s.learnSet(rt, key, slices.Clone(wheels)) })
	}
	return ""
}

// learnSet makes the snapshot of a set and keeps its runtime, evicting the
// least recently used learned set past maxLearned.
func (s *Supervisor) learnSet(rt *runtimeFiles, key string, wheels []bridge.Wheel) {
	l := s.learn
	var holds []func()
	release := func() {
		for _, h := range holds {
			h()
		}
	}
	learned := false
	defer func() {
		if !learned {
			release()
		}
		l.mu.Lock()
		l.making = false
		l.mu.Unlock()
	}()
	hold := func(path string) bool {
		h, err := s.holdCacheEntry(path)
		if err != nil {
			s.log.Debug("no learned snapshot", zap.String("set", key), zap.Error(err))
			return false
		}
		holds = append(holds, h)
		return true
	}
	set := &depsSet{files: map[string]bool{}}
	modules := map[string]bool{}
	if rt.deps != nil {
		set.wheels = slices.Clone(rt.deps.wheels)
		maps.Copy(set.files, rt.deps.files)
		for _, m := range rt.deps.modules {
			modules[m] = true
		}
	}
	for _, w := range wheels {
		if !hold(w.Path) {
			return
		}
		set.wheels = append(set.wheels, w)
		set.files[w.Name] = true
	}
	if err := importable(wheels, modules); err != nil {
		s.log.Debug("no learned snapshot", zap.String("set", key), zap.Error(err))
		return
	}
	set.modules = slices.Sorted(maps.Keys(modules))
	if !hold(layout{rt.root}.snapshot(key)) {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.WithDefaults().StartTimeout)
	defer cancel()
	with, err := s.runtimeWith(ctx, rt, key, set, func(step string) { s.log.Debug(step) })
	if err != nil {
		s.log.Warn("cannot make the snapshot of a package set that calls repeat", zap.Error(err))
		return
	}
	s.pruneCacheSoon()
	s.log.Info("learned a package set: calls with it start with it loaded", zap.String("set", key), zap.Strings("modules", set.modules))
	learned = true
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learned[key] = &learnedSet{rt: with, lastUse: time.Now(), release: release}
	if len(l.learned) > maxLearned {
		oldest := ""
		for k, ls := range l.learned {
			if oldest == "" || ls.lastUse.Before(l.learned[oldest].lastUse) {
				oldest = k
			}
		}
		l.learned[oldest].release()
		delete(l.learned, oldest)
	}
}
