package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// The pool's tests run in memory: its workers are fakeWorkers, started by a
// fakeFleet, and every test runs in a synctest bubble, so that a start, a
// restore or a queue timeout takes fake time and the tests neither sleep
// nor read the clock of the wall.

// fakeWorker is a worker in memory.
type fakeWorker struct {
	id     int
	kind   string
	netGen uint64
	fleet  *fakeFleet
	exited chan struct{}
	stop   sync.Once // closes exited
	reaped sync.Once // counts it out of its fleet
	// restoreDone is closed once its restore has ended; nil for a worker
	// started restored.
	restoreDone chan struct{}
	asked       atomic.Bool // its restore has begun
	// hold, when set, holds kill until it is closed: a kill under way.
	hold chan struct{}
}

func (w *fakeWorker) LearnedSet() string            { return w.kind }
func (w *fakeWorker) RestoreEnded() <-chan struct{} { return w.restoreDone }
func (w *fakeWorker) Ended() <-chan struct{}        { return w.exited }
func (w *fakeWorker) Dead() bool                    { return isClosed(w.exited) }
func (w *fakeWorker) Pid() int                      { return w.id }
func (w *fakeWorker) ExitStatus() string            { return "killed" }
func (w *fakeWorker) StderrTail() string            { return "no output on stderr" }

func (w *fakeWorker) Readiness() Readiness {
	switch {
	case w.restoreDone == nil || isClosed(w.restoreDone):
		return Restored
	case w.asked.Load():
		return Restoring
	}
	return OnStandby
}

// die ends the worker's process, as a kill from outside the pool does.
func (w *fakeWorker) die() { w.stop.Do(func() { close(w.exited) }) }

func (w *fakeWorker) Kill() {
	w.die()
	if w.hold != nil {
		<-w.hold
	}
	w.reaped.Do(func() { w.fleet.live.Add(-1) })
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fakeStart is how long a fake worker takes to start.
const fakeStart = 500 * time.Millisecond

// fakeFleet starts fake workers: the pool's seam.
type fakeFleet struct {
	fail atomic.Pointer[error] // while set, starts fail with it
	lazy bool                  // plain workers start on standby
	live atomic.Int32          // workers started and not yet killed
	peak atomic.Int32
	ids  atomic.Int32

	mu        sync.Mutex
	startedAt []time.Time   // when each start began
	all       []*fakeWorker // every worker started
}

func (f *fakeFleet) start(ctx context.Context, kind string) (*fakeWorker, error) {
	f.mu.Lock()
	f.startedAt = append(f.startedAt, time.Now())
	f.mu.Unlock()
	select {
	case <-time.After(fakeStart):
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if err := f.fail.Load(); err != nil {
		return nil, *err
	}
	n := f.live.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	w := &fakeWorker{id: int(f.ids.Add(1)), kind: kind, fleet: f, exited: make(chan struct{})}
	if f.lazy && kind == "" {
		w.restoreDone = make(chan struct{})
	}
	f.mu.Lock()
	f.all = append(f.all, w)
	f.mu.Unlock()
	return w, nil
}

func (f *fakeFleet) failWith(err error) {
	if err == nil {
		f.fail.Store(nil)
	} else {
		f.fail.Store(&err)
	}
}

// restoreIn is a pool's restore whose restores take d; 0 makes the
// interpreter before it returns.
func restoreIn(d time.Duration) func(w *fakeWorker) {
	return func(w *fakeWorker) {
		switch {
		case !w.asked.CompareAndSwap(false, true):
		case d == 0:
			close(w.restoreDone) // at once, as a restore that is quick
		default:
			time.AfterFunc(d, func() { close(w.restoreDone) })
		}
	}
}

// testPool is a pool of fake workers.
type testPool = Pool[*fakeWorker]

// newTestPool returns a begun pool of fake workers, set up first by setup;
// its cleanup closes it and checks that no worker is left. It runs in a
// synctest bubble, and its logger panics on a DPanic: an illegal move.
func newTestPool(t *testing.T, cfg Config, setup ...func(*testPool, *fakeFleet)) (*testPool, *fakeFleet) {
	t.Helper()
	f := &fakeFleet{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg tracker.Tracker
	p := &testPool{
		cfg:      cfg,
		start:    f.start,
		ctx:      ctx,
		wg:       &wg,
		log:      zaptest.NewLogger(t, zaptest.WrapOptions(zap.Development())),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "restarts"}),
		wait:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wait"}),
	}
	t.Cleanup(func() {
		cancel()
		p.Close()
		synctest.Wait()
		if n := f.live.Load(); n != 0 && !t.Failed() {
			t.Errorf("%d fake workers left after close", n)
		}
		// A test that failed may have left busy workers, whose watchers
		// wait for their end.
		f.release()
		f.mu.Lock()
		for _, w := range f.all {
			w.Kill()
		}
		f.mu.Unlock()
		<-wg.Shut()
	})
	for _, set := range setup {
		set(p, f)
	}
	p.Begin()
	return p, f
}

// advance moves the bubble's clock on by d and lets every goroutine of it
// run until it waits.
func advance(d time.Duration) {
	time.Sleep(d) // fake time: the bubble's clock jumps
	synctest.Wait()
}

// waitFor advances the bubble's clock until the pool's health is ok, for at
// most a fake minute.
func waitFor(t *testing.T, p *testPool, what string, ok func(Health) bool) {
	t.Helper()
	eventually(t, what, func() bool { return ok(p.Health()) }, func() string { return fmt.Sprintf("%+v", p.Health()) })
}

// eventually advances the bubble's clock until ok, for at most a fake
// minute; on failure it says what state was.
func eventually(t *testing.T, what string, ok func() bool, state func() string) {
	t.Helper()
	synctest.Wait()
	for deadline := time.Now().Add(time.Minute); !ok(); advance(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never %s: %s", what, state())
		}
	}
}

