package supervisor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Backoff of failed worker starts.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// pool hands out warm workers. Every worker is in exactly one state:
// starting, warm (idle, in warm) or busy (taken by a call). The pool starts
// workers while fewer than Warm are warm or starting, plus one per waiting
// call, never more than Workers alive at once.
type pool struct {
	mu       sync.Mutex
	warm     []*worker
	starting int
	busy     int
	dying    int            // retired, not yet reaped: still counted against Workers
	waiters  []chan *worker // calls waiting for a worker, first come first served
	closed   bool

	failures int   // consecutive failed starts
	lastErr  error // of the last failed start
	retrying bool  // a backoff timer is pending; no starts until it fires
	backoff  time.Duration
}

// acquire returns a warm worker for a call, waiting in the queue if all are
// busy. The worker is the caller's until it calls retire.
func (s *Supervisor) acquire(ctx context.Context) (*worker, error) {
	p := &s.pool
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
			s.metrics.restarts.Inc()
			s.wg.Go(w.kill) // releases its connection
			continue
		}
		p.busy++
		s.refill()
		p.mu.Unlock()
		s.metrics.poolWait.Observe(0)
		return w, nil
	}
	if len(p.waiters) >= s.cfg.Queue {
		p.mu.Unlock()
		return nil, ErrQueueFull
	}
	ch := make(chan *worker, 1)
	p.waiters = append(p.waiters, ch)
	s.refill()
	p.mu.Unlock()

	start := time.Now()
	var timeout <-chan time.Time
	if s.cfg.QueueTimeout > 0 {
		t := time.NewTimer(s.cfg.QueueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case w := <-ch:
		s.metrics.poolWait.Observe(time.Since(start).Seconds())
		return w, nil
	case <-timeout:
		err = ErrQueueTimeout
		if health := s.Health(); health.Err != "" {
			err = fmt.Errorf("%w: workers cannot start: %s", ErrQueueTimeout, health.Err)
		}
	case <-ctx.Done():
		err = fmt.Errorf("waiting for a free worker: %w", context.Cause(ctx))
	case <-s.ctx.Done():
		err = errClosed
	}
	s.metrics.poolWait.Observe(time.Since(start).Seconds())

	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, ch); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return nil, err
	}
	// A worker was handed over as we gave up: it never ran code, so it
	// goes to the next caller.
	p.busy--
	s.offer(<-ch)
	return nil, err
}

// retire ends a worker after its call: one call per interpreter.
func (s *Supervisor) retire(w *worker) {
	p := &s.pool
	p.mu.Lock()
	p.busy--
	p.dying++
	p.mu.Unlock()
	s.wg.Go(func() {
		w.kill()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.dying--
		s.refill()
	})
}

// offer gives a ready worker to the first waiting call, or keeps it warm.
// p.mu must be held.
func (s *Supervisor) offer(w *worker) {
	p := &s.pool
	if p.closed {
		s.wg.Go(w.kill)
		return
	}
	if len(p.waiters) > 0 {
		ch := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.busy++
		ch <- w
		return
	}
	p.warm = append(p.warm, w)
}

// refill starts the workers the pool lacks. p.mu must be held.
func (s *Supervisor) refill() {
	p := &s.pool
	if p.closed || p.retrying || s.rt == nil {
		return
	}
	live := len(p.warm) + p.starting + p.busy + p.dying
	need := len(p.waiters) + s.cfg.Warm - len(p.warm) - p.starting
	for ; need > 0 && live < s.cfg.Workers; need, live = need-1, live+1 {
		p.starting++
		s.wg.Go(s.startWorker)
	}
}

// startWorker boots one worker and offers it, or schedules a retry.
func (s *Supervisor) startWorker() {
	w, err := s.spawn(s.ctx, s.rt, false, "")
	p := &s.pool
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
		s.metrics.restarts.Inc()
		s.log.Error("worker failed to start", zap.Error(err), zap.Int("failures", p.failures), zap.Duration("retry_in", p.backoff))
		p.retrying = true
		time.AfterFunc(p.backoff, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.retrying = false
			s.refill()
		})
		return
	}
	if p.failures > 0 {
		s.log.Info("workers start again", zap.Int("after_failures", p.failures))
	}
	p.failures, p.lastErr, p.backoff = 0, nil, 0
	if !w.restored && s.rt.snapshot != "" {
		s.remakeSnapshot()
	}
	s.offer(w)
	s.wg.Go(func() { s.watchIdle(w) })
	s.refill()
}

// watchIdle replaces a warm worker that dies before a call takes it.
func (s *Supervisor) watchIdle(w *worker) {
	<-w.exited
	p := &s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.warm, w); i >= 0 {
		p.warm = slices.Delete(p.warm, i, i+1)
		s.wg.Go(w.kill) // releases its connection
		if !p.closed {
			s.metrics.restarts.Inc()
			s.log.Warn("idle worker died", zap.String("status", w.exitStatus()), zap.String("stderr", w.stderrTail()))
			s.refill()
		}
	}
}

// closePool stops starting workers and kills the warm ones; busy workers
// are stopped by their calls, which see the supervisor's context end.
func (s *Supervisor) closePool() {
	p := &s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.warm {
		s.wg.Go(w.kill)
	}
	p.warm = nil
}

// Health reports the pool's state, for readiness checks.
func (s *Supervisor) Health() Health {
	p := &s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	h := Health{Warm: len(p.warm), Busy: p.busy, Starting: p.starting, Waiting: len(p.waiters)}
	h.Ready = h.Warm > 0
	if p.failures > 0 && h.Warm+h.Busy == 0 {
		h.Err = p.lastErr.Error()
	}
	return h
}
