package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
)

// A session's code can leave work running when its call ends: asyncio
// tasks, JavaScript timers, Web Workers. So the limits of its worker hold
// between calls too: the watcher below reads the worker's memory and CPU
// time while no call runs (Session.watch, in package supervisor, with the
// bounds and the budget below), and ends the session past either bound.
// During a call the call's own watch applies (WatchMemory), which stops
// the code with a MemoryError instead.

// sessionCPUWindow is how long a session's worker may run at its idle share
// in one go: the CPU time it may use at once, such as right after a call,
// is sessionCPUWindow times the share (1 s at --session-idle-cpu's default,
// 0.1).
const sessionCPUWindow = 10 * time.Second

// IdleWatchEvery is how often a session's memory is read between calls,
// as often as a call's (WatchMemory).
const IdleWatchEvery = 50 * time.Millisecond

// SessionCPUEvery is how often its CPU time is read: a reading costs about
// three of memory (on Linux), and the bound is over seconds.
const SessionCPUEvery = 250 * time.Millisecond

// Usage reads what a worker's process uses: process is one.
type Usage interface {
	// Memory returns the resident bytes.
	Memory(ctx context.Context) (int64, error)
	// CPUTime returns the CPU time used so far.
	CPUTime(ctx context.Context) (time.Duration, error)
}

// IdleLimits bound a session's worker while no call runs.
type IdleLimits struct {
	Memory int64   // resident bytes; 0 for no bound
	CPU    float64 // share of one core, on average; 0 for no bound
}

// CPUBudget is a token bucket of CPU time: it fills at share of a core up
// to share × sessionCPUWindow, and each reading takes out the CPU time used
// since the last. Only time between calls counts: restart drops the
// reading a call's CPU time would be measured from.
type CPUBudget struct {
	share float64
	left  time.Duration // what may still be used at once
	at    time.Time     // when the last reading was taken
	cpu   time.Duration // the CPU time it read
	fresh bool          // at and cpu hold a reading taken since the last call

	// Since the bucket was last full: when, and the CPU time taken out
	// since, for the message of a worker that went over.
	since time.Time
	used  time.Duration
}

// NewCPUBudget returns a full budget of share of a core.
func NewCPUBudget(share float64) *CPUBudget {
	return &CPUBudget{share: share, left: burst(share)}
}

// burst is the CPU time a worker may use at once at share.
func burst(share float64) time.Duration {
	return time.Duration(share * float64(sessionCPUWindow))
}

// due reports whether a reading is due at now.
func (b *CPUBudget) due(now time.Time) bool {
	return !b.fresh || now.Sub(b.at) >= SessionCPUEvery
}

// Restart is called when a call ran since the last reading.
func (b *CPUBudget) Restart() { b.fresh = false }

// spend takes a reading, cpu at now, and reports whether the worker has
// used more than its budget.
func (b *CPUBudget) spend(now time.Time, cpu time.Duration) bool {
	if b.since.IsZero() {
		b.since = now
	}
	if b.fresh {
		b.left += time.Duration(b.share * float64(now.Sub(b.at)))
		if full := burst(b.share); b.left >= full {
			b.left, b.since, b.used = full, b.at, 0
		}
		b.left -= cpu - b.cpu
		b.used += cpu - b.cpu
	}
	b.at, b.cpu, b.fresh = now, cpu, true
	return b.left < 0
}

// Check reads a session's worker once, through u, and returns why it must
// end, if it must. The error is a failed reading.
func (limits IdleLimits) Check(ctx context.Context, u Usage, budget *CPUBudget) (why, err error) {
	if limits.Memory > 0 {
		resident, err := u.Memory(ctx)
		if err != nil {
			return nil, err
		}
		if resident > limits.Memory {
			return fmt.Errorf("its worker was killed between calls: it used %s of memory, more than the %s limit",
				humanize.IBytes(uint64(resident)), humanize.IBytes(uint64(limits.Memory))), nil
		}
	}
	if now := time.Now(); limits.CPU > 0 && budget.due(now) {
		cpu, err := u.CPUTime(ctx)
		if err != nil {
			return nil, err
		}
		if budget.spend(now, cpu) {
			return fmt.Errorf("its worker was killed between calls: it used %s of CPU time while no call ran, within the last %s, "+
				"more than a session may then (%.3g of a core on average, %s at once)",
				budget.used.Round(time.Millisecond), time.Since(budget.since).Round(time.Millisecond), limits.CPU, burst(limits.CPU)), nil
		}
	}
	return nil, nil
}