func acquire(t *testing.T, p *testPool) *fakeWorker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := p.Acquire(ctx, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// warmWorkers returns the pool's warm workers, in the order they became warm.
func warmWorkers(p *testPool) []*fakeWorker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ws []*fakeWorker
	for _, m := range p.members {
		if m.state.warm() {
			ws = append(ws, m.w)
		}
	}
	return ws
}

// states counts the pool's members by state.
func states(p *testPool) map[workerState]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := map[workerState]int{}
	for _, m := range p.members {
		n[m.state]++
	}
	return n
}

// TestWorkerStateEdges: may allows exactly the edges of workerState's table.
func TestWorkerStateEdges(t *testing.T) {
	all := []workerState{stateStarting, stateStandby, stateRestoring, stateReady, stateBusy, stateRecycling, stateDying, stateGone}
	warm := []workerState{stateStandby, stateRestoring, stateReady}
	legal := map[workerState][]workerState{
		stateStarting:  {stateStandby, stateReady, stateDying, stateGone},
		stateStandby:   {stateRestoring, stateBusy, stateDying, stateGone},
		stateRestoring: {stateReady, stateBusy, stateDying, stateGone},
		stateReady:     {stateBusy, stateDying, stateGone},
		stateBusy:      append(slices.Clone(warm), stateRecycling, stateDying),
		stateRecycling: append(slices.Clone(warm), stateDying),
		stateDying:     {stateGone},
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.may(to), slices.Contains(legal[from], to); got != want {
				t.Errorf("%s → %s allowed: %v, want %v", from, to, got, want)
			}
		}
		if got, want := from.warm(), slices.Contains(warm, from); got != want {
			t.Errorf("%s is warm: %v, want %v", from, got, want)
		}
	}
}

// errLeftover is a failed recycle: the supervisor's, when a call left
// something of its own in the process.
var errLeftover = errors.New("the last call left something of its own in the process")

// recycleIn is a pool's recycle that takes d, and then fails with err.
func recycleIn(d time.Duration, err error) func(context.Context, *fakeWorker) error {
	return func(ctx context.Context, _ *fakeWorker) error {
		select {
		case <-time.After(d):
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestPoolRecyclesWorkers: with recycle, a worker whose call is over comes
// back warm, the same worker, and one that fails its recycle is replaced;
// a worker that did not answer is never recycled.
func TestPoolRecyclesWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 1}, func(p *testPool, _ *fakeFleet) {
			p.recycle = func(ctx context.Context, w *fakeWorker) error {
				time.Sleep(50 * time.Millisecond)
				if fail.Load() {
					return errLeftover
				}
				return nil
			}
		})
		w := acquire(t, p)
		p.Retire(w)
		synctest.Wait()
		if got := states(p); !sameCounts(got, map[workerState]int{stateRecycling: 1}) {
			t.Errorf("after its call: %v, want one recycling", got)
		}
		if w2 := acquire(t, p); w2 != w {
			t.Error("the next call got a new worker, not the recycled one")
		} else {
			fail.Store(true)
			p.Retire(w2)
		}
		if w3 := acquire(t, p); w3 == w {
			t.Error("a worker that failed its recycle served again")
		} else {
			fail.Store(false)
			p.Discard(w3, errors.New("no answer"))
			synctest.Wait()
			if got := states(p); got[stateRecycling] != 0 {
				t.Errorf("a worker that did not answer is recycled: %v", got)
			}
		}
	})
}

// TestPoolRefusesAnIllegalMove: a move along no edge is a bug, a panic in
// development, and in production logged and refused.
func TestPoolRefusesAnIllegalMove(t *testing.T) {
	p := &testPool{log: zap.NewNop()}
	m := &member[*fakeWorker]{state: stateDying}
	p.members = []*member[*fakeWorker]{m}
	if p.move(m, stateBusy) || m.state != stateDying {
		t.Errorf("a dying worker made busy: now %s", m.state)
	}
	p.log = zaptest.NewLogger(t, zaptest.WrapOptions(zap.Development()))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("an illegal move did not panic in development")
			}
		}()
		p.move(m, stateReady)
	}()
	if !p.move(m, stateGone) || len(p.members) != 0 {
		t.Errorf("a gone worker is still a member: %d members", len(p.members))
	}
}

