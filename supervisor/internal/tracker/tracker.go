// Package tracker counts what runs in a supervisor, the calls from outside
// and the goroutines it starts, so that closing it can wait until nothing
// is left. It owns that count and the rule of when a goroutine may still
// start; it knows nothing of workers, pools or calls, and must not: every
// package of the supervisor hands its goroutines to one Tracker.
package tracker

import (
	"errors"
	"sync"
)

// ErrClosed is what calls, and what waits for the supervisor's work, get
// once its Close has begun.
var ErrClosed = errors.New("the supervisor is closed: it runs no more calls")

// Tracker counts what runs in a supervisor, the calls from outside and the
// goroutines it starts, so that Close can wait until nothing is left. Once
// Close has begun it admits no new call; the goroutines of what it admitted
// still start, since they kill workers and reap processes, until nothing is
// left: then it starts nothing more. Its zero value is ready for use.
type Tracker struct {
	mu      sync.Mutex
	closing bool
	n       int           // calls and goroutines running
	idle    chan struct{} // made by Shut; closed once nothing runs
}

// Enter admits a call from outside (Run, NewSession, Start…), which must
// Leave when it returns; it reports false once Close has begun.
func (t *Tracker) Enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.n++
	return true
}

// Leave ends what Enter admitted.
func (t *Tracker) Leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.closing && t.n == 0 {
		close(t.idle)
	}
}

// Go runs f on a goroutine of its own, and reports whether it did. It
// does, always, when called from a call or goroutine that the tracker
// counts: what that starts is waited for too. It does not once Close has
// begun and nothing runs (a timer firing late).
func (t *Tracker) Go(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing && t.n == 0 {
		return false
	}
	t.n++
	go func() {
		defer t.Leave()
		f()
	}()
	return true
}

// Shut admits no more calls, and returns a channel closed once nothing
// runs. It may be called more than once.
func (t *Tracker) Shut() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closing {
		t.closing = true
		t.idle = make(chan struct{})
		if t.n == 0 {
			close(t.idle)
		}
	}
	return t.idle
}
