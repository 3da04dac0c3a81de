package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Paths of the HTTP modes.
const (
	streamablePath  = "/mcp"
	sseStreamPath   = "/sse"
	sseMessagesPath = "/messages"
)

// shutdownGrace is how long in-flight HTTP requests may take to finish after
// SIGINT or SIGTERM before they are cancelled.
const shutdownGrace = 5 * time.Second

// stdioToolWorkers returns how many tool calls the stdio server runs at once.
// mcp-go's default is 5. Calls beyond the worker limit should wait inside
// Run, where notifications/cancelled can reach them, rather than in mcp-go's
// queue, where it cannot; mcp-go caps the pool at 100.
func stdioToolWorkers(workers int) int {
	return min(max(4*workers, 32), 100)
}

// serveStdio serves MCP on in and out until in ends or ctx is done.
func serveStdio(ctx context.Context, o serverOptions, workers int, in io.Reader, out io.Writer) error {
	mcpServer := newMCPServer(o, newLevelStore(true), &server.Hooks{})
	w := &syncWriter{w: out}
	stdio := server.NewStdioServer(mcpServer)
	for _, opt := range []server.StdioOption{
		server.WithErrorLogger(zap.NewStdLog(o.Log)),
		server.WithWorkerPoolSize(stdioToolWorkers(workers)),
		server.WithStdioContextFunc(func(ctx context.Context) context.Context {
			return withNotifier(ctx, stdioNotifier{out: w})
		}),
	} {
		opt(stdio)
	}
	// Listen writes every message through w, which stdioNotifier shares.
	if err := stdio.Listen(ctx, in, w); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("stdio: %w", err)
	}
	return nil
}

// httpFrontEnd is the HTTP handler of one of the HTTP modes.
type httpFrontEnd struct {
	handler http.Handler
	// closeSessions ends the long-lived streams (SSE streams, standalone GET
	// streams) so that a graceful shutdown need not wait for them.
	closeSessions func(ctx context.Context)
}

// newHTTPFrontEnd builds the handler for mode, one of the HTTP modes.
func newHTTPFrontEnd(mode Mode, o serverOptions) (*httpFrontEnd, error) {
	switch mode {
	case ModeSSE:
		return newSSEFrontEnd(o), nil
	case ModeStreamableHTTP:
		return newStreamableFrontEnd(o, false), nil
	case ModeStreamableHTTPStateless:
		return newStreamableFrontEnd(o, true), nil
	}
	return nil, fmt.Errorf("mode %q is not an HTTP mode", mode)
}

// newSSEFrontEnd serves the 2024-11-05 HTTP+SSE transport: GET /sse opens the
// stream and announces /messages?sessionId=..., where the client POSTs.
func newSSEFrontEnd(o serverOptions) *httpFrontEnd {
	hooks := &server.Hooks{}
	watch := newSessionWatch()
	watch.install(hooks)
	mcpServer := newMCPServer(o, newLevelStore(true), hooks)
	var sse *server.SSEServer
	sse = server.NewSSEServer(mcpServer,
		server.WithSSEEndpoint(sseStreamPath),
		server.WithMessageEndpoint(sseMessagesPath),
		server.WithSSEContextFunc(func(ctx context.Context, _ *http.Request) context.Context {
			session := server.ClientSessionFromContext(ctx)
			if session == nil {
				return ctx
			}
			ctx = withNotifier(ctx, sseNotifier{events: sse, sessionID: session.SessionID()})
			return withSessionDone(ctx, watch.done(session.SessionID()))
		}),
	)
	return &httpFrontEnd{
		handler:       sse,
		closeSessions: func(context.Context) { sse.CloseSessions() },
	}
}

// newStreamableFrontEnd serves Streamable HTTP at /mcp, with sessions or
// stateless.
func newStreamableFrontEnd(o serverOptions, stateless bool) *httpFrontEnd {
	mcpServer := newMCPServer(o, newLevelStore(!stateless), &server.Hooks{})
	opts := []server.StreamableHTTPOption{
		server.WithEndpointPath(streamablePath),
		server.WithStreamableHTTPLogger(slog.New(zapSlogHandler{log: o.Log})),
	}
	if stateless {
		opts = append(opts, server.WithStateLess(true))
	} else {
		// Session IDs must name a session this server made; mcp-go's
		// default only checks their format.
		opts = append(opts, server.WithStateful(true))
	}
	streamable := server.NewStreamableHTTPServer(mcpServer, opts...)
	mux := http.NewServeMux()
	mux.Handle(streamablePath, &streamableHandler{next: streamable, stateless: stateless})
	return &httpFrontEnd{handler: mux, closeSessions: streamable.CloseSessions}
}

