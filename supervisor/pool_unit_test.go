package supervisor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// standIns is the pool's seam in these tests: each worker is this test
// binary as a helper process (see TestHelperProcess) started through the
// platform layer, so the pool is tested alone, fast, with real processes.
type standIns struct {
	fail atomic.Pointer[error] // while set, starts fail with it
	lazy bool                  // workers start on standby
	live atomic.Int32
	peak atomic.Int32
}

func (f *standIns) start(ctx context.Context, kind string) (*worker, error) {
	if err := f.fail.Load(); err != nil {
		return nil, *err
	}
	n := f.live.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	w, err := startHelperWorker(func() { f.live.Add(-1) })
	if err != nil {
		f.live.Add(-1)
		return nil, err
	}
	w.kind = kind
	if f.lazy && kind == "" {
		w.standby = &standby{done: make(chan struct{})}
	}
	return w, nil
}

func (f *standIns) failWith(err error) {
	if err == nil {
		f.fail.Store(nil)
	} else {
		f.fail.Store(&err)
	}
}

// newTestPool returns a begun pool of stand-in workers, set up first by
// setup; its cleanup closes it and checks that no process is left.
func newTestPool(t *testing.T, cfg poolConfig, setup ...func(*pool, *standIns)) (*pool, *standIns) {
	t.Helper()
	f := &standIns{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg tracker
	p := &pool{
		cfg:      cfg,
		start:    f.start,
		ctx:      ctx,
		wg:       &wg,
		log:      zaptest.NewLogger(t),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "restarts"}),
		wait:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wait"}),
	}
	t.Cleanup(func() {
		cancel()
		p.close()
		<-wg.shut()
		if n := f.live.Load(); n != 0 {
			t.Errorf("%d stand-in workers left after close", n)
		}
	})
	for _, set := range setup {
		set(p, f)
	}
	p.begin()
	return p, f
}

// waitFor polls the pool's health until ok, for at most 10 s.
func waitFor(t *testing.T, p *pool, what string, ok func(Health) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h := p.health(); !ok(h); h = p.health() {
		if time.Now().After(deadline) {
			t.Fatalf("pool never %s: %+v", what, h)
		}
		time.Sleep(5 * time.Millisecond) // bounded polling of the pool's state
	}
}

func acquire(t *testing.T, p *pool) *worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := p.acquire(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestPoolKeepsWarmWorkersWithinTheLiveLimit(t *testing.T) {
	p, f := newTestPool(t, poolConfig{Workers: 3, Warm: 1, Queue: 1, QueueTimeout: 200 * time.Millisecond})
	waitFor(t, p, "had one warm worker", func(h Health) bool { return h.Warm == 1 && h.Starting == 0 })
	if n := f.live.Load(); n != 1 {
		t.Errorf("%d workers alive with Warm 1 and no call, want 1", n)
	}
	// Beyond the warm one, workers start on demand up to the live limit.
	var taken []*worker
	for range 3 {
		taken = append(taken, acquire(t, p))
	}
	if _, err := p.acquire(context.Background(), "", ""); !errors.Is(err, ErrQueueTimeout) {
		t.Errorf("a fourth call with three busy workers: %v, want ErrQueueTimeout", err)
	}
	for _, w := range taken {
		if w.dead() {
			t.Error("a call got a dead worker")
		}
		p.retire(w)
	}
	waitFor(t, p, "settled after the calls", func(h Health) bool { return h.Warm == 1 && h.Busy == 0 && h.Starting == 0 })
	if peak := f.peak.Load(); peak > 3 {
		t.Errorf("%d workers alive at once, want at most 3", peak)
	}
}

func TestPoolQueueIsFirstComeFirstServed(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 2})
	busy := acquire(t, p)
	order := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			w := acquire(t, p)
			order <- i
			p.retire(w)
		})
		waitFor(t, p, "queued the call", func(h Health) bool { return h.Waiting == i+1 })
	}
	if _, err := p.acquire(context.Background(), "", ""); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a call beyond the queue: %v, want ErrQueueFull", err)
	}
	p.retire(busy)
	wg.Wait()
	if first, second := <-order, <-order; first != 0 || second != 1 {
		t.Errorf("served %d then %d, want 0 then 1", first, second)
	}
}

