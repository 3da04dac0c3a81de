package transport

// The notifiers of the transports (see mcpserver's logging.go for why the
// front end writes a call's log notifications itself): each puts them on
// the very stream the call's result will follow on, ahead of the result.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/backoff"
)

// syncWriter makes each Write to w atomic. The stdio server writes every
// message with a single Write (fmt.Fprintf or Write of the whole line), so
// sharing one syncWriter between it and stdioNotifier keeps messages whole.
// written, if set, sees each message once it is written, or failed to be.
type syncWriter struct {
	mu      sync.Mutex
	w       io.Writer
	written func(msg []byte)
}

// Write implements io.Writer.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(p)
	if s.written != nil {
		s.written(p)
	}
	return n, err
}

// stdioNotifier writes notifications straight to stdout. The tool call's
// response is written by the same stdio worker after the handler returns, so
// it always comes later.
type stdioNotifier struct {
	out *syncWriter
}

// Notify implements mcpserver.Notifier.
func (n stdioNotifier) Notify(_ context.Context, msg []byte) error {
	line := make([]byte, 0, len(msg)+1)
	line = append(append(line, msg...), '\n')
	if _, err := n.out.Write(line); err != nil {
		return fmt.Errorf("write notification: %w", err)
	}
	return nil
}

// eventSender is the part of *server.SSEServer that sseNotifier uses.
type eventSender interface {
	SendEventToSession(sessionID string, event any) error
}

// sseNotifier puts notifications straight into the SSE session's event queue
// with SSEServer.SendEventToSession. mcp-go queues the call's response in the
// same FIFO queue after the handler returns, and one goroutine writes the
// queue out in order.
type sseNotifier struct {
	events    eventSender
	sessionID string
}

// Backoff while an SSE session's event queue (100 events) is full.
const (
	sseRetryFirst = time.Millisecond
	sseRetryMax   = 50 * time.Millisecond
)

// Notify implements mcpserver.Notifier.
func (n sseNotifier) Notify(ctx context.Context, msg []byte) error {
	wait := backoff.Backoff{Min: sseRetryFirst, Max: sseRetryMax}
	for {
		err := n.events.SendEventToSession(n.sessionID, json.RawMessage(msg))
		if err == nil {
			return nil
		}
		// SendEventToSession does not block when the queue is full. Wait
		// for the writer to make room rather than drop the line.
		if !(mcpGo{}).queueFull(err) {
			return fmt.Errorf("queue notification: %w", err)
		}
		timer := time.NewTimer(wait.Next())
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("queue notification: %w", ctx.Err())
		case <-timer.C:
		}
	}
}

// callStream wraps the http.ResponseWriter of one streamable HTTP request so
// that the tool handler can write SSE events on the request's own response
// while mcp-go still writes the rest of it. Writes are serialised, and the
// header is written once whoever writes first.
type callStream struct {
	mu          sync.Mutex
	w           http.ResponseWriter
	flusher     http.Flusher
	wroteHeader bool
}

// newCallStream wraps w, which must be an http.Flusher.
func newCallStream(w http.ResponseWriter, f http.Flusher) *callStream {
	return &callStream{w: w, flusher: f}
}

// Header implements http.ResponseWriter.
func (c *callStream) Header() http.Header { return c.w.Header() }

// WriteHeader implements http.ResponseWriter. Once the handler has started an
// event stream, mcp-go's own WriteHeader for the final SSE response is
// dropped instead of becoming a "superfluous WriteHeader" warning.
func (c *callStream) WriteHeader(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wroteHeader {
		return
	}
	c.wroteHeader = true
	c.w.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (c *callStream) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wroteHeader = true
	return c.w.Write(p)
}

// Flush implements http.Flusher, which mcp-go requires for streaming.
func (c *callStream) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flusher.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *callStream) Unwrap() http.ResponseWriter { return c.w }

// writeEvent writes msg as one SSE "message" event, starting the event
// stream if nothing was written yet, and flushes it.
func (c *callStream) writeEvent(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.wroteHeader {
		h := c.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		c.w.WriteHeader(http.StatusOK)
		c.wroteHeader = true
	} else if ct := c.w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("response already started as %q", ct)
	}
	event := make([]byte, 0, len(msg)+24)
	event = append(event, sseEventPrefix...)
	event = append(event, msg...)
	event = append(event, "\n\n"...)
	if _, err := c.w.Write(event); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	c.flusher.Flush()
	return nil
}

// httpNotifier writes notifications as SSE events on the POST response that
// carries the tool call. It first marks the session to answer as SSE, so
// mcp-go writes the final response as one more event on that same stream,
// after the handler returns. Nothing goes through the session's channel, so
// neither a GET stream nor another client can pick a notification up.
type httpNotifier struct {
	stream *callStream
}

// Notify implements mcpserver.Notifier.
func (n httpNotifier) Notify(ctx context.Context, msg []byte) error {
	if err := (mcpGo{}).upgradeToSSE(ctx); err != nil {
		return err
	}
	return n.stream.writeEvent(msg)
}