// streamableHandler wraps mcp-go's Streamable HTTP handler.
type streamableHandler struct {
	next      http.Handler
	stateless bool
}

// ServeHTTP gives each request a callStream and its notifier (see
// httpNotifier) and, where mcp-go would let clients interfere, answers
// requests itself:
//
//   - In stateless mode GET and DELETE get 405, as upstream answered: mcp-go
//     would register a GET stream as session "", which every later stateless
//     POST of every client then shares.
//   - A notifications/cancelled without a session of its own (stateless, or
//     protocol 2026-07-28) is acknowledged and dropped: mcp-go keys in-flight
//     requests by session ID and request ID, so with the shared ID "" it
//     would cancel another client's call that has the same request ID. Such
//     clients cancel by closing the request, which cancels the call.
func (h *streamableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.stateless && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
		writeMethodNotAllowed(w)
		return
	}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if unaddressableCancel(h.stateless, r.Header, body) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if f, ok := w.(http.Flusher); ok {
		stream := newCallStream(w, f)
		r = r.WithContext(withNotifier(r.Context(), httpNotifier{stream: stream}))
		w = stream
	}
	h.next.ServeHTTP(w, r)
}

// writeMethodNotAllowed answers as upstream's stateless server did.
func writeMethodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Method not allowed."},"id":null}`)
}

// unaddressableCancel reports whether body is a notifications/cancelled that
// mcp-go could only match against a shared session (see streamableHandler).
func unaddressableCancel(stateless bool, header http.Header, body []byte) bool {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodNotificationCancelled) {
		return false
	}
	return stateless ||
		mcp.IsModernProtocol(header.Get(mcp.HeaderProtocolVersion)) ||
		mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion())
}

// serveHTTP serves fe on ln until ctx is done, then shuts down gracefully:
// long-lived streams are closed, in-flight calls get shutdownGrace to finish
// and are cancelled after that.
func serveHTTP(ctx context.Context, ln net.Listener, fe *httpFrontEnd, log *zap.Logger) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           fe.handler,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          zap.NewStdLog(log),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	fe.closeSessions(shutdownCtx)
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("in-flight requests cancelled at shutdown", zap.Error(err))
		cancelBase()
		_ = srv.Close()
	}
	<-served
	return nil
}

// sessionWatch keeps, for each live session, a channel closed when the
// session ends (see withSessionCancel).
type sessionWatch struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

// newSessionWatch returns an empty watch.
func newSessionWatch() *sessionWatch {
	return &sessionWatch{chans: map[string]chan struct{}{}}
}

// install follows session registration through hooks.
func (w *sessionWatch) install(hooks *server.Hooks) {
	hooks.AddOnRegisterSession(func(_ context.Context, session server.ClientSession) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.chans[session.SessionID()] = make(chan struct{})
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if ch, ok := w.chans[session.SessionID()]; ok {
			close(ch)
			delete(w.chans, session.SessionID())
		}
	})
}

// done returns the channel of a session; for a session that is not (or no
// longer) registered it returns a closed channel.
func (w *sessionWatch) done(sessionID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.chans[sessionID]; ok {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// zapSlogHandler sends mcp-go's slog records to the zap logger, so that they
// reach stderr at the configured level.
type zapSlogHandler struct {
	log   *zap.Logger
	attrs []zap.Field
}

// Enabled implements slog.Handler.
func (h zapSlogHandler) Enabled(_ context.Context, level slog.Level) bool {
	return h.log.Core().Enabled(slogToZap(level))
}

// Handle implements slog.Handler.
func (h zapSlogHandler) Handle(_ context.Context, r slog.Record) error {
	fields := append([]zap.Field(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
		return true
	})
	if ce := h.log.Check(slogToZap(r.Level), r.Message); ce != nil {
		ce.Write(fields...)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (h zapSlogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := append([]zap.Field(nil), h.attrs...)
	for _, a := range attrs {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
	}
	return zapSlogHandler{log: h.log, attrs: fields}
}

// WithGroup implements slog.Handler.
func (h zapSlogHandler) WithGroup(name string) slog.Handler {
	return zapSlogHandler{log: h.log.Named(name), attrs: h.attrs}
}

// slogToZap maps a slog level to zap's.
func slogToZap(level slog.Level) zapcore.Level {
	switch {
	case level >= slog.LevelError:
		return zapcore.ErrorLevel
	case level >= slog.LevelWarn:
		return zapcore.WarnLevel
	case level >= slog.LevelInfo:
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}