func TestPoolWaitEndsWithTheCallersContext(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 1})
	busy := acquire(t, p)
	defer p.retire(busy)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.acquire(ctx, "", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a waiting call whose context ended: %v", err)
	}
	if h := p.health(); h.Waiting != 0 {
		t.Errorf("the call still waits: %+v", h)
	}
}

func TestPoolBacksOffFailedStartsAndRecovers(t *testing.T) {
	p, f := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 2})
	waitFor(t, p, "warmed up", func(h Health) bool { return h.Warm == 1 })
	f.failWith(errors.New("deno is broken"))
	// A call that waits when the start fails learns why at once, and so
	// does every call after it: nothing is busy, so nothing says busy.
	waiting := make(chan error, 1)
	busy := acquire(t, p)
	go func() {
		_, err := p.acquire(context.Background(), "", "")
		waiting <- err
	}()
	waitFor(t, p, "queued the call", func(h Health) bool { return h.Waiting == 1 })
	p.retire(busy)
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "deno is broken") {
			t.Errorf("a waiting call when workers cannot start: %v, want ErrUnavailable naming the reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was not told that no worker can start")
	}
	start := time.Now()
	_, err := p.acquire(context.Background(), "", "")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "deno is broken") {
		t.Errorf("a call while workers cannot start: %v, want ErrUnavailable naming the reason", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the call took %v to fail", d)
	}
	if h := p.health(); h.Ready || h.Err != "deno is broken" {
		t.Errorf("health while workers cannot start: %+v", h)
	}
	f.failWith(nil)
	waitFor(t, p, "recovered", func(h Health) bool { return h.Ready && h.Err == "" })
}

func TestPoolReplacesWorkersThatDieIdle(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 2, Warm: 2, Queue: 1})
	waitFor(t, p, "had two warm workers", func(h Health) bool { return h.Warm == 2 })
	p.mu.Lock()
	idle := append([]*worker(nil), p.warm...)
	p.mu.Unlock()
	for _, w := range idle {
		if err := w.proc.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	// Whether the pool has seen the deaths yet or not, no call gets a
	// dead worker.
	for range 2 {
		w := acquire(t, p)
		if w.dead() {
			t.Error("a call got a worker that died idle")
		}
		p.retire(w)
	}
	waitFor(t, p, "replaced them", func(h Health) bool { return h.Warm == 2 })
}

func TestPoolCloseEndsItsWorkers(t *testing.T) {
	p, f := newTestPool(t, poolConfig{Workers: 2, Warm: 2, Queue: 1})
	waitFor(t, p, "had two warm workers", func(h Health) bool { return h.Warm == 2 })
	p.close()
	if _, err := p.acquire(context.Background(), "", ""); !errors.Is(err, errClosed) {
		t.Errorf("acquire after close: %v, want errClosed", err)
	}
	<-p.wg.shut()
	if n := f.live.Load(); n != 0 {
		t.Errorf("%d workers alive after close", n)
	}
}

func TestPoolRefusesAWaitLongerThanTheQueueTimeout(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 100, QueueTimeout: time.Second})
	busy := acquire(t, p)
	defer p.retire(busy)
	// Recent calls waited 300 ms per place in the queue.
	p.mu.Lock()
	p.perPlace = 300 * time.Millisecond
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// Three calls fit: the third waits about 900 ms.
	for i := range 3 {
		wg.Go(func() { _, _ = p.acquire(ctx, "", "") })
		waitFor(t, p, "queued the call", func(h Health) bool { return h.Waiting == i+1 })
	}
	start := time.Now()
	_, err := p.acquire(context.Background(), "", "")
	if !errors.Is(err, ErrQueueTimeout) || !strings.Contains(err.Error(), "it would wait about 1.2s, longer than the queue timeout of 1s") {
		t.Errorf("a call with three before it: %v, want ErrQueueTimeout with the wait it would have needed", err)
	}
	if elapsed := time.Since(start); elapsed > 500*time.Millisecond {
		t.Errorf("refused after %s, want at once", elapsed)
	}
}

func TestPoolLearnsTheWaitPerPlace(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 10, QueueTimeout: 10 * time.Second})
	waitFor(t, p, "warmed up", func(h Health) bool { return h.Warm == 1 })
	busy := acquire(t, p)
	done := make(chan *worker)
	go func() {
		w, _ := p.acquire(context.Background(), "", "")
		done <- w
	}()
	waitFor(t, p, "queued the call", func(h Health) bool { return h.Waiting == 1 })
	time.Sleep(200 * time.Millisecond) // the wait to learn
	p.retire(busy)
	p.retire(<-done)
	p.mu.Lock()
	perPlace := p.perPlace
	p.mu.Unlock()
	if perPlace < 200*time.Millisecond || perPlace > 10*time.Second {
		t.Errorf("learned %s per place after a wait of at least 200ms", perPlace)
	}
}

