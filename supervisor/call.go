package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
)

// Why a call was stopped from outside.
var (
	errTimeout  = errors.New("time limit reached")
	errMemory   = errors.New("memory limit reached")
	errShutdown = errors.New("server shutting down")
)

// call runs code on w and turns whatever happens into a Result.
//
// Code that must stop (time limit, cancellation, shutdown) is first
// interrupted: KeyboardInterrupt lets it end cleanly with its output and
// traceback. Code that ignores that for the grace period, or that is over
// its memory, is killed with its worker.
func (s *Supervisor) call(ctx context.Context, w *worker.Worker, run bridge.RunRequest, opts runOpts) (Result, bridge.Files, error) {
	stopCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	clock := opts.limit.start(opts.progress, func() { stop(errTimeout) }, func() (time.Duration, error) { return w.Proc.CPUTime(stopCtx) })
	defer clock.stop()
	defer context.AfterFunc(s.ctx, func() { stop(errShutdown) })()
	if s.cfg.MemoryLimit > 0 {
		s.wg.Go(func() { w.WatchMemory(stopCtx, s.cfg.MemoryLimit, s.log, func() { stop(errMemory) }) })
	}

	out := output{limit: s.cfg.OutputLimit, onLine: opts.onLine}
	if tools := s.cfg.newToolRelay(stopCtx, w.Conn); tools != nil {
		defer tools.close()
		run.Tools, run.OnToolCall = tools.spec(), tools.handle
	}
	asks := s.cfg.newAskRelay(stopCtx, s.log, opts.ask, opts.progress, clock, w.Conn.Answer)
	defer asks.close()
	readLimit := s.workers.ServingReadLimit()
	run.Ask, run.OnAsk = asks.spec(readLimit), asks.handle
	if run.Ask != nil {
		// A round of questions may be larger than any other frame of a run.
		w.Conn.SetReadLimit(run.Ask.FrameBytes + askFrameHead)
		defer w.Conn.SetReadLimit(readLimit)
	}
	done := make(chan outcome, 1)
	s.wg.Go(func() {
		// Not bounded by the call's context: after an interrupt the result
		// is still wanted. A kill closes the connection, which ends the read.
		msg, files, err := w.Conn.Run(context.Background(), run, out.add)
		done <- outcome{msg, files, err}
	})

	var o outcome
	var finished, killed bool
	select {
	case o = <-done:
		finished = true
	case <-stopCtx.Done():
		if !errors.Is(context.Cause(stopCtx), errMemory) {
			o, finished = interrupt(w, done, s.cfg.Grace)
		}
	}
	if !finished {
		killed = true
		w.Kill()
		o = <-done
	}
	res := Result{Output: out.finish()}

	cause := context.Cause(stopCtx)
	if cause != nil || o.err != nil {
		w.Spent = true // stopped, or failed: its process serves no other call
	}
	if cause == nil && o.err == nil {
		switch o.msg.Status {
		case bridge.ResultSuccess, bridge.ResultRunError:
			res.Status = Status(o.msg.Status)
			res.ReturnValue, res.ReturnString = capReturnValue(o.msg.ReturnValue, o.msg.ReturnString, o.msg.ReturnCut, s.cfg.OutputLimit)
			res.Error = capText(o.msg.Error, o.msg.ErrorCut, s.cfg.errorLimit(), "error")
			return res, o.files, nil
		}
		o.err = fmt.Errorf("worker sent the unknown status %q", o.msg.Status)
	}

	res.Status = StatusRunError
	how := "interrupted"
	if killed {
		how = "killed with its worker"
	}
	switch {
	case errors.Is(cause, errTimeout):
		res.Error = stoppedError(o.msg, fmt.Sprintf("TimeoutError: the code did not finish within %s and was %s", s.cfg.Timeout, how))
	case errors.Is(cause, errMemory):
		res.Error = fmt.Sprintf("MemoryError: the code used more than %s of memory and was killed with its worker", humanize.IBytes(uint64(s.cfg.MemoryLimit)))
	case cause != nil && ctx.Err() != nil:
		return res, bridge.Files{}, fmt.Errorf("call cancelled: %w", context.Cause(ctx))
	case cause != nil:
		return res, bridge.Files{}, cause
	default:
		res.Error = "RuntimeError: the Python worker stopped while running the code (" + crashReason(w, o.err) + ")"
		// Whatever is left of it serves nothing more: a session sees it dead.
		w.Kill()
	}
	// The files of a run that was stopped are kept when it ended in time.
	return res, o.files, nil
}

// runOpts is what call needs of a call besides its worker and run frame.
type runOpts struct {
	limit    *deadline     // the call's time limit
	progress *callProgress // nil: nobody hears the call's progress
	ask      Ask           // what its code may ask
	onLine   func(Line)    // nil: nobody hears its lines as they come
}

// outcome is how a run on a worker ended: its result frame, or why none came.
type outcome struct {
	msg   bridge.ResultFrame
	files bridge.Files
	err   error
}

// interruptEvery is how often an interrupt is repeated while the code has
// not stopped.
const interruptEvery = time.Second

