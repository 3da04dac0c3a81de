package main

// MCP logging (DESIGN 1.5): which notifications/message a call sends, and how
// each reaches the client before the call's result on every transport.
//
// mcp-go's own path, MCPServer.SendLogMessageToClient, cannot give that
// guarantee, as measured against mcp-go v1.2.1 (DESIGN 2):
//
//   - stdio: notifications go through a channel to a separate goroutine that
//     writes them, while the tool call's response is written by the worker
//     goroutine that ran it, so a response can overtake its notifications.
//   - sse: notifications go through a channel to a goroutine that moves them
//     into the session's event queue, while the response goes straight into
//     that queue: same race.
//   - streamable HTTP: the session's notification channel is drained both by
//     the POST's forwarder and by the standalone GET stream's goroutine, so a
//     client holding a GET stream gets some notifications there, after the
//     result or never. In stateless mode every request uses session "" (and a
//     GET makes that one session shared by all), so the session log level and
//     the channel are shared between clients.
//   - The session log level starts at "error", not "emergency", and
//     buildLogNotification always adds "logger":"" where upstream sent
//     {level, data} only.
//
// So the front end keeps its own levels and writes notifications itself, from
// the tool handler's goroutine, to the very stream the result will follow on,
// before the handler returns. A notifier in the request context says how:
// stdioNotifier, sseNotifier and httpNotifier below; transport.go installs
// them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// levelStore keeps the level each session chose with logging/setLevel.
type levelStore struct {
	// perSession is false in stateless mode, where every client shares the
	// session ID "": a level set there could only leak to other clients.
	perSession bool

	mu     sync.Mutex
	levels map[string]mcp.LoggingLevel
}

// newLevelStore returns a store; see levelStore.perSession.
func newLevelStore(perSession bool) *levelStore {
	return &levelStore{perSession: perSession, levels: map[string]mcp.LoggingLevel{}}
}

// install records levels from logging/setLevel (after mcp-go validated them)
// and forgets a session's level when the session ends.
func (s *levelStore) install(hooks *server.Hooks) {
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		if session := server.ClientSessionFromContext(ctx); session != nil {
			s.set(session.SessionID(), req.Params.Level)
		}
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		s.forget(session.SessionID())
	})
}

// set records the level of a session.
func (s *levelStore) set(sessionID string, level mcp.LoggingLevel) {
	if !s.perSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.levels[sessionID] = level
}

// forget drops the level of a session that ended.
func (s *levelStore) forget(sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.levels, sessionID)
}

// sessionLevel returns a session's level: emergency until it sets one, as
// upstream, so that nothing is sent by default.
func (s *levelStore) sessionLevel(sessionID string) mcp.LoggingLevel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if level, ok := s.levels[sessionID]; ok {
		return level
	}
	return mcp.LoggingLevelEmergency
}

// callLevel returns the lowest level of notification the request in ctx
// wants, or false when it wants none.
//
// Protocol 2026-07-28 removed logging/setLevel: such a request carries its
// level in _meta, which mcp-go exposes as RequestProtocolInfo.LogLevel, and
// without one no notification may be sent. Older requests use the session's
// level; in stateless mode there is no session to keep one in, which is what
// upstream did too (it built a fresh server for every stateless request).
func (s *levelStore) callLevel(ctx context.Context) (mcp.LoggingLevel, bool) {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel, info.LogLevel != ""
	}
	if !s.perSession {
		return "", false
	}
	session := server.ClientSessionFromContext(ctx)
	if session == nil {
		return "", false
	}
	return s.sessionLevel(session.SessionID()), true
}

// lineLevel is the level a call's line is logged at: stdout as info, stderr
// as warning, package install progress as debug and install failures as
// error.
func lineLevel(line supervisor.Line) mcp.LoggingLevel {
	switch line.Stream {
	case supervisor.Stderr:
		return mcp.LoggingLevelWarning
	case supervisor.Progress:
		return mcp.LoggingLevelDebug
	case supervisor.Failure:
		return mcp.LoggingLevelError
	}
	return mcp.LoggingLevelInfo
}

// logNotification returns the JSON-RPC notification for one log line. Its
// params are {level, data} with no logger, as upstream sent, encoded as
// JavaScript would.
func logNotification(level mcp.LoggingLevel, data string) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":`)
	writeJSString(&b, string(level))
	b.WriteString(`,"data":`)
	writeJSString(&b, data)
	b.WriteString(`}}`)
	return []byte(b.String())
}

// notifier delivers a call's notifications on the stream that will carry the
// call's result. notify returns once msg is queued ahead of anything the
// transport writes for the call afterwards.
type notifier interface {
	notify(ctx context.Context, msg []byte) error
}

// notifierKey is the context key of the request's notifier.
type notifierKey struct{}

// withNotifier returns ctx carrying n.
func withNotifier(ctx context.Context, n notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// notifierFrom returns the notifier in ctx, or nil.
func notifierFrom(ctx context.Context) notifier {
	n, _ := ctx.Value(notifierKey{}).(notifier)
	return n
}

// syncWriter makes each Write to w atomic. The stdio server writes every
// message with a single Write (fmt.Fprintf or Write of the whole line), so
// sharing one syncWriter between it and stdioNotifier keeps messages whole.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// stdioNotifier writes notifications straight to stdout. The tool call's
// response is written by the same stdio worker after the handler returns, so
// it always comes later.
type stdioNotifier struct {
	out *syncWriter
}

func (n stdioNotifier) notify(_ context.Context, msg []byte) error {
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

func (n sseNotifier) notify(ctx context.Context, msg []byte) error {
	delay := sseRetryFirst
	for {
		err := n.events.SendEventToSession(n.sessionID, json.RawMessage(msg))
		if err == nil {
			return nil
		}
		// SendEventToSession does not block when the queue is full, and
		// mcp-go has no sentinel error for it: it returns the plain error
		// "event queue full" (TestSSEQueueFullMessage pins that text). Wait
		// for the writer to make room rather than drop the line.
		if !strings.Contains(err.Error(), "queue full") {
			return fmt.Errorf("queue notification: %w", err)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("queue notification: %w", ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, sseRetryMax)
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
	event = append(event, "event: message\ndata: "...)
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

func (n httpNotifier) notify(ctx context.Context, msg []byte) error {
	session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithStreamableHTTPConfig)
	if !ok {
		return errors.New("no streamable HTTP session in context")
	}
	session.UpgradeToSSEWhenReceiveNotification()
	return n.stream.writeEvent(msg)
}

// fallbackNotifier uses mcp-go's notification channel. It serves transports
// that install no notifier (mcp-go's in-process client); ordering is then
// mcp-go's, without the guarantee above.
type fallbackNotifier struct{}

func (fallbackNotifier) notify(ctx context.Context, msg []byte) error {
	mcpServer := server.ServerFromContext(ctx)
	if mcpServer == nil {
		return errors.New("no MCP server in context")
	}
	var n struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(msg, &n); err != nil {
		return fmt.Errorf("decode notification: %w", err)
	}
	if err := mcpServer.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage), n.Params); err != nil {
		return fmt.Errorf("send notification: %w", err)
	}
	return nil
}