func TestPoolHoldsEachPrincipalToItsShare(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 3, Warm: 3, Queue: 10, PerPrincipal: 1})
	waitFor(t, p, "warmed up", func(h Health) bool { return h.Warm == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := p.acquire(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	// Alice's second call waits, though workers are warm.
	got := make(chan *worker, 1)
	go func() {
		w, _ := p.acquire(ctx, "alice", "")
		got <- w
	}()
	waitFor(t, p, "held alice's second call", func(h Health) bool { return h.Waiting == 1 && h.Warm == 2 })
	// Bob gets a warm worker at once, and so does a call of no principal,
	// which is held to no share.
	bob, err := p.acquire(ctx, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	anyone := acquire(t, p)
	select {
	case <-got:
		t.Fatal("alice's second call got a worker while her first held one")
	case <-time.After(100 * time.Millisecond):
	}
	// When her first call ends, her second has its turn.
	p.retire(first)
	if w := <-got; w == nil {
		t.Fatal("alice's second call got no worker")
	} else {
		p.retire(w)
	}
	p.retire(bob)
	p.retire(anyone)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.running)+len(p.served)+len(p.holders) != 0 {
		t.Errorf("the pool still keeps principals: running %v, served %v, %d holders", p.running, p.served, len(p.holders))
	}
}

func TestPoolServesPrincipalsInTurn(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 1, Warm: 1, Queue: 10})
	busy := acquire(t, p)
	order := make(chan string, 4)
	var wg sync.WaitGroup
	for i, who := range []string{"alice", "alice", "alice", "bob"} {
		wg.Go(func() {
			w, err := p.acquire(context.Background(), who, "")
			if err != nil {
				t.Error(err)
				return
			}
			order <- who
			p.retire(w)
		})
		waitFor(t, p, "queued the call", func(h Health) bool { return h.Waiting == i+1 })
	}
	p.retire(busy)
	wg.Wait()
	close(order)
	var got []string
	for who := range order {
		got = append(got, who)
	}
	// Bob came last but is served second: alice was just served.
	if strings.Join(got, " ") != "alice bob alice alice" {
		t.Errorf("served %v, want alice bob alice alice", got)
	}
}

func TestPoolKeepsAWarmWorkerOfEachHotKind(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 3, Warm: 3, Queue: 10, QueueTimeout: 10 * time.Second})
	p.mu.Lock()
	p.hot = func() []string { return []string{"k1", "k2", "k3"} } // more than Warm-1
	p.refill()
	p.mu.Unlock()
	kinds := func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		var ks []string
		for _, w := range p.warm {
			ks = append(ks, "["+w.kind+"]")
		}
		slices.Sort(ks)
		return strings.Join(ks, "")
	}
	// The pool began before hot was set: three plain workers, which it keeps.
	waitFor(t, p, "warmed up", func(h Health) bool { return h.Warm == 3 })
	if got := kinds(); got != "[][][]" {
		t.Fatalf("warm workers %s", got)
	}
	take := func(kind string) *worker {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w, err := p.acquire(ctx, "", kind)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// As plain ones are used, hot kinds take the place of the replacements:
	// at most Warm-1 of them, so that a plain one stays.
	for range 3 {
		p.retire(take(""))
	}
	waitFor(t, p, "rewarmed", func(h Health) bool { return h.Warm == 3 && h.Starting == 0 })
	if got := kinds(); got != "[][k1][k2]" {
		t.Fatalf("warm workers %s, want one plain and one of each of the two hottest kinds", got)
	}
	// A call of a kind gets its worker, a call of another kind a plain one.
	if w := take("k2"); w.kind != "k2" {
		t.Errorf("a call of k2 got a worker of kind %q", w.kind)
	} else {
		p.retire(w)
	}
	if w := take("k9"); w.kind != "" {
		t.Errorf("a call of an unknown kind got a worker of kind %q", w.kind)
	} else {
		p.retire(w)
	}
}