// TestPoolMovesWorkersAlongTheEdges follows workers through the pool's
// operations, each of which moves one along the edges it names.
func TestPoolMovesWorkersAlongTheEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stale atomic.Bool
		p, f := newTestPool(t, Config{Workers: 2, Warm: 1, Queue: 1, Busy: time.Minute}, func(p *testPool, f *fakeFleet) {
			f.lazy = true
			p.stale = func(*fakeWorker) bool { return stale.Load() }
		})
		want := func(step string, n map[workerState]int) {
			t.Helper()
			synctest.Wait()
			if got := states(p); !sameCounts(got, n) {
				t.Errorf("%s: states %v, want %v", step, got, n)
			}
		}
		want("begun", map[workerState]int{stateStarting: 1})
		advance(fakeStart)
		want("started: starting → standby", map[workerState]int{stateStandby: 1})
		w := acquire(t, p)
		want("taken: standby → busy", map[workerState]int{stateBusy: 1, stateStarting: 1})
		p.mu.Lock()
		p.restore = restoreIn(100 * time.Millisecond)
		p.mu.Unlock()
		p.Retire(w)
		want("retired: busy → dying → gone", map[workerState]int{stateStarting: 1})
		advance(fakeStart)
		want("started and restored ahead: standby → restoring", map[workerState]int{stateRestoring: 1})
		advance(100 * time.Millisecond)
		want("restored: restoring → ready", map[workerState]int{stateReady: 1})
		warmWorkers(p)[0].die()
		want("died: ready → gone", map[workerState]int{stateStarting: 1})
		stale.Store(true)
		advance(fakeStart)
		want("started stale: starting → dying → gone", map[workerState]int{stateStarting: 1})
		stale.Store(false)
		advance(fakeStart)
		stale.Store(true)
		p.RetireStale()
		want("stale: restoring → dying → gone", map[workerState]int{stateStarting: 1})
		stale.Store(false)
		f.failWith(errors.New("no deno"))
		advance(fakeStart)
		want("failed: starting → gone", nil)
		f.failWith(nil)
		waitFor(t, p, "started again", func(h Health) bool { return h.Warm == 1 })

		// A worker handed to a call as it gave up goes back warm.
		w = acquire(t, p)
		p.mu.Lock()
		m := p.find(w)
		p.offer(m)
		p.mu.Unlock()
		if m.state != stateReady {
			t.Errorf("a worker handed back: %s, want ready", m.state)
		}
		p.Close()
		advance(fakeStart) // the start under way ends after close
		want("closed: ready, and starting, → dying → gone", nil)
	})
}

// TestPoolDrivesEveryEdge moves a worker along each edge of its states by
// the pool's operation that does so in the pool, and checks that the
// edges driven are all of may's. A move to dying is followed to gone once
// the kill ends.
func TestPoolDrivesEveryEdge(t *testing.T) {
	// drive moves m, a worker of p started by f, along an edge.
	type drive = func(p *testPool, f *fakeFleet, m *member[*fakeWorker])
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	locked := func(op drive) drive {
		return func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			p.mu.Lock()
			defer p.mu.Unlock()
			op(p, f, m)
		}
	}
	started := func(r Readiness, err error) drive {
		return func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			p.start = func(context.Context, string) (*fakeWorker, error) {
				if err != nil {
					return nil, err
				}
				return f.fake(r), nil
			}
			p.startOne(m)
		}
	}
	recycled := func(err error) drive {
		return func(p *testPool, _ *fakeFleet, m *member[*fakeWorker]) {
			p.recycle = recycleIn(0, err)
			p.recycleOne(m)
		}
	}
	take := func(p *testPool, _ *fakeFleet, _ *member[*fakeWorker]) {
		if _, err := p.Acquire(context.Background(), "", "", nil); err != nil {
			t.Error(err)
		}
	}
	died := func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
		m.w.die()
		p.watchIdle(m)
	}
	stale := func(p *testPool, _ *fakeFleet, _ *member[*fakeWorker]) {
		p.stale = func(*fakeWorker) bool { return true }
		p.RetireStale()
	}
	tests := []struct {
		from, to workerState
		w        Readiness // the worker's, once there is one
		by       string
		drive    drive
	}{
		{stateStarting, stateStandby, OnStandby, "startOne", started(OnStandby, nil)},
		{stateStarting, stateReady, Restored, "startOne", started(Restored, nil)},
		{stateStarting, stateDying, Restored, "startOne, stale", func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			p.stale = func(*fakeWorker) bool { return true }
			started(Restored, nil)(p, f, m)
		}},
		{stateStarting, stateGone, Restored, "startOne, failed", started(Restored, errors.New("no deno"))},
		{stateStandby, stateRestoring, OnStandby, "restoreAhead", locked(func(p *testPool, _ *fakeFleet, _ *member[*fakeWorker]) {
			p.restore = restoreIn(time.Hour)
			p.restoreAhead()
		})},
		{stateStandby, stateBusy, OnStandby, "acquire", take},
		{stateStandby, stateDying, OnStandby, "retireStale", stale},
		{stateStandby, stateGone, OnStandby, "watchIdle", died},
		{stateRestoring, stateReady, Restoring, "watchRestore", func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			close(m.w.restoreDone)
			p.watchRestore(m)
		}},
		{stateRestoring, stateBusy, Restoring, "acquire", take},
		{stateRestoring, stateDying, Restoring, "close", func(p *testPool, _ *fakeFleet, _ *member[*fakeWorker]) { p.Close() }},
		{stateRestoring, stateGone, Restoring, "watchIdle", died},
		{stateReady, stateBusy, Restored, "acquire", take},
		{stateReady, stateDying, Restored, "trimRestored", locked(func(p *testPool, _ *fakeFleet, _ *member[*fakeWorker]) {
			p.cfg.Warm = 0
			p.trimRestored()
		})},
		{stateReady, stateGone, Restored, "acquire, dead", func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			m.w.die()
			_, _ = p.Acquire(cancelled, "", "", nil)
		}},
		{stateBusy, stateStandby, OnStandby, "offer", locked(func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) { p.offer(m) })},
		{stateBusy, stateRestoring, Restoring, "offer", locked(func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) { p.offer(m) })},
		{stateBusy, stateReady, Restored, "offer", locked(func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) { p.offer(m) })},
		{stateBusy, stateDying, Restored, "retire", func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) { p.Retire(m.w) }},
		{stateBusy, stateRecycling, Restored, "retire, recycled", func(p *testPool, f *fakeFleet, m *member[*fakeWorker]) {
			p.recycle = recycleIn(time.Hour, nil)
			p.Retire(m.w)
		}},
		{stateRecycling, stateStandby, OnStandby, "recycleOne", recycled(nil)},
		{stateRecycling, stateRestoring, Restoring, "recycleOne", recycled(nil)},
		{stateRecycling, stateReady, Restored, "recycleOne", recycled(nil)},
		{stateRecycling, stateDying, Restored, "recycleOne, failed", recycled(errLeftover)},
	}
	driven := map[[2]workerState]bool{{stateDying, stateGone}: true} // by reap, after each move to dying
	for _, tt := range tests {
		driven[[2]workerState{tt.from, tt.to}] = true
		t.Run(fmt.Sprintf("%s→%s by %s", tt.from, tt.to, tt.by), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Warm 0: the pool starts no worker of its own.
				p, f := newTestPool(t, Config{Workers: 4, Queue: 1})
				p.mu.Lock()
				p.cfg.Warm = 2 // for restoreAhead, once begun no more
				p.begun = false
				m := &member[*fakeWorker]{state: tt.from}
				if tt.from != stateStarting {
					m.w = f.fake(tt.w)
				}
				p.members = append(p.members, m)
				p.mu.Unlock()

				tt.drive(p, f, m)
				synctest.Wait()
				p.mu.Lock()
				got := m.state
				p.mu.Unlock()
				if got != tt.to {
					t.Fatalf("%s moved a %s worker to %s, want %s", tt.by, tt.from, got, tt.to)
				}
				f.release()
				synctest.Wait()
				if tt.to == stateDying && m.state != stateGone {
					t.Errorf("a dying worker whose kill ended is %s, want gone", m.state)
				}
				if m.state == stateBusy {
					p.Retire(m.w)
				}
			})
		})
	}
	for from := range stateGone + 1 {
		for to := range stateGone + 1 {
			if from.may(to) && !driven[[2]workerState{from, to}] {
				t.Errorf("no test drives %s → %s", from, to)
			}
		}
	}
}

