// Package pool hands out warm workers to calls: it owns how many workers
// live, which are warm, who waits for one and in what order, when a
// worker is restored ahead of calls, recycled after one or killed, and the
// backoff of failed starts. Each of its workers is in one state of
// workerState's table, and counts, health and metrics are read from them.
//
// It knows a worker only as a Worker, and gets what it does with one from
// its Hooks: how one starts, is restored from standby, is recycled for the
// next call, and whether it is stale. It must not know what a worker runs
// (deno, Pyodide, the bridge), the supervisor that owns it, nor a call's
// progress: a waiting call hears its place in the queue through the
// callback it hands to Acquire.
package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/backoff"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// Errors of calls that could not get a worker; the supervisor gives them
// to its callers as its own.
var (
	ErrQueueFull    = errors.New("all workers are busy and the queue of waiting calls is full")
	ErrQueueTimeout = errors.New("no worker was free in time")
	// ErrUnavailable is what calls get, at once, while workers cannot start:
	// no worker is warm or starting and the last start failed. It wraps why.
	ErrUnavailable = errors.New("no Python worker can start")
	// ErrClosed is what calls get once the pool's context has ended or it
	// is closed: its supervisor closes.
	ErrClosed = tracker.ErrClosed
)

// Backoff of failed worker starts.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Config is how many workers the pool keeps, and how long calls wait.
type Config struct {
	Workers      int           // live worker limit
	Warm         int           // idle workers kept ready
	Queue        int           // calls that may wait for a worker
	QueueTimeout time.Duration // how long a call may wait; 0 means no limit
	PerPrincipal int           // workers one principal may hold; 0 means no limit
	// Busy is how long after a call all Warm workers are kept restored,
	// rather than half of them (see restoreAhead); 0 means defaultBusy.
	Busy time.Duration
}

// defaultBusy is Config.Busy's default: calls that come within it of each
// other find every warm worker restored, as they would without standby
// workers; a server idle that long holds half of them on standby.
const defaultBusy = 30 * time.Second

// Hooks are what the pool does with its workers, beyond asking them what
// Worker offers.
type Hooks[W Worker] struct {
	// Start boots a worker of kind ("" for a plain one); it ends with ctx.
	Start func(ctx context.Context, kind string) (W, error)
	// Restore makes a standby worker's interpreter in the background; the
	// worker's RestoreEnded is closed once it has. Nil when workers start
	// restored.
	Restore func(w W)
	// Recycle makes a worker whose call is over fit for the next call, in
	// the same process, or fails, and the worker is killed. Nil when each
	// worker serves one call: Retire then kills every worker.
	Recycle func(ctx context.Context, w W) error
	// Hot are the kinds of worker to keep one warm worker of each, most
	// wanted first; nil for none.
	Hot func() []string
	// Stale reports a worker whose network permissions are out of date: it
	// is not kept warm (see RetireStale). Nil when none can be.
	Stale func(w W) bool
}

// Health is a snapshot of the pool's state.
type Health struct {
	Warm     int // idle workers ready for a call, restored or on standby
	Busy     int // workers running a call
	Starting int // workers booting, or being restored from standby
	Waiting  int // calls waiting for a worker
	// Wait is how long a new call would wait for a worker, estimated from
	// the recent waits; 0 when one is warm.
	Wait time.Duration
	// Ready reports that the pool serves calls: a worker has started,
	// workers can start, and a new call would wait no longer than
	// Config.QueueTimeout.
	Ready bool
	// Err says why workers cannot be started, while none can.
	Err string
}

