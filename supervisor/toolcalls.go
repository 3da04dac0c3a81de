package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// replyTimeout bounds the write of one answer (a tool call's, a round's)
// to a worker: the run may have ended, and its connection with it.
const replyTimeout = 5 * time.Second

// maxToolCallsInFlight bounds the tool calls of one run that are made at
// once: past it, the run's frames wait to be read, so that code that sends
// calls without awaiting them cannot make the server start goroutines
// without bound.
const maxToolCallsInFlight = 64

// errRunEnded cancels the requests still being answered when their run ends.
var errRunEnded = errors.New("the run ended")

// toolRelay answers the tool calls of one run (code mode): each is made in
// its own goroutine, with the run's context, so that a run that is
// stopped (time limit, cancellation, kill) stops its pending calls too.
// The calls of a run are counted against Config.ToolCalls.
type toolRelay struct {
	*answering
	tools Tools
	conn  *bridge.Conn
	limit int // calls a run may make; 0 for no limit
	made  int // read and written by handle only
}

// answering answers the requests of one run (tool calls, rounds of
// questions), each in a goroutine of its own, at most cap(slots) at once,
// with ctx, which ends with the run.
type answering struct {
	ctx   context.Context
	stop  context.CancelCauseFunc
	slots chan struct{}
	wg    sync.WaitGroup
}

// newAnswering answers the requests of a run whose context is ctx, at most
// inFlight at once.
func newAnswering(ctx context.Context, inFlight int) *answering {
	ctx, stop := context.WithCancelCause(ctx)
	return &answering{ctx: ctx, stop: stop, slots: make(chan struct{}, inFlight)}
}

// start answers one request, in the background, with answer, once a slot
// is free; when the run ends first, it returns without: the run is over
// and nobody waits for the answer.
func (a *answering) start(answer func()) {
	select {
	case a.slots <- struct{}{}:
	case <-a.ctx.Done():
		return
	}
	a.wg.Go(func() {
		defer func() { <-a.slots }()
		answer()
	})
}

// close cancels the requests still being answered, because the run ended,
// and waits for their answers to be sent (or not: the run no longer
// listens).
func (a *answering) close() {
	a.stop(errRunEnded)
	a.wg.Wait()
}

// reply sends an answer with send, within replyTimeout: the run may
// have ended, and its connection with it, and then no longer listens.
func reply(send func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
	defer cancel()
	_ = send(ctx)
}

// newToolRelay returns the relay of a run whose context is ctx, or nil when
// no tools are configured.
func (c Config) newToolRelay(ctx context.Context, conn *bridge.Conn) *toolRelay {
	if c.Tools == nil {
		return nil
	}
	return &toolRelay{answering: newAnswering(ctx, maxToolCallsInFlight), tools: c.Tools, conn: conn, limit: c.ToolCalls}
}

// spec is the run frame's list of the tools, for Python's mcp_tools.
func (r *toolRelay) spec() json.RawMessage {
	b, err := json.Marshal(r.tools.List())
	if err != nil {
		return nil // a ToolSpec always marshals
	}
	return b
}

// handle answers one call, in the background; see bridge.RunRequest.OnToolCall.
// It is called from the goroutine that reads the run's frames, one call at
// a time.
func (r *toolRelay) handle(c bridge.ToolCall) {
	r.made++
	over := r.limit > 0 && r.made > r.limit
	r.start(func() {
		var value json.RawMessage
		var errText string
		if over {
			errText = fmt.Sprintf("this run has made more than %d tool calls, the limit (--tool-calls)", r.limit)
		} else {
			value, errText = r.call(c)
		}
		reply(func(ctx context.Context) error { return r.conn.ToolResult(ctx, c.ID, value, errText) })
	})
}

// call makes one tool call and returns its value as JSON (structured
// content, else the text as a string), or why it failed.
func (r *toolRelay) call(c bridge.ToolCall) (json.RawMessage, string) {
	res, err := r.tools.Call(r.ctx, c.Server, c.Tool, c.Args)
	switch {
	case err != nil && r.ctx.Err() != nil:
		return nil, fmt.Sprintf("the call of %s.%s was cancelled: %v", c.Server, c.Tool, context.Cause(r.ctx))
	case err != nil:
		return nil, err.Error()
	case res.IsError:
		if res.Text == "" {
			return nil, fmt.Sprintf("%s.%s failed", c.Server, c.Tool)
		}
		return nil, res.Text
	case res.Structured != nil:
		return res.Structured, ""
	}
	text, _ := json.Marshal(res.Text)
	return text, ""
}
