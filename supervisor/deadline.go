package supervisor

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
)

// deadline is a call's one time limit (--timeout): it runs from the call's
// start through fetching, installing and running, and stops only while the
// call waits for a free worker, which is the server's doing, not the call's,
// and while its code waits for the answers to its questions (runClock),
// which are the model's or the person's.
type deadline struct {
	at time.Time // zero: no limit
}

// newDeadline starts the limit of a call that started at start.
func (c Config) newDeadline(start time.Time) *deadline {
	if c.Timeout <= 0 {
		return &deadline{}
	}
	return &deadline{at: start.Add(c.Timeout)}
}

// extend moves the limit by d, the time the call spent waiting.
func (d *deadline) extend(by time.Duration) {
	if !d.at.IsZero() {
		d.at = d.at.Add(by)
	}
}

// context is ctx ending at the limit.
func (d *deadline) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.at.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.at)
}

// passed reports whether the limit has been reached.
func (d *deadline) passed() bool { return !d.at.IsZero() && !time.Now().Before(d.at) }

// left is the time that remains, and false when there is no limit.
func (d *deadline) left() (time.Duration, bool) {
	if d.at.IsZero() {
		return 0, false
	}
	return time.Until(d.at), true
}

// runClock stops a run at its deadline, calling fire, and charges the time
// the run's code waits for answers (see askRelay) by the CPU time its
// worker uses meanwhile, not by the clock: the model's time, or the
// person's, is not the code's, but async code that computes while a round
// waits (one task asks, another loops) is charged for it, and stopped at
// its limit during the wait. Rounds may wait at once (async code that
// gathers llm_query calls): their waits count once. The progress clock
// (callProgress) stands still while any waits.
type runClock struct {
	mu       sync.Mutex
	limit    *deadline
	progress *callProgress
	fire     func()
	// cpu reads the worker's CPU time so far; nil charges a wait nothing.
	cpu     func() (time.Duration, error)
	timer   *time.Timer // nil: no limit
	stopped bool

	// While rounds wait: how many, when the first began, the worker's
	// CPU time then, the progress clock's resume and the CPU watch's quit.
	waiting  int
	since    time.Time
	cpuSince time.Duration
	resume   func()
	quit     chan struct{}
}

// cpuWatchEvery is how often a waiting run's CPU time is read, as often as
// a session's between calls.
const cpuWatchEvery = worker.SessionCPUEvery

// start arms the limit of a run, reported to progress (nil: none); fire
// stops the run, and cpu reads its worker's CPU time (nil: none).
func (d *deadline) start(progress *callProgress, fire func(), cpu func() (time.Duration, error)) *runClock {
	c := &runClock{limit: d, progress: progress, fire: fire, cpu: cpu}
	if left, ok := d.left(); ok {
		c.timer = time.AfterFunc(max(left, 0), fire)
	}
	return c
}

// pause stops the clock while a round waits for its answers; the returned
// function starts it again, once, the limit moved by the part of the wait
// the worker did not spend computing.
func (c *runClock) pause() (resume func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == 0 {
		c.since = time.Now()
		c.resume = c.progress.wait()
		c.cpuSince = c.readCPU()
		if c.timer != nil && c.timer.Stop() && c.cpu != nil {
			left, _ := c.limit.left()
			c.quit = make(chan struct{})
			go c.watchCPU(c.cpuSince, left, c.quit)
		}
	}
	c.waiting++
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.waiting--; c.waiting > 0 {
			return
		}
		c.limit.extend(max(time.Since(c.since)-(c.readCPU()-c.cpuSince), 0))
		c.resume()
		if c.quit != nil {
			close(c.quit)
			c.quit = nil
		}
		if c.timer != nil && !c.stopped {
			left, _ := c.limit.left()
			c.timer.Reset(max(left, 0))
		}
	})
}

// readCPU is the worker's CPU time, 0 when it cannot be read or there is
// no reader: the wait is then charged nothing.
func (c *runClock) readCPU() time.Duration {
	if c.cpu == nil {
		return 0
	}
	t, err := c.cpu()
	if err != nil {
		return 0
	}
	return t
}

// watchCPU fires once the worker has used left of CPU time since it used
// from, until quit is closed: the run computed through its limit while a
// round waited.
func (c *runClock) watchCPU(from, left time.Duration, quit <-chan struct{}) {
	tick := time.NewTicker(cpuWatchEvery)
	defer tick.Stop()
	for {
		select {
		case <-quit:
			return
		case <-tick.C:
			if used, err := c.cpu(); err == nil && used-from >= left {
				c.fire()
				return
			}
		}
	}
}

// stop disarms the limit: the run is over.
func (c *runClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.quit != nil {
		close(c.quit)
		c.quit = nil
	}
}