// Pool hands out warm workers. Each of its workers is a member in one
// state (see workerState): starting, warm (on standby, restoring or ready),
// busy (taken by a call), recycling or dying. Once begun, the pool starts
// workers while fewer than Warm are warm or starting, plus one per waiting
// call, never more than Workers alive at once.
//
// Calls that find no warm worker wait. The queue is bounded by how long a
// call would wait, not by how many wait: a call whose estimated wait is over
// QueueTimeout is refused at once, with the estimate. Calls name a
// principal (who they are for; "" for none): one principal holds at most
// PerPrincipal workers, and a free worker goes to the waiting principal
// served least recently, first come first served within a principal.
//
// A call's worker goes back with Retire: recycled for the next call when
// Hooks.Recycle is set (see Recycles), else killed and replaced.
type Pool[W Worker] struct {
	cfg     Config
	start   func(ctx context.Context, kind string) (W, error)
	restore func(w W)
	recycle func(ctx context.Context, w W) error
	hot     func() []string
	stale   func(w W) bool
	ctx     context.Context  // ends when the pool's owner closes
	wg      *tracker.Tracker // the owner's: every goroutine that starts or kills workers
	log     *zap.Logger
	// restarts counts workers replaced for failing: a failed start, a
	// worker dead while warm or one that did not answer (Discard).
	restarts prometheus.Counter
	wait     prometheus.Observer // how long calls waited for a worker, in seconds

	mu     sync.Mutex
	begun  bool // start may be called: the runtime exists
	closed bool
	// members are the pool's workers but the gone, the warm ones in the
	// order they became warm.
	members []*member[W]
	waiters []*waiter[W] // calls waiting for a worker, in arrival order
	// served is when each principal with calls last got a worker, in
	// grants counted by tick.
	served map[string]uint64
	tick   uint64
	// perPlace is the recent wait per place in the queue (an exponentially
	// weighted mean): a call with n calls before it waits about n+1 times it.
	perPlace time.Duration

	busyUntil time.Time   // until when every warm worker is kept restored
	trim      *time.Timer // puts the extra restored workers back on standby after busyUntil

	started bool // a worker has started: the pool serves
	// failed holds the failed starts of each kind of worker: one kind
	// that cannot start (a learned set's) holds back no other, and plain
	// calls are served as long as plain workers start.
	failed map[string]*startFailures
}

// New returns a pool of cfg that does with its workers what h says, and
// starts none until Begin. Its goroutines are wg's, and end with ctx;
// restarts counts workers replaced for failing, wait observes how long
// calls waited.
func New[W Worker](ctx context.Context, cfg Config, h Hooks[W], wg *tracker.Tracker, log *zap.Logger, restarts prometheus.Counter, wait prometheus.Observer) *Pool[W] {
	return &Pool[W]{cfg: cfg, start: h.Start, restore: h.Restore, recycle: h.Recycle, hot: h.Hot, stale: h.Stale,
		ctx: ctx, wg: wg, log: log, restarts: restarts, wait: wait}
}

// Recycles reports whether a retired worker's process serves the next call
// (Hooks.Recycle is set), rather than being killed.
func (p *Pool[W]) Recycles() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recycle != nil
}

// StopRecycling has every worker retired from now on killed, as without
// Hooks.Recycle: each worker process then serves one call, as where
// recycling is not safe. It is called while no worker is recycling, before
// calls: the supervisor's tests of what a worker process's start does use
// it.
func (p *Pool[W]) StopRecycling() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recycle = nil
}

// startFailures are the starts of one kind of worker that failed in a row.
type startFailures struct {
	n        int   // consecutive failed starts
	lastErr  error // of the last one
	retrying bool  // a backoff timer is pending; no starts of the kind until it fires
	backoff  backoff.Backoff
}

// retrying reports whether starts of kind wait for their backoff. p.mu
// must be held.
func (p *Pool[W]) retrying(kind string) bool {
	f := p.failed[kind]
	return f != nil && f.retrying
}

// grant is what a waiting call gets: a worker, or why none will come.
type grant[W Worker] struct {
	m   *member[W]
	err error
}

// waiter is a call waiting for a worker.
type waiter[W Worker] struct {
	ch        chan grant[W] // buffered: a grant never blocks the pool
	principal string
	kind      string // the kind of worker it prefers; it takes a plain one too
	ahead     int    // calls that waited before it when it came
	since     time.Time
	moved     chan struct{} // buffered: a call before it left the queue
}

// perPlaceWeight is the weight of the newest wait in perPlace.
const perPlaceWeight = 0.25

