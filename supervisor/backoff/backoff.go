// Package backoff is the one exponential backoff of the program: the
// supervisor's pool waits with it before it starts a kind of worker again
// after failed starts, the front end's toolbox before it connects again to
// a tool server that is down, and an SSE session's notifier while the
// session's event queue is full. It is a leaf that imports only time, under
// supervisor, the lowest package that the front end and the supervisor both
// use, so that none of them needs another's package for it.
//
// A library (github.com/cenkalti/backoff) would bring jitter and elapsed
// time limits that none of them wants, for the few lines here.
package backoff

import "time"

// Backoff is the wait before the next attempt while attempts fail: Min
// first, then twice the wait before, up to Max. Its zero value waits 0; a
// Backoff is not safe for concurrent use, its owner guards it.
type Backoff struct {
	// Min is the first wait, and the wait after Reset.
	Min time.Duration
	// Max bounds every wait; below Min, Min is used.
	Max time.Duration

	next time.Duration // 0 when the next wait is Min
}

// Next returns the wait before the next attempt, after one more failure,
// and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	d := max(b.next, b.Min)
	b.next = min(2*d, max(b.Max, b.Min))
	return d
}

// Reset makes the next wait Min again: the attempts succeed.
func (b *Backoff) Reset() { b.next = 0 }
