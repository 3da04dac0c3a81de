package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/backoff"
)

// Backoff of failed worker starts.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// poolConfig is what the pool needs of the supervisor's Config.
type poolConfig struct {
	Workers      int           // live worker limit
	Warm         int           // idle workers kept ready
	Queue        int           // calls that may wait for a worker
	QueueTimeout time.Duration // how long a call may wait; 0 means no limit
	PerPrincipal int           // workers one principal may hold; 0 means no limit
	// Busy is how long after a call all Warm workers are kept restored,
	// rather than half of them (see restoreAhead); 0 means defaultBusy.
	Busy time.Duration
}

// defaultBusy is poolConfig.Busy's default: calls that come within it of
// each other find every warm worker restored, as they would without
// standby workers; a server idle that long holds half of them on standby.
const defaultBusy = 30 * time.Second

// pool hands out warm workers. Every worker is in exactly one state:
// starting, warm (idle, in warm) or busy (taken by a call). Once begun, the
// pool starts workers while fewer than Warm are warm or starting, plus one
// per waiting call, never more than Workers alive at once.
//
// Calls that find no warm worker wait. The queue is bounded by how long a
// call would wait, not by how many wait: a call whose estimated wait is over
// QueueTimeout is refused at once, with the estimate. Calls name a
// principal (who they are for; "" for none): one principal holds at most
// PerPrincipal workers, and a free worker goes to the waiting principal
// served least recently, first come first served within a principal.
//
// It knows workers only as processes: start, its one way to get a worker,
// is the seam that tests replace.
type pool struct {
	cfg   poolConfig
	start func(ctx context.Context, kind string) (*worker, error)
	// restore makes a standby worker's interpreter in the background (see
	// standby.go); nil when workers start restored.
	restore func(w *worker)
	// hot are the kinds of worker (learned package sets, see learn.go) to
	// keep one warm worker of each, most wanted first; nil for none.
	hot func() []string
	// stale reports a worker whose network permissions are out of date
	// (see addrWatch): it is not kept warm. Nil when none can be.
	stale    func(w *worker) bool
	ctx      context.Context // the supervisor's: ends when it closes
	wg       *tracker        // the supervisor's: every goroutine that starts or kills workers
	log      *zap.Logger
	restarts prometheus.Counter
	wait     prometheus.Observer

	mu       sync.Mutex
	begun    bool // start may be called: the runtime exists
	warm     []*worker
	starting int
	kinds    map[string]int // workers starting, by kind
	busy     int
	dying    int       // retired, not yet reaped: still counted against Workers
	waiters  []*waiter // calls waiting for a worker, in arrival order
	closed   bool

	holders map[*worker]string // the principal each busy worker serves
	running map[string]int     // busy workers per principal
	served  map[string]uint64  // when each principal with calls last got a worker
	tick    uint64             // counts grants, for served
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

// startFailures are the starts of one kind of worker that failed in a row.
type startFailures struct {
	n        int   // consecutive failed starts
	lastErr  error // of the last one
	retrying bool  // a backoff timer is pending; no starts of the kind until it fires
	backoff  backoff.Backoff
}

// retrying reports whether starts of kind wait for their backoff. p.mu
// must be held.
func (p *pool) retrying(kind string) bool {
	f := p.failed[kind]
	return f != nil && f.retrying
}

// grant is what a waiting call gets: a worker, or why none will come.
type grant struct {
	w   *worker
	err error
}

// waiter is a call waiting for a worker.
type waiter struct {
	ch        chan grant // buffered: a grant never blocks the pool
	principal string
	kind      string // the kind of worker it prefers; it takes a plain one too
	ahead     int    // calls that waited before it when it came
	since     time.Time
}

// perPlaceWeight is the weight of the newest wait in perPlace.
const perPlaceWeight = 0.25

// unavailable says why no call can be served now: no worker is warm or
// starting and the last plain start failed, so waiting would only end in the
// queue timeout. Nil when calls may wait. p.mu must be held.
func (p *pool) unavailable() error {
	f := p.failed[""] // every call takes a plain worker
	if f == nil || len(p.warm) > 0 || p.starting > 0 {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, f.lastErr)
}

// begin lets the pool start workers.
func (p *pool) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begun = true
	p.refill()
}

