package supervisor

import (
	"context"
	"time"
)

// deadline is a call's one time limit (--timeout): it runs from the call's
// start through fetching, installing and running, and stops only while the
// call waits for a free worker, which is the server's doing, not the call's.
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