// unavailable says why no call can be served now: no worker is warm or
// starting and the last plain start failed, so waiting would only end in the
// queue timeout. Nil when calls may wait. p.mu must be held.
func (p *Pool[W]) unavailable() error {
	f := p.failed[""] // every call takes a plain worker
	if f == nil || slices.ContainsFunc(p.members, func(m *member[W]) bool { return m.state.coming() || m.state.warm() }) {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, f.lastErr)
}

// Begin lets the pool start workers: what they start from exists.
func (p *Pool[W]) Begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begun = true
	p.refill()
}

// Acquire returns a warm worker for a call of principal, waiting in the
// queue if all are busy (or principal holds its share); queued, unless
// nil, hears the call's place in the queue (1 for the first) as it
// changes. The worker is the caller's until it calls Retire, End or
// Discard.
//
// A call that names a kind gets a warm worker of that kind if there is
// one, else a plain one; a worker of another kind goes to no call of
// another kind (its interpreter has other packages loaded), but one idle
// while a call waits is retired, for a plain one to start in its place.
func (p *Pool[W]) Acquire(ctx context.Context, principal, kind string, queued func(place int)) (W, error) {
	var none W
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return none, ErrClosed
	}
	// Warm workers are handed to waiting calls as they come, so a warm
	// worker that fits now fits no waiting call.
	for p.mayHold(principal) {
		m := p.fitting(kind)
		if m == nil {
			break
		}
		if m.w.Dead() {
			// Died while idle, a moment before watchIdle would have seen it.
			p.lose(m)
			continue
		}
		p.take(m, principal)
		p.refill()
		p.mu.Unlock()
		p.wait.Observe(0)
		return m.w, nil
	}
	if err := p.unavailable(); err != nil {
		p.mu.Unlock()
		return none, err
	}
	if err := p.admit(); err != nil {
		p.mu.Unlock()
		return none, err
	}
	wt := &waiter[W]{ch: make(chan grant[W], 1), principal: principal, kind: kind, ahead: len(p.waiters), since: time.Now(), moved: make(chan struct{}, 1)}
	p.waiters = append(p.waiters, wt)
	p.evictIdle()
	p.refill()
	p.mu.Unlock()

	var timeout <-chan time.Time
	if p.cfg.QueueTimeout > 0 {
		t := time.NewTimer(p.cfg.QueueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	// The call's client hears its place in the queue as it changes.
	if queued == nil {
		queued = func(int) {}
	}
	place := wt.ahead + 1
	queued(place)
	var err error
	for err == nil {
		select {
		case <-wt.moved:
			if now := p.place(wt); now > 0 && now != place {
				place = now
				queued(place)
			}
		case g := <-wt.ch:
			p.wait.Observe(time.Since(wt.since).Seconds())
			if g.err != nil {
				return none, g.err
			}
			return g.m.w, nil
		case <-timeout:
			err = fmt.Errorf("%w: none became free within the queue timeout of %s", ErrQueueTimeout, p.cfg.QueueTimeout)
			if health := p.Health(); health.Err != "" {
				err = fmt.Errorf("%w: %s", ErrUnavailable, health.Err)
			}
		case <-ctx.Done():
			err = fmt.Errorf("waiting for a free worker: %w", context.Cause(ctx))
		case <-p.ctx.Done():
			err = ErrClosed
		}
	}
	p.wait.Observe(time.Since(wt.since).Seconds())

	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, wt); i >= 0 {
		p.unqueue(i)
		p.forget(principal)
		return none, err
	}
	// A worker was handed over as we gave up: it never ran code, so it
	// goes to the next caller.
	if g := <-wt.ch; g.m != nil {
		g.m.principal = ""
		p.offer(g.m)
		p.forget(principal)
	}
	return none, err
}

// unqueue takes the i-th waiter out of the queue and tells those after it
// that their place changed. p.mu must be held.
func (p *Pool[W]) unqueue(i int) {
	p.waiters = slices.Delete(p.waiters, i, i+1)
	for _, wt := range p.waiters[i:] {
		select {
		case wt.moved <- struct{}{}:
		default: // told already, and not yet looked
		}
	}
}