// acquire returns a warm worker for a call of principal, waiting in the
// queue if all are busy (or principal holds its share). The worker is the
// caller's until it calls retire.
//
// A call that names a kind gets a warm worker of that kind if there is
// one, else a plain one; a worker of another kind goes to no call of
// another kind (its interpreter has other packages loaded), but one idle
// while a call waits is retired, for a plain one to start in its place.
func (p *pool) acquire(ctx context.Context, principal, kind string) (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	// Warm workers are handed to waiting calls as they come, so a warm
	// worker that fits now fits no waiting call.
	for p.mayHold(principal) {
		i := p.fitting(kind)
		if i < 0 {
			break
		}
		w := p.warm[i]
		p.warm = slices.Delete(p.warm, i, i+1)
		if w.dead() {
			// Died while idle, a moment before watchIdle would have seen it;
			// the refill below replaces it.
			p.restarts.Inc()
			p.wg.Go(w.kill) // releases its connection
			continue
		}
		p.take(w, principal)
		p.refill()
		p.mu.Unlock()
		p.wait.Observe(0)
		return w, nil
	}
	if err := p.unavailable(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if err := p.admit(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	wt := &waiter{ch: make(chan grant, 1), principal: principal, kind: kind, ahead: len(p.waiters), since: time.Now()}
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
	var err error
	select {
	case g := <-wt.ch:
		p.wait.Observe(time.Since(wt.since).Seconds())
		return g.w, g.err
	case <-timeout:
		err = fmt.Errorf("%w: none became free within the queue timeout of %s", ErrQueueTimeout, p.cfg.QueueTimeout)
		if health := p.health(); health.Err != "" {
			err = fmt.Errorf("%w: %s", ErrUnavailable, health.Err)
		}
	case <-ctx.Done():
		err = fmt.Errorf("waiting for a free worker: %w", context.Cause(ctx))
	case <-p.ctx.Done():
		err = errClosed
	}
	p.wait.Observe(time.Since(wt.since).Seconds())

	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, wt); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.forget(principal)
		return nil, err
	}
	// A worker was handed over as we gave up: it never ran code, so it
	// goes to the next caller.
	if g := <-wt.ch; g.w != nil {
		p.release(g.w)
		p.offer(g.w)
	}
	return nil, err
}