func TestPoolRetiresAnIdleKindForAWaitingCall(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 2, Warm: 2, Queue: 10, QueueTimeout: 20 * time.Second})
	p.mu.Lock()
	p.hot = func() []string { return []string{"k1"} }
	p.mu.Unlock()
	waitFor(t, p, "warmed up", func(h Health) bool { return h.Warm == 2 })
	p.retire(acquire(t, p)) // its replacement is of kind k1
	waitFor(t, p, "rewarmed", func(h Health) bool { return h.Warm == 2 && h.Starting == 0 })
	busy := acquire(t, p) // the plain one
	defer p.retire(busy)
	if busy.kind != "" {
		t.Fatalf("got a worker of kind %q", busy.kind)
	}
	// The k1 worker fits no plain call: it makes way for a plain one.
	w := acquire(t, p)
	defer p.retire(w)
	if w.kind != "" {
		t.Errorf("a plain call got a worker of kind %q", w.kind)
	}
}

func TestPoolRestoresHalfItsWarmWorkersAhead(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 4, Warm: 4, Queue: 8, Busy: 300 * time.Millisecond}, func(p *pool, f *standIns) {
		f.lazy = true
		p.restore = func(w *worker) { // at once, as a restore that is quick
			if w.standby.asked.CompareAndSwap(false, true) {
				close(w.standby.done)
			}
		}
	})
	byReadiness := func() [3]int {
		p.mu.Lock()
		defer p.mu.Unlock()
		var n [3]int
		for _, w := range p.warm {
			n[w.readiness()]++
		}
		return n
	}
	settles := func(what string, want [3]int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for byReadiness() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: warm workers restored, being restored, on standby: %v, want %v", what, byReadiness(), want)
			}
			time.Sleep(10 * time.Millisecond) // bounded polling of the pool's state
		}
	}
	settles("at rest", [3]int{2, 0, 2})
	for range 3 { // calls make the pool busy: every warm worker is restored
		w, err := p.acquire(context.Background(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		if w.readiness() != restored {
			t.Errorf("a call got a worker of readiness %d while restored ones were warm", w.readiness())
		}
		p.retire(w)
	}
	settles("while calls come", [3]int{4, 0, 0})
	// Idle for poolConfig.Busy: the extra restored workers are replaced by
	// workers on standby.
	settles("idle again", [3]int{2, 0, 2})
}

func TestPoolRestoresPlainWorkersAheadOfKinds(t *testing.T) {
	p, _ := newTestPool(t, poolConfig{Workers: 2, Warm: 2, Queue: 8}, func(p *pool, f *standIns) {
		f.lazy = true // workers of a kind start restored, as the supervisor's do
		p.hot = func() []string { return []string{"k"} }
		p.restore = func(w *worker) {
			if w.standby.asked.CompareAndSwap(false, true) {
				close(w.standby.done)
			}
		}
	})
	waitFor(t, p, "2 warm", func(h Health) bool { return h.Warm == 2 })
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.warm {
		if w.kind == "" && w.readiness() != restored {
			t.Errorf("the plain warm worker is on standby beside a worker of kind k: plain calls would wait for its restore")
		}
	}
}

// A kind of worker that cannot start (a learned set whose template is
// broken) backs off alone: plain workers keep starting, and plain calls
// keep being served.
func TestPoolBacksOffEachKindAlone(t *testing.T) {
	broken := errors.New("the set's template is broken")
	var failed atomic.Int32
	p, _ := newTestPool(t, poolConfig{Workers: 2, Warm: 2, Queue: 10}, func(p *pool, f *standIns) {
		p.hot = func() []string { return []string{"k1"} }
		p.start = func(ctx context.Context, kind string) (*worker, error) {
			if kind == "k1" {
				failed.Add(1)
				return nil, broken
			}
			return f.start(ctx, kind)
		}
	})
	// Five failures in a row: k1 now backs off for 1.6 s, long enough for
	// the calls below to need plain workers started meanwhile.
	waitFor(t, p, "failed to start k1 five times", func(Health) bool { return failed.Load() >= 5 })
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w, err := p.acquire(ctx, "", "")
		cancel()
		if err != nil {
			t.Fatalf("plain call %d while k1 cannot start: %v", i, err)
		}
		p.retire(w)
	}
	if h := p.health(); h.Err != "" {
		t.Errorf("health names k1's failure: %+v", h)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.failed["k1"]; f == nil || f.n == 0 {
		t.Errorf("k1's failed starts were not counted: %+v", f)
	}
}
