package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	"github.com/mcp-run-python/mcp-run-python/supervisor/ttlcache"
)

// Snapshots learned from use: when calls keep naming the same packages in
// their PEP 723 block, or keep importing what makes the same set of
// packages, the supervisor makes a memory snapshot with those packages
// loaded, in the background, after the set's second use, and keeps one
// warm worker restored from it while the set stays in use. A later call
// with that set gets that worker: a fresh interpreter, but with the
// packages' import already done (and before any user code ran).
//
// A PEP 723 set is known before a worker is taken. A set inferred from
// imports is known only once a worker has answered which of the code's
// imports are missing, so it is guessed (see Learner.Guess) and the worker
// of the guessed set answers as a plain one would; if the rounds of
// installs ask for anything but exactly its set, the worker is retired
// and the call goes on with a plain one (see inference).
const (
	learnAfter = 2                // uses of a set before its snapshot is made
	maxLearned = 4                // learned sets kept, least recently used evicted
	hotFor     = 10 * time.Minute // a set unused this long gets no warm worker
	maxSets    = 256              // sets counted
)

// Background is what the install's work in the background (learning sets,
// compiling wheels) takes of the supervisor.
type Background struct {
	Ctx          context.Context  // the supervisor's: the work ends when it closes
	WG           *tracker.Tracker // the supervisor's: the work runs on its goroutines
	Log          *zap.Logger
	Cache        *runtimefiles.Cache // holds what the work makes, and prunes after it
	Maker        *runtimefiles.Maker // makes a learned set's snapshot; nil makes none, sets are only counted
	StartTimeout time.Duration       // bounds a learned set's snapshot
	MemoryLimit  int64               // a compile worker's, as every worker's; 0 for none
}

// Learner counts the package sets of calls and keeps the runtimes of the
// learned ones.
type Learner struct {
	Background
	mu      sync.Mutex
	uses    *ttlcache.Cache[string, int]
	learned map[string]*learnedSet
	// guesses are the sets that calls' imports made, each with the
	// top-level modules its first round found missing.
	guesses *ttlcache.Cache[string, guess]
	making  bool // a snapshot is being made: one at a time
}

// learnedSet is a set with its snapshot made.
type learnedSet struct {
	rt      *runtimefiles.Files
	lastUse time.Time
	release func() // of its holds on the cache's entries
	// modules are the top-level modules of each of the set's files (not
	// --deps'), by file name: what a worker of the set hides when asked
	// for a call's imports.
	modules map[string][]string
}

// guess is a set that calls' imports made: a call whose import statements
// name all of tops probably makes it again.
type guess struct {
	key  string
	tops []string
}

// Inference is what a call's rounds of installs from its imports
// ([Installer.FromImports]) found, and on a worker of a learned set what
// they may still claim.
type Inference struct {
	first  []string         // the names missing in the first round
	wheels []bridge.Payload // the files the rounds installed or claimed
	// unclaimed, on a worker of a learned set (nil on any other), are the
	// set's files that no round has asked for yet, with the top-level
	// modules each provides. Those modules are hidden from the imports
	// query, so that the rounds go as on a plain worker; a round that asks
	// for those files claims them rather than installing them again.
	unclaimed map[string][]string
}

// hidden returns the top-level modules of the files not claimed yet.
func (inf *Inference) hidden() []string {
	var mods []string
	for _, m := range inf.unclaimed {
		mods = append(mods, m...)
	}
	slices.Sort(mods)
	return slices.Compact(mods)
}

// claim takes wheels, which a round would install, from the files not
// claimed yet, and reports whether they all were.
func (inf *Inference) claim(wheels []bridge.Payload) bool {
	for _, w := range wheels {
		if _, ok := inf.unclaimed[w.Name]; !ok {
			return false
		}
	}
	for _, w := range wheels {
		delete(inf.unclaimed, w.Name)
	}
	return true
}

// NewLearner returns a Learner that makes its snapshots in bg.
func NewLearner(bg Background) *Learner {
	return &Learner{
		Background: bg,
		uses:       ttlcache.New[string, int](maxSets, hotFor),
		learned:    map[string]*learnedSet{},
		guesses:    ttlcache.New[string, guess](maxSets, hotFor),
	}
}

// Inference returns the start of the rounds of installs on a worker of
// learned set key, or nil when the set is no longer known (its worker
// cannot tell a plain answer).
func (l *Learner) Inference(key string) *Inference {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.learned[key]
	if ls == nil {
		return nil
	}
	inf := &Inference{unclaimed: map[string][]string{}}
	for name, mods := range ls.modules {
		inf.unclaimed[name] = mods
	}
	return inf
}

// Guess returns the learned set that code's imports probably make,
// or "": of the sets whose first round's missing modules code's import
// statements all name, the one with the most, then the one used last.
func (l *Learner) Guess(rt *runtimefiles.Files, code string) string {
	if rt.Key == "" {
		return ""
	}
	tops := packages.GuessImports(code)
	if len(tops) == 0 {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *learnedSet
	key, most := "", 0
	for _, g := range l.guesses.Values() {
		ls := l.learned[g.key]
		if ls == nil || len(g.tops) < most || !allIn(g.tops, tops) {
			continue
		}
		if len(g.tops) > most || best == nil || ls.lastUse.After(best.lastUse) {
			best, key, most = ls, g.key, len(g.tops)
		}
	}
	return key
}

func allIn(names []string, set map[string]bool) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}