// fake returns a worker of Readiness r, whose kill waits for release.
func (f *fakeFleet) fake(r Readiness) *fakeWorker {
	w := &fakeWorker{id: int(f.ids.Add(1)), fleet: f, exited: make(chan struct{}), hold: make(chan struct{})}
	if r != Restored {
		w.restoreDone = make(chan struct{})
		w.asked.Store(r == Restoring)
	}
	f.live.Add(1)
	f.mu.Lock()
	f.all = append(f.all, w)
	f.mu.Unlock()
	return w
}

// release lets every kill held by a worker of fake end.
func (f *fakeFleet) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.all {
		if w.hold != nil && !isClosed(w.hold) {
			close(w.hold)
		}
	}
}

// sameCounts reports whether two counts by state are the same, missing as 0.
func sameCounts(a, b map[workerState]int) bool {
	for s := range stateGone + 1 {
		if a[s] != b[s] {
			return false
		}
	}
	return true
}

func TestPoolKeepsWarmWorkersWithinTheLiveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, f := newTestPool(t, Config{Workers: 3, Warm: 1, Queue: 1, QueueTimeout: time.Second})
		advance(fakeStart)
		if h := p.Health(); h.Warm != 1 || h.Starting != 0 {
			t.Fatalf("health after a start: %+v, want one warm worker", h)
		}
		if n := f.live.Load(); n != 1 {
			t.Errorf("%d workers alive with Warm 1 and no call, want 1", n)
		}
		// Beyond the warm one, workers start on demand up to the live limit.
		var taken []*fakeWorker
		for range 3 {
			taken = append(taken, acquire(t, p))
		}
		if _, err := p.Acquire(context.Background(), "", "", nil); !errors.Is(err, ErrQueueTimeout) {
			t.Errorf("a fourth call with three busy workers: %v, want ErrQueueTimeout", err)
		}
		for _, w := range taken {
			if w.Dead() {
				t.Error("a call got a dead worker")
			}
			p.Retire(w)
		}
		waitFor(t, p, "settled after the calls", func(h Health) bool { return h.Warm == 1 && h.Busy == 0 && h.Starting == 0 })
		if peak := f.peak.Load(); peak > 3 {
			t.Errorf("%d workers alive at once, want at most 3", peak)
		}
	})
}

func TestPoolQueueIsFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 2})
		busy := acquire(t, p)
		order := make(chan int, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				w := acquire(t, p)
				order <- i
				p.Retire(w)
			})
			synctest.Wait()
		}
		if h := p.Health(); h.Waiting != 2 {
			t.Fatalf("health with two calls queued: %+v", h)
		}
		if _, err := p.Acquire(context.Background(), "", "", nil); !errors.Is(err, ErrQueueFull) {
			t.Errorf("a call beyond the queue: %v, want ErrQueueFull", err)
		}
		p.Retire(busy)
		wg.Wait()
		if first, second := <-order, <-order; first != 0 || second != 1 {
			t.Errorf("served %d then %d, want 0 then 1", first, second)
		}
	})
}

func TestPoolWaitEndsWithTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 1})
		busy := acquire(t, p)
		defer p.Retire(busy)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := p.Acquire(ctx, "", "", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a waiting call whose context ended: %v", err)
		}
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Errorf("waited %s, want the context's 100ms", waited)
		}
		if h := p.Health(); h.Waiting != 0 {
			t.Errorf("the call still waits: %+v", h)
		}
	})
}

func TestPoolBacksOffFailedStartsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, f := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 2})
		advance(fakeStart)
		f.failWith(errors.New("deno is broken"))
		// A call that waits when the start fails learns why at once, and so
		// does every call after it: nothing is busy, so nothing says busy.
		waiting := make(chan error, 1)
		busy := acquire(t, p)
		go func() {
			_, err := p.Acquire(context.Background(), "", "", nil)
			waiting <- err
		}()
		synctest.Wait()
		p.Retire(busy)
		advance(fakeStart)
		select {
		case err := <-waiting:
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "deno is broken") {
				t.Errorf("a waiting call when workers cannot start: %v, want ErrUnavailable naming the reason", err)
			}
		default:
			t.Fatal("the waiting call was not told that no worker can start")
		}
		start := time.Now()
		_, err := p.Acquire(context.Background(), "", "", nil)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "deno is broken") {
			t.Errorf("a call while workers cannot start: %v, want ErrUnavailable naming the reason", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the call took %v to fail", d)
		}
		if h := p.Health(); h.Ready || h.Err != "deno is broken" {
			t.Errorf("health while workers cannot start: %+v", h)
		}
		f.failWith(nil)
		waitFor(t, p, "recovered", func(h Health) bool { return h.Ready && h.Err == "" })
	})
}

// TestPoolBacksOffExponentially: failed starts of a kind are retried after
// 100 ms, twice that after each further failure, up to 30 s; a start that
// succeeds resets the backoff.
func TestPoolBacksOffExponentially(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, f := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 1}, func(_ *testPool, f *fakeFleet) {
			f.failWith(errors.New("no deno"))
		})
		gaps := func() []time.Duration {
			f.mu.Lock()
			defer f.mu.Unlock()
			var d []time.Duration
			for i := 1; i < len(f.startedAt); i++ {
				d = append(d, f.startedAt[i].Sub(f.startedAt[i-1])-fakeStart)
			}
			f.startedAt = f.startedAt[len(f.startedAt)-1:]
			return d
		}
		advance(5 * time.Minute)
		want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond}
		got := gaps()
		if len(got) < len(want)+2 || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("waits between failed starts: %v, want %v and then 30s", got, want)
		}
		for _, d := range got[len(want):] {
			if d != maxBackoff {
				t.Errorf("a wait of %s after many failures, want %s", d, maxBackoff)
			}
		}
		f.failWith(nil)
		waitFor(t, p, "started", func(h Health) bool { return h.Warm == 1 })
		gaps() // from the start that worked
		f.failWith(errors.New("no deno again"))
		p.Retire(acquire(t, p))
		advance(fakeStart + 100*time.Millisecond + fakeStart)
		if got := gaps(); len(got) != 2 || got[1] != 100*time.Millisecond {
			t.Errorf("waits after a start that worked: %v, want the first of 100ms", got)
		}
	})
}

func TestPoolReplacesWorkersThatDieIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 2, Warm: 2, Queue: 1})
		for _, seen := range []bool{false, true} {
			waitFor(t, p, "had two warm workers", func(h Health) bool { return h.Warm == 2 })
			for _, w := range warmWorkers(p) {
				w.die()
			}
			if seen {
				synctest.Wait() // watchIdle sees the deaths
			}
			// Whether the pool has seen the deaths yet or not, no call gets
			// a dead worker.
			for range 2 {
				w := acquire(t, p)
				if w.Dead() {
					t.Errorf("a call got a worker that died idle (deaths seen: %v)", seen)
				}
				p.Retire(w)
			}
		}
		waitFor(t, p, "replaced them", func(h Health) bool { return h.Warm == 2 })
	})
}

func TestPoolCloseEndsItsWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, f := newTestPool(t, Config{Workers: 3, Warm: 2, Queue: 1})
		advance(fakeStart)
		busy := acquire(t, p) // its replacement starts
		synctest.Wait()
		if h := p.Health(); h.Warm != 1 || h.Busy != 1 || h.Starting != 1 {
			t.Fatalf("health before close: %+v, want one worker warm, one busy, one starting", h)
		}
		p.Close()
		synctest.Wait()
		if h := p.Health(); h.Warm != 0 {
			t.Errorf("warm workers after close: %+v", h)
		}
		if _, err := p.Acquire(context.Background(), "", "", nil); !errors.Is(err, ErrClosed) {
			t.Errorf("acquire after close: %v, want ErrClosed", err)
		}
		advance(fakeStart) // the start under way ends: its worker is killed
		if n := f.live.Load(); n != 1 {
			t.Errorf("%d workers alive after close, want the busy one", n)
		}
		// The busy worker is its call's until the call retires it.
		p.Retire(busy)
		synctest.Wait()
		if n := f.live.Load(); n != 0 {
			t.Errorf("%d workers alive after close and the last call", n)
		}
		if n := states(p); len(n) != 0 {
			t.Errorf("members left: %v", n)
		}
	})
}

func TestPoolRefusesAWaitLongerThanTheQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 100, QueueTimeout: time.Second})
		busy := acquire(t, p)
		defer p.Retire(busy)
		// Recent calls waited 300 ms per place in the queue.
		p.mu.Lock()
		p.perPlace = 300 * time.Millisecond
		p.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		// Three calls fit: the third waits about 900 ms.
		for range 3 {
			wg.Go(func() { _, _ = p.Acquire(ctx, "", "", nil) })
			synctest.Wait()
		}
		start := time.Now()
		_, err := p.Acquire(context.Background(), "", "", nil)
		if !errors.Is(err, ErrQueueTimeout) || !strings.Contains(err.Error(), "it would wait about 1.2s, longer than the queue timeout of 1s") {
			t.Errorf("a call with three before it: %v, want ErrQueueTimeout with the wait it would have needed", err)
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("refused after %s, want at once", elapsed)
		}
	})
}

func TestPoolLearnsTheWaitPerPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 10, QueueTimeout: 10 * time.Second})
		advance(fakeStart)
		busy := acquire(t, p)
		done := make(chan *fakeWorker)
		go func() {
			w, _ := p.Acquire(context.Background(), "", "", nil)
			done <- w
		}()
		advance(200 * time.Millisecond) // the wait to learn
		p.Retire(busy)
		advance(fakeStart) // the replacement
		p.Retire(<-done)
		p.mu.Lock()
		perPlace := p.perPlace
		p.mu.Unlock()
		if want := 200*time.Millisecond + fakeStart; perPlace != want {
			t.Errorf("learned %s per place after a wait of %s", perPlace, want)
		}
	})
}

func TestPoolHoldsEachPrincipalToItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 3, Warm: 3, Queue: 10, PerPrincipal: 1})
		advance(fakeStart)
		ctx := context.Background()
		first, err := p.Acquire(ctx, "alice", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Alice's second call waits, though workers are warm.
		got := make(chan *fakeWorker, 1)
		go func() {
			w, _ := p.Acquire(ctx, "alice", "", nil)
			got <- w
		}()
		synctest.Wait()
		if h := p.Health(); h.Waiting != 1 || h.Warm != 2 {
			t.Fatalf("health with alice's second call held: %+v", h)
		}
		// Bob gets a warm worker at once, and so does a call of no principal,
		// which is held to no share.
		bob, err := p.Acquire(ctx, "bob", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		anyone := acquire(t, p)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("alice's second call got a worker while her first held one")
		}
		// When her first call ends, her second has its turn.
		p.Retire(first)
		if w := <-got; w == nil {
			t.Fatal("alice's second call got no worker")
		} else {
			p.Retire(w)
		}
		p.Retire(bob)
		p.Retire(anyone)
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.served) != 0 {
			t.Errorf("the pool still keeps principals: served %v", p.served)
		}
	})
}

// TestPoolServesPrincipalsInTurn: a free worker goes to the waiting
// principal served least recently, first come first served within one.
func TestPoolServesPrincipalsInTurn(t *testing.T) {
	tests := []struct {
		name   string
		holder string   // the principal of the call that holds the one worker
		calls  []string // the principals of the calls that wait, in order
		want   string   // whom the worker serves, in order
	}{
		{"one principal, first come first served", "", []string{"a", "a", "a"}, "a a a"},
		{"the principal served least recently first", "", []string{"alice", "alice", "alice", "bob"}, "alice bob alice alice"},
		{"three principals", "", []string{"a", "a", "b", "c"}, "a b c a"},
		{"no principal waits its turn too", "", []string{"", "", "a"}, "a  "},
		{"the holder's principal last", "a", []string{"a", "b"}, "b a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 10})
				busy, err := p.Acquire(context.Background(), tt.holder, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				order := make(chan string, len(tt.calls))
				var wg sync.WaitGroup
				for _, who := range tt.calls {
					wg.Go(func() {
						w, err := p.Acquire(context.Background(), who, "", nil)
						if err != nil {
							t.Error(err)
							return
						}
						order <- who
						p.Retire(w)
					})
					synctest.Wait()
				}
				p.Retire(busy)
				wg.Wait()
				close(order)
				var got []string
				for who := range order {
					got = append(got, who)
				}
				if strings.Join(got, " ") != tt.want {
					t.Errorf("served %q, want %q", got, tt.want)
				}
			})
		})
	}
}