// place is wt's place in the queue, 1 for the first; 0 once it left.
func (p *Pool[W]) place(wt *waiter[W]) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Index(p.waiters, wt) + 1
}

// admit refuses a call that would wait too long: past Queue calls waiting,
// or with a wait estimated from recent ones over QueueTimeout. p.mu must be
// held.
func (p *Pool[W]) admit() error {
	n := len(p.waiters)
	if n >= p.cfg.Queue {
		return fmt.Errorf("%w: %d calls wait for %d workers", ErrQueueFull, n, p.cfg.Workers)
	}
	if p.cfg.QueueTimeout <= 0 || p.perPlace <= 0 {
		return nil
	}
	if wait := time.Duration(n+1) * p.perPlace; wait > p.cfg.QueueTimeout {
		return fmt.Errorf("%w: all %d workers are busy and %d calls wait before this one: it would wait about %s, longer than the queue timeout of %s",
			ErrQueueTimeout, p.cfg.Workers, n, wait.Round(100*time.Millisecond), p.cfg.QueueTimeout)
	}
	return nil
}

// soonest ranks warm states by how soon a worker in them takes a call.
func soonest(s workerState) int {
	switch s {
	case stateReady:
		return 0
	case stateRestoring:
		return 1
	}
	return 2
}

// fitting returns the warm worker for a call of kind: one of that kind,
// else the plain one soonest ready; nil when none fits. p.mu must be held.
func (p *Pool[W]) fitting(kind string) *member[W] {
	var plain *member[W]
	for _, m := range p.members {
		switch {
		case !m.state.warm():
		case kind != "" && m.kind == kind:
			return m
		case m.kind == "" && (plain == nil || soonest(m.state) < soonest(plain.state)):
			plain = m
		}
	}
	return plain
}

// evictIdle retires the warm workers of a kind that no waiting call wants,
// while a call waits for lack of a plain one: its slot serves the queue
// better with a plain worker. p.mu must be held.
func (p *Pool[W]) evictIdle() {
	for _, m := range p.members {
		if m.state.warm() && m.kind != "" && !slices.ContainsFunc(p.waiters, func(wt *waiter[W]) bool { return wt.kind == m.kind }) {
			p.reap(m)
		}
	}
}

// reap kills m's worker, which counts against Workers until it is gone,
// and then refills. p.mu must be held.
func (p *Pool[W]) reap(m *member[W]) {
	if !p.move(m, stateDying) {
		return
	}
	p.wg.Go(func() {
		m.w.Kill()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.move(m, stateGone)
		p.refill()
	})
}

// lose drops a warm worker found dead, killed to release its connection,
// and starts its replacement. p.mu must be held.
func (p *Pool[W]) lose(m *member[W]) {
	if !p.move(m, stateGone) {
		return
	}
	p.wg.Go(m.w.Kill)
	if !p.closed {
		p.restarts.Inc()
		p.refill()
	}
}

// mayHold reports whether principal may take one more worker. p.mu must be
// held.
func (p *Pool[W]) mayHold(principal string) bool {
	return p.cfg.PerPrincipal <= 0 || principal == "" || p.holding(principal) < p.cfg.PerPrincipal
}

// holding returns how many busy workers serve principal. p.mu must be held.
func (p *Pool[W]) holding(principal string) int {
	n := 0
	for _, m := range p.members {
		if m.state == stateBusy && m.principal == principal {
			n++
		}
	}
	return n
}

// take makes m busy for principal. p.mu must be held.
func (p *Pool[W]) take(m *member[W], principal string) {
	if !p.move(m, stateBusy) {
		return
	}
	if p.served == nil {
		p.served = map[string]uint64{}
	}
	m.principal = principal
	p.busyFor()
	p.tick++
	p.served[principal] = p.tick
}

// forget drops what the pool keeps of a principal that has no busy worker
// and no waiting call. p.mu must be held.
func (p *Pool[W]) forget(principal string) {
	if p.holding(principal) > 0 || slices.ContainsFunc(p.waiters, func(wt *waiter[W]) bool { return wt.principal == principal }) {
		return
	}
	delete(p.served, principal)
}