// admit refuses a call that would wait too long: past Queue calls waiting,
// or with a wait estimated from recent ones over QueueTimeout. p.mu must be
// held.
func (p *pool) admit() error {
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

// fitting returns the index in warm of the worker for a call of kind: one
// of that kind, else the plain one soonest ready (see readiness); -1 when
// none fits. p.mu must be held.
func (p *pool) fitting(kind string) int {
	plain := -1
	for i, w := range p.warm {
		switch {
		case kind != "" && w.kind == kind:
			return i
		case w.kind == "" && (plain < 0 || w.readiness() < p.warm[plain].readiness()):
			plain = i // the plain one soonest ready
		}
	}
	return plain
}

// evictIdle retires the warm workers of a kind that no waiting call wants,
// while a call waits for lack of a plain one: its slot serves the queue
// better with a plain worker. p.mu must be held.
func (p *pool) evictIdle() {
	p.warm = slices.DeleteFunc(p.warm, func(w *worker) bool {
		if w.kind == "" || slices.ContainsFunc(p.waiters, func(wt *waiter) bool { return wt.kind == w.kind }) {
			return false
		}
		p.reap(w)
		return true
	})
}

// reap kills w, which counts against Workers until it is gone, and then
// refills. p.mu must be held.
func (p *pool) reap(w *worker) {
	p.dying++
	p.wg.Go(func() {
		w.kill()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.dying--
		p.refill()
	})
}

// mayHold reports whether principal may take one more worker. p.mu must be
// held.
func (p *pool) mayHold(principal string) bool {
	return p.cfg.PerPrincipal <= 0 || principal == "" || p.running[principal] < p.cfg.PerPrincipal
}

// take makes w busy for principal. p.mu must be held.
func (p *pool) take(w *worker, principal string) {
	if p.holders == nil {
		p.holders, p.running, p.served = map[*worker]string{}, map[string]int{}, map[string]uint64{}
	}
	p.busy++
	p.busyFor()
	p.holders[w] = principal
	p.running[principal]++
	p.tick++
	p.served[principal] = p.tick
}

// release makes busy w no longer held. p.mu must be held.
func (p *pool) release(w *worker) {
	p.busy--
	principal := p.holders[w]
	delete(p.holders, w)
	p.running[principal]--
	p.forget(principal)
}

// forget drops what the pool keeps of a principal that has no busy worker
// and no waiting call. p.mu must be held.
func (p *pool) forget(principal string) {
	if p.running[principal] > 0 || slices.ContainsFunc(p.waiters, func(wt *waiter) bool { return wt.principal == principal }) {
		return
	}
	delete(p.running, principal)
	delete(p.served, principal)
}

// retire ends a worker after its call: one call per interpreter.
func (p *pool) retire(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(w)
	p.reap(w)
	// Its principal may have calls waiting for their share.
	p.dispatch()
	// Not as the call took it: a restore then would compete with the call
	// for the processor.
	p.restoreAhead()
}

// discard ends a worker taken for a call that turned out not to be fit for
// one (it did not answer): unlike retire, it counts as a restart.
func (p *pool) discard(w *worker, why error) {
	p.restarts.Inc()
	p.log.Warn("a warm worker did not answer; replacing it", zap.Int("pid", w.proc.Pid()), zap.Error(why))
	p.retire(w)
}

// offer gives a ready worker to a waiting call (see dispatch), or keeps it
// warm. p.mu must be held.
func (p *pool) offer(w *worker) {
	if p.closed {
		p.wg.Go(w.kill)
		return
	}
	if p.stale != nil && p.stale(w) {
		p.reap(w) // started as this host's addresses changed
		return
	}
	p.warm = append(p.warm, w)
	p.dispatch()
	p.restoreAhead()
}

// retireStale replaces the warm workers that stale reports: made before
// this host's addresses changed, their --deny-net lacks the new ones. Busy
// workers keep theirs until their call ends, when they are retired anyway.
func (p *pool) retireStale() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stale == nil {
		return
	}
	p.warm = slices.DeleteFunc(p.warm, func(w *worker) bool {
		if !p.stale(w) {
			return false
		}
		p.reap(w)
		return true
	})
}

// restoredWanted is how many plain warm workers restoreAhead keeps
// restored: all of them while calls come, half (rounded up) once the pool
// has been idle for poolConfig.Busy. p.mu must be held.
func (p *pool) restoredWanted() int {
	if time.Now().Before(p.busyUntil) {
		return p.cfg.Warm
	}
	return p.cfg.Warm - p.cfg.Warm/2
}