func TestPoolKeepsAWarmWorkerOfEachHotKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 3, Warm: 3, Queue: 10, QueueTimeout: 10 * time.Second})
		p.mu.Lock()
		p.hot = func() []string { return []string{"k1", "k2", "k3"} } // more than Warm-1
		p.refill()
		p.mu.Unlock()
		kinds := func() string {
			var ks []string
			for _, w := range warmWorkers(p) {
				ks = append(ks, "["+w.kind+"]")
			}
			slices.Sort(ks)
			return strings.Join(ks, "")
		}
		// The pool began before hot was set: three plain workers, which it keeps.
		advance(fakeStart)
		if got := kinds(); got != "[][][]" {
			t.Fatalf("warm workers %s", got)
		}
		take := func(kind string) *fakeWorker {
			t.Helper()
			w, err := p.Acquire(context.Background(), "", kind, nil)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		// As plain ones are used, hot kinds take the place of the
		// replacements: at most Warm-1 of them, so that a plain one stays.
		for range 3 {
			p.Retire(take(""))
		}
		waitFor(t, p, "rewarmed", func(h Health) bool { return h.Warm == 3 && h.Starting == 0 })
		if got := kinds(); got != "[][k1][k2]" {
			t.Fatalf("warm workers %s, want one plain and one of each of the two hottest kinds", got)
		}
		// A call of a kind gets its worker, a call of another kind a plain one.
		if w := take("k2"); w.kind != "k2" {
			t.Errorf("a call of k2 got a worker of kind %q", w.kind)
		} else {
			p.Retire(w)
		}
		if w := take("k9"); w.kind != "" {
			t.Errorf("a call of an unknown kind got a worker of kind %q", w.kind)
		} else {
			p.Retire(w)
		}
	})
}

func TestPoolRetiresAnIdleKindForAWaitingCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 2, Warm: 2, Queue: 10, QueueTimeout: 20 * time.Second})
		p.mu.Lock()
		p.hot = func() []string { return []string{"k1"} }
		p.mu.Unlock()
		advance(fakeStart)
		p.Retire(acquire(t, p)) // its replacement is of kind k1
		waitFor(t, p, "rewarmed", func(h Health) bool { return h.Warm == 2 && h.Starting == 0 })
		busy := acquire(t, p) // the plain one
		defer p.Retire(busy)
		if busy.kind != "" {
			t.Fatalf("got a worker of kind %q", busy.kind)
		}
		// The k1 worker fits no plain call: it makes way for a plain one.
		w := acquire(t, p)
		defer p.Retire(w)
		if w.kind != "" {
			t.Errorf("a plain call got a worker of kind %q", w.kind)
		}
	})
}

// TestPoolRecyclingMakesRoomForAHotKind: a full pool of recycled plain
// workers gives a slot to a hot kind that has no worker, as it did when
// each worker served one call; then it recycles again.
func TestPoolRecyclingMakesRoomForAHotKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 2, Warm: 2, Queue: 10}, func(p *testPool, _ *fakeFleet) {
			p.recycle = recycleIn(0, nil)
		})
		advance(fakeStart)
		p.mu.Lock()
		p.hot = func() []string { return []string{"k1"} }
		p.mu.Unlock()
		first := acquire(t, p)
		p.Retire(first) // not recycled: a k1 worker starts in its slot
		waitFor(t, p, "rewarmed", func(h Health) bool { return h.Warm == 2 && h.Starting == 0 })
		p.mu.Lock()
		kinds := map[string]int{}
		for _, m := range p.members {
			kinds[m.kind]++
		}
		p.mu.Unlock()
		if kinds["k1"] != 1 || kinds[""] != 1 {
			t.Fatalf("kinds of the warm workers: %v, want one of k1 and one plain", kinds)
		}
		w := acquire(t, p)
		p.Retire(w) // the kind has its worker: recycled
		synctest.Wait()
		if again := acquire(t, p); again != w {
			t.Error("a plain worker was not recycled once the hot kind had its worker")
		} else {
			p.Retire(again)
		}
	})
}

func TestPoolRestoresHalfItsWarmWorkersAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const busyFor = 30 * time.Second
		p, _ := newTestPool(t, Config{Workers: 4, Warm: 4, Queue: 8, Busy: busyFor}, func(p *testPool, f *fakeFleet) {
			f.lazy = true
			p.restore = restoreIn(0)
		})
		byState := func() [3]int {
			n := states(p)
			return [3]int{n[stateReady], n[stateRestoring], n[stateStandby]}
		}
		settles := func(what string, want [3]int) {
			t.Helper()
			eventually(t, what, func() bool { return byState() == want }, func() string {
				return fmt.Sprintf("warm workers ready, restoring, on standby: %v, want %v", byState(), want)
			})
		}
		settles("at rest", [3]int{2, 0, 2})
		for range 3 { // calls make the pool busy: every warm worker is restored
			w, err := p.Acquire(context.Background(), "", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if w.Readiness() != Restored {
				t.Errorf("a call got a worker of readiness %d while restored ones were warm", w.Readiness())
			}
			p.Retire(w)
		}
		settles("while calls come", [3]int{4, 0, 0})
		// Idle for Config.Busy: the extra restored workers are replaced
		// by workers on standby.
		start := time.Now()
		settles("idle again", [3]int{2, 0, 2})
		if idle := time.Since(start); idle < busyFor-time.Second {
			t.Errorf("back on standby after %s idle, want about %s", idle, busyFor)
		}
	})
}