// Retire ends a worker's call: one call per interpreter. Its process is
// recycled for the next call where Hooks.Recycle is set, else killed.
func (p *Pool[W]) Retire(w W) { p.End(w, true) }

// End takes w back from its call, and recycles it (when recycle and the
// pool recycles: see Recycles) or kills it.
func (p *Pool[W]) End(w W, recycle bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.find(w)
	if m == nil || m.state != stateBusy {
		p.log.DPanic("retired a worker that is not busy in the pool", zap.Bool("member", m != nil))
		return
	}
	principal := m.principal
	m.principal = ""
	if recycle && p.recycle != nil && !p.closed && !p.crowdsOut(m) && p.move(m, stateRecycling) {
		p.wg.Go(func() { p.recycleOne(m) })
	} else {
		p.reap(m)
	}
	p.forget(principal)
	// Its principal may have calls waiting for their share.
	p.dispatch()
	// Not as the call took it: a restore then would compete with the call
	// for the processor.
	p.restoreAhead()
}

// Discard kills a worker taken for a call that turned out not to be fit
// for one (it did not answer): unlike Retire, it counts as a restart.
func (p *Pool[W]) Discard(w W, why error) {
	p.restarts.Inc()
	p.log.Warn("a warm worker did not answer; replacing it", zap.Int("pid", w.Pid()), zap.Error(why))
	p.End(w, false)
}

// recycleOne recycles the worker of recycling m and offers it, or kills it.
func (p *Pool[W]) recycleOne(m *member[W]) {
	err := p.recycle(p.ctx, m.w)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.log.Debug("a worker is retired rather than recycled", zap.Int("pid", m.w.Pid()), zap.Error(err))
		p.reap(m)
		return
	}
	p.offer(m)
}

// offer gives a ready worker, just started or handed back, to a waiting
// call (see dispatch), or keeps it warm. p.mu must be held.
func (p *Pool[W]) offer(m *member[W]) {
	if p.closed || p.stale != nil && p.stale(m.w) {
		p.reap(m) // started as this host's addresses changed, or too late
		return
	}
	if !p.move(m, warmState(m.w.Readiness())) {
		return
	}
	// Last of the warm ones: members keep the order they became warm in.
	if i := p.index(m); i >= 0 {
		p.members = append(slices.Delete(p.members, i, i+1), m)
	}
	if m.state == stateRestoring {
		p.wg.Go(func() { p.watchRestore(m) })
	}
	p.dispatch()
	p.restoreAhead()
}

// RetireStale replaces the warm workers that Hooks.Stale reports: made before
// this host's addresses changed, their --deny-net lacks the new ones. Busy
// workers keep theirs until their call ends, when they are retired anyway.
func (p *Pool[W]) RetireStale() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stale == nil {
		return
	}
	for _, m := range p.members {
		if m.state.warm() && p.stale(m.w) {
			p.reap(m)
		}
	}
}

// restoredWanted is how many plain warm workers restoreAhead keeps
// restored: all of them while calls come, half (rounded up) once the pool
// has been idle for Config.Busy. p.mu must be held.
func (p *Pool[W]) restoredWanted() int {
	if time.Now().Before(p.busyUntil) {
		return p.cfg.Warm
	}
	return p.cfg.Warm - p.cfg.Warm/2
}

// busyFor notes a call: every warm worker is wanted restored for
// Config.Busy, after which the extra ones are put back on standby.
// p.mu must be held.
func (p *Pool[W]) busyFor() {
	if p.restore == nil {
		return
	}
	busy := cmp.Or(p.cfg.Busy, defaultBusy)
	p.busyUntil = time.Now().Add(busy)
	if p.trim != nil {
		p.trim.Reset(busy)
		return
	}
	p.trim = time.AfterFunc(busy, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.trimRestored()
	})
}

