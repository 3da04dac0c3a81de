package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// A session's code can leave work running when its call ends: asyncio
// tasks, JavaScript timers, Web Workers. So the limits of its worker hold
// between calls too: the watcher below reads the worker's memory and CPU
// time while no call runs, and ends the session past either bound. During
// a call the call's own watch applies (call.go), which stops the code with
// a MemoryError instead.

// sessionCPUWindow is how long a session's worker may run at its idle share
// in one go: the CPU time it may use at once, such as right after a call,
// is sessionCPUWindow times the share (1 s at --session-idle-cpu's default,
// 0.1).
const sessionCPUWindow = 10 * time.Second

// sessionWatchEvery is how often a session's memory is read between calls,
// as often as a call's (watchMemory).
const sessionWatchEvery = 50 * time.Millisecond

// sessionCPUEvery is how often its CPU time is read: a reading costs about
// three of memory (on Linux), and the bound is over seconds.
const sessionCPUEvery = 250 * time.Millisecond

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

// idleLimits returns the bounds of the supervisor's sessions between calls.
func (s *Supervisor) idleLimits() IdleLimits {
	return IdleLimits{Memory: s.cfg.MemoryLimit, CPU: max(s.cfg.SessionIdleCPU, 0)}
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

func NewCPUBudget(share float64) *CPUBudget {
	return &CPUBudget{share: share, left: burst(share)}
}

// burst is the CPU time a worker may use at once at share.
func burst(share float64) time.Duration {
	return time.Duration(share * float64(sessionCPUWindow))
}

// due reports whether a reading is due at now.
func (b *CPUBudget) due(now time.Time) bool {
	return !b.fresh || now.Sub(b.at) >= sessionCPUEvery
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

// watch ends the session when its worker passes the limits between calls,
// or ends while idle. It returns when the session ends. A reading takes the
// session's turn, so that no call starts between a reading over a limit
// and the kill; a call holding the turn is watched by the call.
func (ss *Session) watch(ctx context.Context, u Usage, limits IdleLimits) {
	tick := time.NewTicker(sessionWatchEvery)
	defer tick.Stop()
	budget := NewCPUBudget(limits.CPU)
	runs := 0
	warned := false
	for {
		select {
		case <-ss.done:
			return
		case <-ss.w.exited:
			select {
			case ss.turn <- struct{}{}:
			case <-ss.done:
				return
			}
			if ss.lost == nil {
				ss.lost = fmt.Errorf("its worker ended while idle (%s)", ss.w.ExitStatus())
			}
			why := ss.lost
			<-ss.turn
			ss.end(why)
			return
		case <-tick.C:
		}
		if limits == (IdleLimits{}) {
			continue // watched for an exit only
		}
		select {
		case ss.turn <- struct{}{}:
		default: // a call runs
			budget.Restart()
			continue
		}
		if ss.runs != runs {
			runs = ss.runs
			budget.Restart()
		}
		why, err := ss.check(ctx, u, limits, budget)
		if why != nil && ss.lost == nil {
			ss.lost = why
		}
		<-ss.turn
		if why != nil {
			ss.s.log.Info("a session's worker was killed between calls", zap.Int("pid", ss.w.Proc.Pid()), zap.Error(why))
			ss.end(why)
			return
		}
		if err != nil && !warned && !ss.w.Dead() {
			warned = true
			ss.s.log.Warn("cannot read a session worker's use: its limits between calls are not enforced while this lasts", zap.Int("pid", ss.w.Proc.Pid()), zap.Error(err))
		}
	}
}

// check reads the worker once and returns why it must end, if it must.
// The error is a failed reading.
func (ss *Session) check(ctx context.Context, u Usage, limits IdleLimits, budget *CPUBudget) (why, err error) {
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