// interrupt asks the code on w to stop and waits up to grace for its
// outcome. The request is repeated while the code runs on: on loaded
// machines (CI) an interrupt was seen to go unanswered for the whole grace,
// rarely and with no cause found, while a later one would have been taken.
// A repeat reaches only code that is still running past its limit, as a
// second Ctrl-C would.
func interrupt(w *worker.Worker, done <-chan outcome, grace time.Duration) (outcome, bool) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	again := time.NewTicker(interruptEvery)
	defer again.Stop()
	for {
		_ = w.Conn.Interrupt(context.Background())
		select {
		case o := <-done:
			return o, true
		case <-deadline.C:
			return outcome{}, false
		case <-again.C:
		}
	}
}

// stoppedError is the error text of code stopped from outside: the
// traceback of the KeyboardInterrupt, when the code ended with one, shows
// where it was; its last line becomes the reason it was stopped.
func stoppedError(msg bridge.ResultFrame, reason string) string {
	tb, ok := strings.CutSuffix(msg.Error, "KeyboardInterrupt\n")
	if msg.Status != bridge.ResultRunError || !ok || !strings.HasPrefix(tb, "Traceback") {
		return reason
	}
	return tb + reason + "\n"
}

// crashReason says how a worker ended under the code: os._exit, a crash of
// the runtime, or a kill from outside.
func crashReason(w *worker.Worker, err error) string {
	var fatal *bridge.FatalError
	if errors.As(err, &fatal) {
		return fatal.Reason
	}
	// Give the process a moment to be reaped, so the reason can say how it ended.
	select {
	case <-w.Ended():
		if w.ExitErr() == nil && err != nil {
			// worker.ts exits with 0 when its connection closes, such as
			// after the bridge refused a frame too big: the error says why.
			return err.Error()
		}
		return w.ExitStatus()
	case <-time.After(time.Second):
		return err.Error()
	}
}

// output collects a call's lines up to a limit in bytes and passes each kept
// line on as it arrives.
type output struct {
	limit   int
	onLine  func(Line)
	lines   []string
	size    int
	dropped int
}

func (o *output) add(stream bridge.Stream, lines []string, droppedByWorker int) {
	o.dropped += droppedByWorker
	for _, l := range lines {
		if o.dropped > 0 || (o.limit > 0 && o.size+len(l)+1 > o.limit) {
			o.dropped += len(l) + 1
			continue
		}
		o.size += len(l) + 1
		o.lines = append(o.lines, l)
		if o.onLine != nil {
			o.onLine(Line{Stream: Stream(stream), Text: l})
		}
	}
}

func (o *output) finish() []string {
	if o.dropped > 0 {
		// All that was printed less the limit: whole lines are dropped, so
		// what was dropped can be up to a line more than that.
		over := o.size + o.dropped - o.limit
		if o.limit <= 0 || over <= 0 {
			over = o.dropped // a worker's count that cannot be: shown as it is
		}
		marker := fmt.Sprintf("[output truncated: %s more was printed than the %s limit]", humanize.IBytes(uint64(over)), humanize.IBytes(uint64(o.limit)))
		o.lines = append(o.lines, marker)
		if o.onLine != nil {
			o.onLine(Line{Stream: Stderr, Text: marker})
		}
	}
	return o.lines
}

// minErrorLimit is the least an error text may keep: a traceback must
// survive a small output limit whole, and the interrupt's traceback ends
// with what stoppedError reads.
const minErrorLimit = 64 << 10

// errorLimit is the size past which a run's error text is cut: the output
// limit, but never less than minErrorLimit; 0 for none.
func (c Config) errorLimit() int {
	if c.OutputLimit <= 0 {
		return 0
	}
	return max(c.OutputLimit, minErrorLimit)
}

// capReturnValue returns a return value whole, or cut to limit bytes (0:
// no limit) with a note, as a str: cut JSON is no longer JSON. The worker's
// runner cuts a value before it sends it and says how big it was (cutSize);
// code that tampers with the runner (it shares the interpreter) can still
// send a bigger one, up to the bridge's read limit of a serving worker
// (worker.Starter.ServingReadLimit), which is cut here the same way.
func capReturnValue(raw json.RawMessage, isString bool, cutSize, limit int) (json.RawMessage, bool) {
	// A str's JSON form is never shorter than the str itself.
	if cutSize == 0 && (limit <= 0 || len(raw) <= limit) {
		return raw, isString
	}
	text := string(raw)
	if isString {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			text = s
		}
	}
	if cutSize == 0 && len(text) <= limit {
		return raw, isString
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the runner writes strings
	_ = enc.Encode(capText(text, cutSize, limit, "return value"))
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n")), true
}

// capText returns text whole, or its first limit bytes, on a character
// boundary, and a line that says what was cut: the one place that writes
// that note. cutSize is the size of the whole text when the worker already
// cut it, else 0.
func capText(text string, cutSize, limit int, what string) string {
	if cutSize == 0 {
		if limit <= 0 || len(text) <= limit {
			return text
		}
		cutSize = len(text)
	}
	return worker.CutText(text, limit) + "\n" + fmt.Sprintf("[%s truncated: the value is %s, more than the %s limit]",
		what, humanize.IBytes(uint64(cutSize)), humanize.IBytes(uint64(limit)))
}
