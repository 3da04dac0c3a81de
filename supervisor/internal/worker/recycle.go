package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/proc"
)

// A worker process of the pool serves calls one after another, each in an
// interpreter of its own: a new runner, a Web Worker that its process's
// main thread starts for each call (js/worker.ts). The process and
// Pyodide's compiled module outlive a call; nothing of the code does. A new
// Worker is a new V8 isolate: globals, modules, timers, pending I/O and the
// interpreter's memory are its own, and end with it. Its interpreter is
// made as soon as it has started, beside the census below; the next call
// waits for both.
//
// What terminate() does not end is a busy loop (JavaScript or wasm) and a
// Worker the code made, which outlives its parent. Both are threads: Deno
// runs each Worker on a thread of its own named "worker-N". So after each
// call the supervisor counts the process's threads, and kills the process
// unless, within censusWait, exactly one runner's thread is left (the new
// runner's) and at most othersSlack more other threads than at its first
// recycle. Where threads cannot be counted (proc.HasThreads), each process
// serves one call.
//
// What a Worker can change for the whole process is checked too, once the
// census has found no thread of the call's code left: the working
// directory (Deno.chdir, into a directory the runner may read) and the
// command line (node:process's title, which the runner reaches). The
// rest is refused by the runner's permissions or ends with its Worker
// (DESIGN 3.3).
//
// A process is also retired after maxCallsPerProcess calls, or once it
// holds maxGrowth more memory than with its first recycled runner; and, as
// before, killed on its call's time limit, memory limit, cancellation or any
// error.
//
// Its baselines are taken once an interpreter has come and gone, rather
// than at its start: V8 keeps in the compiled module the code of the
// functions the first interpreter used (the process grows by about 40 MB,
// and later restores compile less), and Deno starts helper threads of its
// own when it first needs them.

// maxCallsPerProcess bounds the calls one worker process serves.
const maxCallsPerProcess = 100

// maxGrowth bounds how much more resident memory a worker process may hold
// with a runner's interpreter just made than it did with its first
// recycled runner's: what V8 and the allocator keep of the interpreters
// that ran there. Read as each interpreter is made (see serving), a
// moment when it holds the same each time.
const maxGrowth = 64 << 20

// censusWait bounds how long an ended runner's thread may take to go. It
// took 30–72 ms on an idle machine; a loaded one can take much longer to
// schedule the thread's end.
const censusWait = 3 * time.Second

// othersSlack is how many threads other than runners a worker process may
// have past its baseline. Deno starts some of its own helpers lazily: one
// blocked on a socket pair of the process's was seen to start a little
// after the first call, or a little before. They run no JavaScript: every
// JavaScript context, a Worker the code made included, is a runner thread,
// counted apart. The bound catches a process that keeps making threads.
const othersSlack = 2

// censusEvery is how often the threads are counted while they are not yet
// as they should be.
const censusEvery = 5 * time.Millisecond

// census is a count of a worker process's threads.
type census struct {
	runners int // Workers' threads: "worker-N"
	// others are the rest, but for tokio's blocking pool, whose threads
	// come and go with file reads. As what a census must find, the most
	// of them; -1 for any number, until the baseline is taken.
	others int
}

// countThreads makes the census of the thread names of a process.
func countThreads(names []string) census {
	var c census
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, "worker-"):
			c.runners++
		case strings.HasPrefix(name, "tokio-runtime-w"):
		default:
			c.others++
		}
	}
	return c
}

// errLeftover marks a worker process killed because something of a call's
// code was left running in it, or the call changed the process.
var errLeftover = errors.New("the last call left something of its own in the process")

// Recycle ends the runner of w, whose call is over, and starts a new one in
// the same process, for the next call: see the top of this file. On error
// the worker is not fit for another call, and the pool kills it.
func (s *Starter) Recycle(ctx context.Context, w *Worker) error {
	w.calls++
	if w.calls == 2 {
		w.baseline = w.made // the first recycled runner's
	}
	switch {
	case w.Dead():
		return errors.New("its process has ended")
	case w.Spent:
		return errors.New("its call was stopped or failed")
	case w.calls >= maxCallsPerProcess:
		return fmt.Errorf("its process served %d calls", w.calls)
	case w.calls > 2 && w.made > w.baseline+maxGrowth:
		return fmt.Errorf("its interpreters grew from %d to %d bytes resident", w.baseline, w.made)
	case !s.Current(w.rt, w.Kind):
		return errors.New("its runtime was replaced")
	}
	ctx, cancel := context.WithTimeout(ctx, s.StartTimeout)
	defer cancel()
	began := time.Now()
	if err := w.Conn.Recycle(ctx, bridge.NewSecret()); err != nil {
		return fmt.Errorf("recycle: %w", err)
	}
	// The old runner's thread ends as the new runner starts.
	first := w.calls == 1
	want := census{runners: 1, others: w.others + othersSlack}
	if first {
		want.others = -1
	}
	type counted struct {
		census
		took time.Duration
		err  error
	}
	done := make(chan counted, 1)
	// Not one of s.WG's, which takes none once Close has begun: this call
	// waits for it, and censusWait bounds it.
	go func() {
		got, err := awaitCensus(ctx, w.Proc.Pid(), want, censusWait)
		done <- counted{got, time.Since(began), err}
	}()
	err := s.awaitRunner(ctx, w)
	if err == nil && w.standby != nil {
		// A call has just ended, and while calls come every warm worker is
		// kept restored (pool.restoreAhead): the restore need not wait for
		// the census, only the next call does.
		s.Restore(w)
	}
	started := time.Since(began)
	c := <-done
	s.Log.Debug("worker recycled", zap.Int("pid", w.Proc.Pid()), zap.Duration("runner", started), zap.Duration("census", c.took))
	if c.err == nil {
		// No code of the call runs any longer: what it changed stays.
		c.err = checkChanged(w)
	}
	if errors.Is(c.err, errLeftover) {
		s.Log.Warn("a worker process is killed for what a call left in it", zap.Int("pid", w.Proc.Pid()), zap.Error(c.err))
	}
	if c.err != nil {
		return c.err
	}
	if err != nil {
		return err
	}
	if first {
		w.others = c.others
	}
	return nil
}

// checkChanged returns an error if the call changed w's process as a whole:
// what it changed would be the next call's.
func checkChanged(w *Worker) error {
	what, err := proc.Changed(w.Proc.Pid(), w.rt.Dir(), w.args)
	switch {
	case err != nil:
		return fmt.Errorf("read the worker's state: %w", err)
	case what != "":
		return fmt.Errorf("%w: its %s changed", errLeftover, what)
	}
	return nil
}

// awaitCensus waits until the threads of process pid are as want says,
// for at most wait, and returns the last count.
func awaitCensus(ctx context.Context, pid int, want census, wait time.Duration) (census, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(censusEvery)
	defer tick.Stop()
	for {
		names, err := proc.Threads(pid)
		if err != nil {
			return census{}, fmt.Errorf("count the worker's threads: %w", err)
		}
		got := countThreads(names)
		if got.runners == want.runners && (want.others < 0 || got.others <= want.others) {
			return got, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return got, fmt.Errorf("%w: %d runner threads and %d others after %s, want %d and at most %d (threads: %q)",
				errLeftover, got.runners, got.others, wait, want.runners, want.others, names)
		}
	}
}