func TestPoolRestoresPlainWorkersAheadOfKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 2, Warm: 2, Queue: 8}, func(p *testPool, f *fakeFleet) {
			f.lazy = true // workers of a kind start restored, as the supervisor's do
			p.hot = func() []string { return []string{"k"} }
			p.restore = restoreIn(0)
		})
		waitFor(t, p, "2 warm", func(h Health) bool { return h.Warm == 2 })
		for _, w := range warmWorkers(p) {
			if w.kind == "" && w.Readiness() != Restored {
				t.Errorf("the plain warm worker is on standby beside a worker of kind k: plain calls would wait for its restore")
			}
		}
	})
}

// A kind of worker that cannot start (a learned set whose template is
// broken) backs off alone: plain workers keep starting, and plain calls
// keep being served.
func TestPoolBacksOffEachKindAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("the set's template is broken")
		var failed atomic.Int32
		p, _ := newTestPool(t, Config{Workers: 2, Warm: 2, Queue: 10}, func(p *testPool, f *fakeFleet) {
			p.hot = func() []string { return []string{"k1"} }
			p.start = func(ctx context.Context, kind string) (*fakeWorker, error) {
				if kind == "k1" {
					failed.Add(1)
					return nil, broken
				}
				return f.start(ctx, kind)
			}
		})
		// Five failures in a row: k1 now backs off for 1.6 s, long enough for
		// the calls below to need plain workers started meanwhile.
		eventually(t, "failed to start k1 five times", func() bool { return failed.Load() >= 5 }, func() string { return "" })
		for i := range 8 {
			w, err := p.Acquire(context.Background(), "", "", nil)
			if err != nil {
				t.Fatalf("plain call %d while k1 cannot start: %v", i, err)
			}
			p.Retire(w)
		}
		if h := p.Health(); h.Err != "" {
			t.Errorf("health names k1's failure: %+v", h)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if f := p.failed["k1"]; f == nil || f.n == 0 {
			t.Errorf("k1's failed starts were not counted: %+v", f)
		}
	})
}

// TestPoolReportsThePlaceInTheQueue checks that a waiting call hears its
// place as the calls before it leave the queue, whether served or gone.
func TestPoolReportsThePlaceInTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPool(t, Config{Workers: 1, Warm: 1, Queue: 3})
		busy := acquire(t, p)
		firstCtx, giveUp := context.WithCancel(context.Background())
		defer giveUp()
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = p.Acquire(firstCtx, "", "", nil) })
		synctest.Wait()
		wg.Go(func() { p.Retire(acquire(t, p)) })
		synctest.Wait()
		var places []int // ours, as it hears them; read once it is served
		got := make(chan *fakeWorker)
		go func() {
			w, err := p.Acquire(context.Background(), "", "", func(place int) { places = append(places, place) })
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		synctest.Wait()
		giveUp() // the first leaves: 2nd
		synctest.Wait()
		p.Retire(busy) // the second is served: 1st
		wg.Wait()      // and done: ours is served
		p.Retire(<-got)
		if want := []int{3, 2, 1}; !slices.Equal(places, want) {
			t.Errorf("places %v, want %v", places, want)
		}
	})
}

// TestPoolReplacesStaleWarmWorkers: once this host's addresses change, the
// warm workers made before are replaced, one that was starting meanwhile is
// not kept, and a busy one serves its call to the end.
func TestPoolReplacesStaleWarmWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var current, made atomic.Uint64 // the generation now, and the one new workers get
		current.Store(1)
		made.Store(1)
		var oldStarts atomic.Int32 // workers started with a generation gone by
		p, _ := newTestPool(t, Config{Workers: 4, Warm: 2, Queue: 1}, func(p *testPool, f *fakeFleet) {
			p.start = func(ctx context.Context, kind string) (*fakeWorker, error) {
				w, err := f.start(ctx, kind)
				if w != nil {
					w.netGen = made.Load()
					if w.netGen != current.Load() {
						oldStarts.Add(1)
					}
				}
				return w, err
			}
			p.stale = func(w *fakeWorker) bool { return w.netGen != current.Load() }
		})
		waitFor(t, p, "had two warm workers", func(h Health) bool { return h.Warm == 2 })
		busy := acquire(t, p)
		waitFor(t, p, "had two warm workers beside a busy one", func(h Health) bool { return h.Warm == 2 && h.Starting == 0 })
		before := warmWorkers(p)

		current.Store(2)
		made.Store(2)
		p.RetireStale()
		waitFor(t, p, "replaced its warm workers", func(h Health) bool {
			return h.Warm == 2 && !slices.ContainsFunc(warmWorkers(p), func(w *fakeWorker) bool { return slices.Contains(before, w) })
		})
		for _, w := range warmWorkers(p) {
			if w.netGen != 2 {
				t.Errorf("a warm worker of generation %d, want 2", w.netGen)
			}
		}
		if busy.Dead() {
			t.Error("the busy worker was ended under its call")
		}
		p.Retire(busy)

		// The addresses change again while workers start with the old ones:
		// none of those is kept.
		current.Store(3)
		p.RetireStale()
		eventually(t, "started workers with the old addresses", func() bool { return oldStarts.Load() >= 3 }, func() string { return "" })
		for _, w := range warmWorkers(p) {
			if w.netGen != 3 {
				t.Errorf("a warm worker of generation %d while the addresses are of 3", w.netGen)
			}
		}
		made.Store(3)
		waitFor(t, p, "had two warm workers of the new addresses", func(h Health) bool { return h.Warm == 2 })
	})
}