// busyFor notes a call: every warm worker is wanted restored for
// poolConfig.Busy, after which the extra ones are put back on standby.
// p.mu must be held.
func (p *pool) busyFor() {
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

// trimRestored retires the plain warm workers restored beyond
// restoredWanted: their replacements start on standby, and the memory of
// their interpreters goes back to the system. p.mu must be held.
func (p *pool) trimRestored() {
	if p.closed || time.Now().Before(p.busyUntil) {
		return
	}
	extra := -p.restoredWanted()
	for _, w := range p.warm {
		if w.kind == "" && w.readiness() == restored {
			extra++
		}
	}
	p.warm = slices.DeleteFunc(p.warm, func(w *worker) bool {
		if extra <= 0 || w.kind != "" || w.readiness() != restored {
			return false
		}
		extra--
		p.reap(w)
		return true
	})
}

// restoreAhead has the interpreters of standby workers made while fewer
// plain warm workers than restoredWanted have theirs made or being made:
// the rest stay on standby, which holds less memory at rest (see
// standby.go). Workers of a kind do not count: they serve no plain call.
// p.mu must be held.
func (p *pool) restoreAhead() {
	if p.restore == nil {
		return
	}
	want := p.restoredWanted()
	for _, w := range p.warm {
		if w.kind == "" && w.readiness() != onStandby {
			want--
		}
	}
	for _, w := range p.warm {
		if want <= 0 {
			return
		}
		if w.readiness() == onStandby {
			p.restore(w)
			want--
		}
	}
}

// dispatch hands warm workers to waiting calls that may hold one: first the
// principal served least recently, then the call that came first, each a
// worker that fits it (see fitting). p.mu must be held.
func (p *pool) dispatch() {
	for len(p.warm) > 0 {
		next, wi := -1, -1
		for i, wt := range p.waiters {
			if !p.mayHold(wt.principal) || (next >= 0 && p.served[wt.principal] >= p.served[p.waiters[next].principal]) {
				continue
			}
			if k := p.fitting(wt.kind); k >= 0 {
				next, wi = i, k
			}
		}
		if next < 0 {
			return
		}
		w := p.warm[wi]
		p.warm = slices.Delete(p.warm, wi, wi+1)
		if w.dead() {
			p.restarts.Inc()
			p.wg.Go(w.kill)
			p.refill()
			continue
		}
		wt := p.waiters[next]
		p.waiters = slices.Delete(p.waiters, next, next+1)
		p.take(w, wt.principal)
		waited := time.Since(wt.since) / time.Duration(wt.ahead+1)
		if p.perPlace == 0 {
			p.perPlace = waited
		} else {
			p.perPlace += time.Duration(perPlaceWeight * float64(waited-p.perPlace))
		}
		wt.ch <- grant{w: w}
	}
}

// refill starts the workers the pool lacks. p.mu must be held.
//
// Of the Warm workers kept ready, one is of each hot kind (at most Warm-1
// of them, so that one at least is plain) and the rest plain; waiting calls
// get plain ones started, which fit every call.
func (p *pool) refill() {
	if p.closed || !p.begun {
		return
	}
	live := len(p.warm) + p.starting + p.busy + p.dying
	var hot []string
	if p.hot != nil && p.cfg.Warm > 1 {
		hot = p.hot()
		hot = hot[:min(len(hot), p.cfg.Warm-1)]
	}
	have := func(kind string) int {
		n := p.kinds[kind]
		for _, w := range p.warm {
			if w.kind == kind {
				n++
			}
		}
		return n
	}
	start := func(kind string) {
		if p.kinds == nil {
			p.kinds = map[string]int{}
		}
		p.starting++
		p.kinds[kind]++
		live++
		p.wg.Go(func() { p.startOne(kind) })
	}
	for need := len(p.waiters) + p.cfg.Warm - len(hot) - have(""); need > 0 && live < p.cfg.Workers && !p.retrying(""); need-- {
		start("")
	}
	for _, kind := range hot {
		if have(kind) == 0 && live < p.cfg.Workers && !p.retrying(kind) {
			start(kind)
		}
	}
}

// startOne boots one worker of kind and offers it, or schedules a retry.
func (p *pool) startOne(kind string) {
	w, err := p.start(p.ctx, kind)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if p.kinds[kind]--; p.kinds[kind] <= 0 {
		delete(p.kinds, kind)
	}
	if err != nil {
		if p.closed {
			return
		}
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
				wt.ch <- grant{err: err}
			}
			p.waiters = nil
		}
		time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			f.retrying = false
			p.refill()
		})
		return
	}
	if f := p.failed[kind]; f != nil {
		p.log.Info("workers start again", zap.String("kind", kind), zap.Int("after_failures", f.n))
		delete(p.failed, kind)
	}
	p.started = true
	p.offer(w)
	p.wg.Go(func() { p.watchIdle(w) })
	p.refill()
}

// watchIdle replaces a warm worker that dies before a call takes it.
func (p *pool) watchIdle(w *worker) {
	<-w.exited
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.warm, w); i >= 0 {
		p.warm = slices.Delete(p.warm, i, i+1)
		p.wg.Go(w.kill) // releases its connection
		if !p.closed {
			p.restarts.Inc()
			p.log.Warn("idle worker died", zap.String("status", w.exitStatus()), zap.String("stderr", w.stderrTail()))
			p.refill()
		}
	}
}

// close stops starting workers and kills the warm ones; busy workers are
// stopped by their calls, which see the supervisor's context end.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.trim != nil {
		p.trim.Stop()
	}
	for _, w := range p.warm {
		p.wg.Go(w.kill)
	}
	p.warm = nil
}

// health reports the pool's state.
func (p *pool) health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := Health{Busy: p.busy, Starting: p.starting, Waiting: len(p.waiters)}
	for _, w := range p.warm {
		if w.readiness() == restoring {
			h.Starting++ // being restored: working, not idle
		} else {
			h.Warm++
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