// trimRestored retires the plain ready workers beyond restoredWanted:
// their replacements start on standby, and the memory of their
// interpreters goes back to the system. p.mu must be held.
func (p *Pool[W]) trimRestored() {
	if p.closed || time.Now().Before(p.busyUntil) {
		return
	}
	extra := -p.restoredWanted()
	for _, m := range p.members {
		if m.kind == "" && m.state == stateReady {
			extra++
		}
	}
	for _, m := range p.members {
		if extra > 0 && m.kind == "" && m.state == stateReady {
			extra--
			p.reap(m)
		}
	}
}

// restoreAhead has the interpreters of standby workers made while fewer
// plain warm workers than restoredWanted have theirs made or being made:
// the rest stay on standby, which holds less memory at rest. Workers of a
// kind do not count: they serve no plain call.
// p.mu must be held.
func (p *Pool[W]) restoreAhead() {
	if p.restore == nil {
		return
	}
	want := p.restoredWanted()
	for _, m := range p.members {
		if m.kind == "" && (m.state == stateRestoring || m.state == stateReady) {
			want--
		}
	}
	for _, m := range p.members {
		if want <= 0 {
			return
		}
		if m.state == stateStandby && p.move(m, stateRestoring) {
			p.restore(m.w)
			p.wg.Go(func() { p.watchRestore(m) })
			want--
		}
	}
}

// watchRestore makes a restoring worker ready once its restore has ended.
// One whose restore failed is dead (Hooks.Restore kills it), and watchIdle
// replaces it.
func (p *Pool[W]) watchRestore(m *member[W]) {
	select {
	case <-m.w.RestoreEnded():
	case <-m.w.Ended():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.state == stateRestoring && !m.w.Dead() {
		p.move(m, stateReady)
	}
}

// dispatch hands warm workers to waiting calls that may hold one: first the
// principal served least recently, then the call that came first, each a
// worker that fits it (see fitting). p.mu must be held.
func (p *Pool[W]) dispatch() {
	for {
		next := -1
		var m *member[W]
		for i, wt := range p.waiters {
			if !p.mayHold(wt.principal) || (next >= 0 && p.served[wt.principal] >= p.served[p.waiters[next].principal]) {
				continue
			}
			if fit := p.fitting(wt.kind); fit != nil {
				next, m = i, fit
			}
		}
		if next < 0 {
			return
		}
		if m.w.Dead() {
			p.lose(m)
			continue
		}
		wt := p.waiters[next]
		p.unqueue(next)
		p.take(m, wt.principal)
		waited := time.Since(wt.since) / time.Duration(wt.ahead+1)
		if p.perPlace == 0 {
			p.perPlace = waited
		} else {
			p.perPlace += time.Duration(perPlaceWeight * float64(waited-p.perPlace))
		}
		wt.ch <- grant[W]{m: m}
	}
}

// refill starts the workers the pool lacks. p.mu must be held.
//
// Of the Warm workers kept ready, one is of each hot kind (at most Warm-1
// of them, so that one at least is plain) and the rest plain; waiting calls
// get plain ones started, which fit every call.
func (p *Pool[W]) refill() {
	if p.closed || !p.begun {
		return
	}
	hot, have := p.hotKinds(), p.have
	start := func(kind string) {
		m := &member[W]{kind: kind, state: stateStarting}
		p.members = append(p.members, m)
		p.wg.Go(func() { p.startOne(m) })
	}
	for need := len(p.waiters) + p.cfg.Warm - len(hot) - have(""); need > 0 && len(p.members) < p.cfg.Workers && !p.retrying(""); need-- {
		start("")
	}
	for _, kind := range hot {
		if have(kind) == 0 && len(p.members) < p.cfg.Workers && !p.retrying(kind) {
			start(kind)
		}
	}
}

// hotKinds are the hot kinds refill keeps a worker of. p.mu must be held.
func (p *Pool[W]) hotKinds() []string {
	if p.hot == nil || p.cfg.Warm <= 1 {
		return nil
	}
	hot := p.hot()
	return hot[:min(len(hot), p.cfg.Warm-1)]
}

// have counts the workers of kind that are warm or coming. p.mu must be
// held.
func (p *Pool[W]) have(kind string) int {
	n := 0
	for _, m := range p.members {
		if m.kind == kind && (m.state.coming() || m.state.warm()) {
			n++
		}
	}
	return n
}

// crowdsOut reports whether recycling m, whose call is over, would keep out
// of a full pool a hot kind that has no worker: its slot then goes to that
// kind, as it would if each worker served one call. p.mu must be held.
func (p *Pool[W]) crowdsOut(m *member[W]) bool {
	if len(p.members) < p.cfg.Workers {
		return false
	}
	for _, kind := range p.hotKinds() {
		if kind != m.kind && p.have(kind) == 0 && !p.retrying(kind) {
			return true
		}
	}
	return false
}

// startOne boots the worker of starting m and offers it, or schedules a
// retry.
func (p *Pool[W]) startOne(m *member[W]) {
	kind := m.kind
	w, err := p.start(p.ctx, kind)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.move(m, stateGone)
		if p.closed {
			return
		}
		p.failedStart(kind, err)
		return
	}
	if f := p.failed[kind]; f != nil {
		p.log.Info("workers start again", zap.String("kind", kind), zap.Int("after_failures", f.n))
		delete(p.failed, kind)
	}
	// A kind that is gone or broken gives a plain worker.
	m.w, m.kind = w, w.LearnedSet()
	p.started = true
	p.offer(m)
	p.wg.Go(func() { p.watchIdle(m) })
	p.refill()
}

