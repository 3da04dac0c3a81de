package supervisor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
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
}

// pool hands out warm workers. Every worker is in exactly one state:
// starting, warm (idle, in warm) or busy (taken by a call). Once begun, the
// pool starts workers while fewer than Warm are warm or starting, plus one
// per waiting call, never more than Workers alive at once.
//
// It knows workers only as processes: start, its one way to get a worker,
// is the seam that tests replace.
type pool struct {
	cfg      poolConfig
	start    func(ctx context.Context) (*worker, error)
	ctx      context.Context // the supervisor's: ends when it closes
	wg       *sync.WaitGroup // the supervisor's: every goroutine that starts or kills workers
	log      *zap.Logger
	restarts prometheus.Counter
	wait     prometheus.Observer

	mu       sync.Mutex
	begun    bool // start may be called: the runtime exists
	warm     []*worker
	starting int
	busy     int
	dying    int          // retired, not yet reaped: still counted against Workers
	waiters  []chan grant // calls waiting for a worker, first come first served
	closed   bool

	failures int   // consecutive failed starts
	lastErr  error // of the last failed start
	retrying bool  // a backoff timer is pending; no starts until it fires
	backoff  time.Duration
}

// grant is what a waiting call gets: a worker, or why none will come.
type grant struct {
	w   *worker
	err error
}

// unavailable says why no call can be served now: no worker is warm or
// starting and the last start failed, so waiting would only end in the queue
// timeout. Nil when calls may wait. p.mu must be held.
func (p *pool) unavailable() error {
	if p.failures == 0 || len(p.warm) > 0 || p.starting > 0 {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, p.lastErr)
}

// begin lets the pool start workers.
func (p *pool) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begun = true
	p.refill()
}

// acquire returns a warm worker for a call, waiting in the queue if all are
// busy. The worker is the caller's until it calls retire.
func (p *pool) acquire(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	for len(p.warm) > 0 {
		w := p.warm[0]
		p.warm = p.warm[1:]
		if w.dead() {
			// Died while idle, a moment before watchIdle would have seen it;
			// the refill below replaces it.
			p.restarts.Inc()
			p.wg.Go(w.kill) // releases its connection
			continue
		}
		p.busy++
		p.refill()
		p.mu.Unlock()
		p.wait.Observe(0)
		return w, nil
	}
	if err := p.unavailable(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if len(p.waiters) >= p.cfg.Queue {
		p.mu.Unlock()
		return nil, ErrQueueFull
	}
	ch := make(chan grant, 1)
	p.waiters = append(p.waiters, ch)
	p.refill()
	p.mu.Unlock()

	start := time.Now()
	var timeout <-chan time.Time
	if p.cfg.QueueTimeout > 0 {
		t := time.NewTimer(p.cfg.QueueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case g := <-ch:
		p.wait.Observe(time.Since(start).Seconds())
		return g.w, g.err
	case <-timeout:
		err = ErrQueueTimeout
		if health := p.health(); health.Err != "" {
			err = fmt.Errorf("%w: %s", ErrUnavailable, health.Err)
		}
	case <-ctx.Done():
		err = fmt.Errorf("waiting for a free worker: %w", context.Cause(ctx))
	case <-p.ctx.Done():
		err = errClosed
	}
	p.wait.Observe(time.Since(start).Seconds())

	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, ch); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return nil, err
	}
	// A worker was handed over as we gave up: it never ran code, so it
	// goes to the next caller.
	if g := <-ch; g.w != nil {
		p.busy--
		p.offer(g.w)
	}
	return nil, err
}

// retire ends a worker after its call: one call per interpreter.
func (p *pool) retire(w *worker) {
	p.mu.Lock()
	p.busy--
	p.dying++
	p.mu.Unlock()
	p.wg.Go(func() {
		w.kill()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.dying--
		p.refill()
	})
}

// discard ends a worker taken for a call that turned out not to be fit for
// one (it did not answer): unlike retire, it counts as a restart.
func (p *pool) discard(w *worker, why error) {
	p.restarts.Inc()
	p.log.Warn("a warm worker did not answer; replacing it", zap.Int("pid", w.proc.Pid()), zap.Error(why))
	p.retire(w)
}

// offer gives a ready worker to the first waiting call, or keeps it warm.
// p.mu must be held.
func (p *pool) offer(w *worker) {
	if p.closed {
		p.wg.Go(w.kill)
		return
	}
	if len(p.waiters) > 0 {
		ch := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.busy++
		ch <- grant{w: w}
		return
	}
	p.warm = append(p.warm, w)
}

// refill starts the workers the pool lacks. p.mu must be held.
func (p *pool) refill() {
	if p.closed || p.retrying || !p.begun {
		return
	}
	live := len(p.warm) + p.starting + p.busy + p.dying
	need := len(p.waiters) + p.cfg.Warm - len(p.warm) - p.starting
	for ; need > 0 && live < p.cfg.Workers; need, live = need-1, live+1 {
		p.starting++
		p.wg.Go(p.startOne)
	}
}

// startOne boots one worker and offers it, or schedules a retry.
func (p *pool) startOne() {
	w, err := p.start(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if err != nil {
		if p.closed {
			return
		}
		p.failures++
		p.lastErr = err
		p.backoff = min(max(2*p.backoff, minBackoff), maxBackoff)
		p.restarts.Inc()
		p.log.Error("worker failed to start", zap.Error(err), zap.Int("failures", p.failures), zap.Duration("retry_in", p.backoff))
		p.retrying = true
		// Calls waiting for a worker that cannot come learn why now.
		if err := p.unavailable(); err != nil {
			for _, ch := range p.waiters {
				ch <- grant{err: err}
			}
			p.waiters = nil
		}
		time.AfterFunc(p.backoff, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.retrying = false
			p.refill()
		})
		return
	}
	if p.failures > 0 {
		p.log.Info("workers start again", zap.Int("after_failures", p.failures))
	}
	p.failures, p.lastErr, p.backoff = 0, nil, 0
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
	for _, w := range p.warm {
		p.wg.Go(w.kill)
	}
	p.warm = nil
}

// health reports the pool's state.
func (p *pool) health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := Health{Warm: len(p.warm), Busy: p.busy, Starting: p.starting, Waiting: len(p.waiters)}
	h.Ready = h.Warm > 0
	if p.failures > 0 && h.Warm+h.Busy == 0 {
		h.Err = p.lastErr.Error()
	}
	return h
}
