package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// standby is the interpreter of a worker started lazily, yet to be made.
//
// A worker on standby has Deno, the bridge and Pyodide's compiled module,
// and no interpreter: about 65 MiB resident against 150 MiB once restored
// from the snapshot, which then takes about a tenth of a second, a quarter
// of a whole start. The pool keeps part of its warm workers restored ahead
// of calls (pool.restoreAhead) and the rest on standby, so that a server at
// rest holds less while a call still finds an interpreter made.
type standby struct {
	asked atomic.Bool   // the restore has begun
	done  chan struct{} // closed when the restore has ended
	err   error         // why it failed; set before done is closed
}

// made reports whether the restore has ended.
func (sb *standby) made() bool {
	select {
	case <-sb.done:
		return true
	default:
		return false
	}
}

// Restore makes w's interpreter in the background, unless that has begun.
// A worker that fails to restore is killed: the pool replaces it.
func (s *Starter) Restore(w *Worker) {
	sb := w.standby
	if !sb.asked.CompareAndSwap(false, true) {
		return
	}
	s.WG.Go(func() {
		defer close(sb.done)
		ctx, cancel := context.WithTimeout(s.Ctx, s.StartTimeout)
		defer cancel()
		start := time.Now()
		ready, err := w.Conn.Restore(ctx)
		if err != nil {
			w.Kill()
			sb.err = fmt.Errorf("restore: %w (%s)", err, w.StderrTail())
			return
		}
		sb.err = s.serving(ctx, w, ready)
		s.Log.Debug("worker restored", zap.Int("pid", w.Proc.Pid()), zap.Duration("took", time.Since(start)), zap.Error(sb.err))
	})
}

// restoreWait is how long a call waits for a worker's restore without the
// worker using CPU before it takes another. A restore takes about 0.1 s on
// an idle machine and seconds on a loaded one, using CPU all the while; a
// stopped (frozen) worker uses none and never ends it.
const restoreWait = 4 * time.Second

// AwaitRestore makes w's interpreter, if it is on standby and nobody has
// asked yet, and waits until it is made. It reports whether it waited: a
// worker that has just answered needs no ping.
func (s *Starter) AwaitRestore(ctx context.Context, w *Worker) (bool, error) {
	if w.standby == nil || w.standby.made() {
		return false, nil
	}
	s.Restore(w)
	if err := awaitWorking(ctx, w.standby.done, w.Proc, restoreWait); err != nil {
		return true, err
	}
	return true, w.standby.err
}

// awaitWorking waits until done is closed, for as long as u's process uses
// CPU time in every period of every: a slow restore on a loaded machine is
// waited for (within ctx and the restore's own start timeout), while a
// process that is stopped is given up after one period. A process whose CPU
// time cannot be read gets one period.
func awaitWorking(ctx context.Context, done <-chan struct{}, u Usage, every time.Duration) error {
	last, err := u.CPUTime(ctx)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			now, nowErr := u.CPUTime(ctx)
			if err != nil || nowErr != nil || now <= last {
				return fmt.Errorf("its interpreter was not made within %s, in which its process did no work", every)
			}
			last = now
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