// failedStart notes a failed start of kind and retries it after its
// backoff. p.mu must be held.
func (p *Pool[W]) failedStart(kind string, err error) {
	if p.failed == nil {
		p.failed = map[string]*startFailures{}
	}
	f := p.failed[kind]
	if f == nil {
		f = &startFailures{backoff: backoff.Backoff{Min: minBackoff, Max: maxBackoff}}
		p.failed[kind] = f
	}
	f.n++
	f.lastErr = err
	wait := f.backoff.Next()
	p.restarts.Inc()
	p.log.Error("worker failed to start", zap.Error(err), zap.String("kind", kind), zap.Int("failures", f.n), zap.Duration("retry_in", wait))
	f.retrying = true
	// Calls waiting for a worker that cannot come learn why now.
	if err := p.unavailable(); err != nil {
		for _, wt := range p.waiters {
			wt.ch <- grant[W]{err: err}
		}
		p.waiters = nil
	}
	time.AfterFunc(wait, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		f.retrying = false
		p.refill()
	})
}

// watchIdle replaces a warm worker that dies before a call takes it.
func (p *Pool[W]) watchIdle(m *member[W]) {
	<-m.w.Ended()
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.state.warm() {
		if !p.closed {
			p.log.Warn("idle worker died", zap.String("status", m.w.ExitStatus()), zap.String("stderr", m.w.StderrTail()))
		}
		p.lose(m)
	}
}

// Close stops starting workers and kills the warm ones; busy workers are
// stopped by their calls, which see the owner's context end.
func (p *Pool[W]) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.trim != nil {
		p.trim.Stop()
	}
	for _, m := range p.members {
		if m.state.warm() {
			p.reap(m)
		}
	}
}

// Idle reports whether no call holds a worker and the pool starts none.
func (p *Pool[W]) Idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count(stateBusy, stateStarting, stateRecycling) == 0
}

// Health reports the pool's state.
func (p *Pool[W]) Health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := Health{Waiting: len(p.waiters)}
	for _, m := range p.members {
		switch m.state {
		case stateStarting, stateRecycling, stateRestoring:
			h.Starting++ // a restoring worker is working, not idle
		case stateStandby, stateReady:
			h.Warm++
		case stateBusy:
			h.Busy++
		}
	}
	if h.Warm == 0 {
		h.Wait = time.Duration(h.Waiting+1) * p.perPlace
	}
	if f := p.failed[""]; f != nil && h.Warm+h.Busy == 0 {
		h.Err = f.lastErr.Error()
	}
	h.Ready = p.started && h.Err == "" && (p.cfg.QueueTimeout <= 0 || h.Wait <= p.cfg.QueueTimeout)
	return h
}