// Inferred counts the set that a call's imports made (see Use),
// and remembers which missing modules made it, for Guess.
func (l *Learner) Inferred(rt *runtimefiles.Files, inf *Inference) {
	if len(inf.wheels) == 0 || rt.Key == "" {
		return
	}
	l.Use(rt, inf.wheels)
	var tops []string
	for _, name := range inf.first {
		top, _, _ := strings.Cut(name, ".")
		tops = append(tops, top)
	}
	slices.Sort(tops)
	tops = slices.Compact(tops)
	key := setKey(rt, inf.wheels)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.guesses.Add(key+"\x00"+strings.Join(tops, " "), guess{key: key, tops: tops})
}

// setKey names the set of package files wheels on top of rt. Their paths
// in the content-addressed cache name their contents.
func setKey(rt *runtimefiles.Files, wheels []bridge.Payload) string {
	h := sha256.New()
	h.Write([]byte(rt.Key))
	if rt.Deps != nil {
		h.Write([]byte(rt.Snapshot))
	}
	names := make([]string, len(wheels))
	for i, w := range wheels {
		names[i] = packages.SourcePath(w.Path) // the same before and after a compile
	}
	slices.Sort(names)
	for _, n := range names {
		h.Write([]byte("\x00" + n))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Teach makes key a learned set of rt without making its snapshot, as if
// calls with code that imports all of tops had made it: a worker of the
// set has modules, by file, hidden from its imports query. It is for the
// tests of the set's users, which have no deno to make a snapshot with.
func (l *Learner) Teach(key string, rt *runtimefiles.Files, modules map[string][]string, tops []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learned[key] = &learnedSet{rt: rt, lastUse: time.Now(), release: func() {}, modules: modules}
	l.guesses.Add(key, guess{key: key, tops: tops})
}

// Hot returns the learned sets used recently, most recent first: the pool
// keeps a warm worker of each (as many as it can).
func (l *Learner) Hot() []string {
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

// Runtime returns the Runtime of learned set key, or nil.
func (l *Learner) Runtime(key string) *runtimefiles.Files {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		return ls.rt
	}
	return nil
}

// Forget drops learned set key, whose files are gone or damaged: its calls
// get plain workers, and its next use makes its snapshot again.
func (l *Learner) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		ls.release()
		delete(l.learned, key)
	}
}

// Use counts a call's set of packages (the files wheels, installed on top
// of rt) and returns the kind of worker to ask the pool for: the set's key
// once its snapshot is made, else "". At the set's learnAfter-th use it
// starts making the snapshot.
func (l *Learner) Use(rt *runtimefiles.Files, wheels []bridge.Payload) string {
	if len(wheels) == 0 || rt.Key == "" {
		return ""
	}
	key := setKey(rt, wheels)
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.learned[key]; ls != nil {
		ls.lastUse = time.Now()
		return key
	}
	n, _ := l.uses.Get(key)
	l.uses.Add(key, n+1)
	if n+1 >= learnAfter && !l.making && l.Maker != nil {
		l.making = true
		l.WG.Go(func() { l.learnSet(rt, key, slices.Clone(wheels)) })
	}
	return ""
}

// learnSet makes the snapshot of a set and keeps its runtime, evicting the
// least recently used learned set past maxLearned.
func (l *Learner) learnSet(rt *runtimefiles.Files, key string, wheels []bridge.Payload) {
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
		h, err := l.Cache.Hold(path)
		if err != nil {
			l.Log.Debug("no learned snapshot", zap.String("set", key), zap.Error(err))
			return false
		}
		holds = append(holds, h)
		return true
	}
	set := &runtimefiles.Deps{Files: map[string]bool{}}
	modules := map[string]bool{}
	if rt.Deps != nil {
		set.Wheels = slices.Clone(rt.Deps.Wheels)
		maps.Copy(set.Files, rt.Deps.Files)
		for _, m := range rt.Deps.Modules {
			modules[m] = true
		}
	}
	own := map[string][]string{}
	for _, w := range wheels {
		if !hold(w.Path) {
			return
		}
		set.Wheels = append(set.Wheels, w)
		set.Files[w.Name] = true
		// Every module a file has, private ones too: a call may import them.
		mods, err := packages.WheelModules(w.Path)
		if err != nil && strings.HasSuffix(w.Name, ".whl") {
			l.Log.Debug("no learned snapshot", zap.String("set", key), zap.Error(err))
			return
		}
		own[w.Name] = slices.Sorted(maps.Keys(mods))
		if strings.HasSuffix(w.Name, ".whl") { // shared libraries offer none
			offered(mods, modules) // imported before the snapshot is taken
		}
	}
	set.Modules = slices.Sorted(maps.Keys(modules))
	if !hold(runtimefiles.Layout{Root: rt.Root}.Snapshot(key)) {
		return
	}
	ctx, cancel := context.WithTimeout(l.Ctx, l.StartTimeout)
	defer cancel()
	with, err := l.Maker.With(ctx, rt, key, set, func(step string) { l.Log.Debug(step) })
	switch {
	case err != nil && l.Ctx.Err() != nil:
		l.Log.Debug("the snapshot of a package set was stopped: the server is closing", zap.String("set", key))
		return
	case err != nil:
		l.Log.Warn("cannot make the snapshot of a package set that calls repeat", zap.Error(err))
		return
	}
	l.Cache.PruneSoon()
	l.Log.Info("learned a package set: calls with it start with it loaded", zap.String("set", key), zap.Strings("modules", set.Modules))
	learned = true
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learned[key] = &learnedSet{rt: with, lastUse: time.Now(), release: release, modules: own}
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
