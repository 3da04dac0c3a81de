// Package transport serves the MCP server of package mcpserver over stdio,
// Streamable HTTP (with sessions or stateless) and HTTP+SSE, behind the
// front end's own limits and, in the HTTP modes, beside the probes; and it
// shuts each down gracefully.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/slogzap"
)

// Paths of the HTTP modes.
const (
	streamablePath  = "/mcp"
	sseStreamPath   = "/sse"
	sseMessagesPath = "/messages"
)

// flushTimeout bounds each of the last steps of a shutdown, once no call
// runs any more: results reaching their clients, connections closing.
const flushTimeout = 2 * time.Second

// Options is what every transport is built from: its MCP server's options
// and the limits of the front end.
type Options struct {
	mcpserver.Options
	// CodeLimit is the supervisor's largest code, in bytes (0: none): the
	// default request limit leaves room for it. The supervisor enforces it.
	CodeLimit int
	// Limits bound what callers can make the front end hold; nil means the
	// defaults for CodeLimit.
	Limits *Limits
	// Auth is who may call the HTTP modes; nil lets anyone.
	Auth *Auth
	// TLSCert and TLSKey are the PEM files of the HTTP modes' certificate
	// (chain included) and key; empty for plain HTTP.
	TLSCert, TLSKey string
}

// frontEndLimits returns o.Limits, or the defaults when it is nil.
func (o Options) frontEndLimits() Limits {
	if o.Limits != nil {
		return *o.Limits
	}
	return DefaultLimits(int64(o.CodeLimit))
}

// stdioToolWorkers returns how many tool calls the stdio server runs at once.
// mcp-go's default is 5. Calls beyond the worker limit should wait inside
// Run, where notifications/cancelled can reach them, rather than in mcp-go's
// queue, where it cannot.
func stdioToolWorkers(workers int) int {
	return min(max(4*workers, 32), maxStdioWorkers)
}

// ServeStdio serves MCP on in and out, written as upstream writes it (see
// literalWriter), until in ends or ctx is done.
//
// When in ends, no more requests come, and those read are answered before
// ServeStdio returns: calls in flight finish, each within its own time
// limit, as upstream's did, so that requests can be piped in.
//
// When ctx is done it shuts down gracefully: new calls are refused while
// stdin is still read (so that notifications/cancelled reach the running
// calls), running calls get o.Calls's timeout to finish and their results
// are written, and those that outlast it are cancelled.
func ServeStdio(ctx context.Context, o Options, workers int, in io.Reader, out io.Writer) error {
	in, closeIn := pollableStdin(in)
	mcpServer := mcpserver.New(o.Options, true, &server.Hooks{})
	// The requests read and not answered yet.
	unanswered := newPendingResponses()
	w := &syncWriter{w: &literalWriter{w: out}, written: func(msg []byte) {
		if !unanswered.has("") {
			return
		}
		if key, ok := (mcpGo{}).responseKey(msg); ok {
			unanswered.done("", key)
		}
	}}
	limit := o.frontEndLimits().RequestLimit
	// Lines over the limit get an error response, through w so that it does
	// not interleave with mcp-go's, and the server reads on.
	lines := newLineLimitReader(in, int(limit), func(prefix []byte, size int64) {
		o.Log.Warn("a line on stdin over the request limit was skipped",
			zap.Int64("bytes", size), zap.Int64("limit", limit))
		_, _ = w.Write(oversizedLineError(prefix, size, int(limit)))
	})
	lines.onLine = func(line []byte) {
		if key, ok := decodeMessage(line).requestKey(); ok {
			unanswered.add("", key)
		}
	}
	stdio := server.NewStdioServer(mcpServer)
	for _, opt := range []server.StdioOption{
		server.WithErrorLogger(zap.NewStdLog(o.Log)),
		server.WithWorkerPoolSize(stdioToolWorkers(workers)),
		server.WithStdioContextFunc(func(ctx context.Context) context.Context {
			return mcpserver.WithNotifier(ctx, stdioNotifier{out: w})
		}),
	} {
		opt(stdio)
	}
	// mcp-go cancels every request as soon as Listen's context ends, so it
	// gets one of its own, ended only once the calls are over.
	listenCtx, stopListening := context.WithCancel(context.WithoutCancel(ctx))
	defer stopListening()
	// mcp-go also cancels them, and drops the calls still queued, as soon as
	// it reads the end of stdin: it reads it only once they are answered, or
	// the shutdown has ended them.
	lines.atEnd = func() { _ = unanswered.wait(listenCtx) }
	listened := make(chan error, 1)
	// Listen writes every message through w, which stdioNotifier shares.
	go func() { listened <- stdio.Listen(listenCtx, lines, w) }()
	var err error
	select {
	case err = <-listened: // stdin ended, and every request read was answered
	case <-ctx.Done():
		o.Calls.Shutdown(o.Log)
		// Listen returns once its tool workers have written their results.
		stopListening()
		select {
		case err = <-listened:
		case <-time.After(flushTimeout):
			o.Log.Warn("the stdio server did not stop", zap.Duration("waited", flushTimeout))
			return nil // stdin stays open: Listen still reads it
		}
	}
	closeIn()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("stdio: %w", err)
	}
	return nil
}

// HTTPFrontEnd is the HTTP handler of one of the HTTP modes, with what its
// graceful shutdown needs: the program builds it with NewHTTPFrontEnd, adds
// the probes, and serves it with ServeHTTP, which applies the limits.
type HTTPFrontEnd struct {
	handler http.Handler
	// closeSessions ends the long-lived streams (SSE streams, standalone GET
	// streams) so that a graceful shutdown need not wait for them.
	closeSessions func(ctx context.Context)
	// pending holds the requests whose response has not reached its client
	// yet: a shutdown closes the sessions only once it is empty.
	pending *pendingResponses
	// calls admits the tool calls and stops them at shutdown.
	calls *mcpserver.CallGate
	// front holds the limits that ServeHTTP applies to every connection and
	// request, and what they count.
	front *frontEnd
	// protectMetrics puts /metrics behind the tokens; nil leaves it open.
	protectMetrics func(http.Handler) http.Handler
	// tls is the server's TLS configuration; nil for plain HTTP.
	tls *tls.Config
}

// Kind is one of the HTTP transports; the command line's HTTP modes name
// them.
type Kind int

// The HTTP transports.
const (
	// SSE is the 2024-11-05 HTTP+SSE transport.
	SSE Kind = iota + 1
	// StreamableHTTP is Streamable HTTP with sessions.
	StreamableHTTP
	// StreamableHTTPStateless is Streamable HTTP without sessions.
	StreamableHTTPStateless
)

// Path is where the clients of k connect, for the program to announce.
func (k Kind) Path() string {
	if k == SSE {
		return sseStreamPath
	}
	return streamablePath
}

// NewHTTPFrontEnd builds the handler of kind, behind o.Auth's tokens, and
// loads o's certificate.
func NewHTTPFrontEnd(kind Kind, o Options) (*HTTPFrontEnd, error) {
	g, err := newGuard(o.Auth, o.Log)
	if err != nil {
		return nil, err
	}
	var fe *HTTPFrontEnd
	switch kind {
	case SSE:
		fe = newSSEFrontEnd(o)
	case StreamableHTTP:
		fe = newStreamableFrontEnd(o, false)
	case StreamableHTTPStateless:
		fe = newStreamableFrontEnd(o, true)
	default:
		return nil, fmt.Errorf("no HTTP transport of kind %d", kind)
	}
	fe.handler = frontHandler{Handler: g.mcp(fe.handler), front: fe.front}
	fe.protectMetrics = g.metrics
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		fe.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return fe, nil
}

// AddProbes serves p's endpoints beside MCP; the program adds them to every
// HTTP mode.
func (fe *HTTPFrontEnd) AddProbes(p Probes) {
	fe.handler = p.handler(fe.handler, fe.protectMetrics)
}

// TLS reports whether fe serves HTTPS.
func (fe *HTTPFrontEnd) TLS() bool { return fe.tls != nil }

// frontHandler is the handler of Streamable HTTP. It carries the front
// end's metrics to Probes.handler, which registers them with the others, as
// sseHandler does.
type frontHandler struct {
	http.Handler
	front *frontEnd
}

// collectors returns the front end's metrics.
func (h frontHandler) collectors() []prometheus.Collector { return h.front.collectors() }

// corsOrigins returns the origins to answer CORS requests for: those of
// --allow-origin, without which browsers could not read the answers.
func corsOrigins(l Limits) []server.CORSOption {
	if len(l.AllowOrigins) == 0 {
		return nil
	}
	return []server.CORSOption{server.WithCORSAllowedOrigins(l.AllowOrigins...)}
}

// newSSEFrontEnd serves the 2024-11-05 HTTP+SSE transport: GET /sse opens the
// stream and announces /messages?sessionId=..., where the client POSTs.
func newSSEFrontEnd(o Options) *HTTPFrontEnd {
	front := newFrontEnd(o.frontEndLimits(), o.Log)
	pending := newPendingResponses()
	streams := newSSEStreams(front.limits, pending)
	front.liveSessions = streams.count
	hooks := &server.Hooks{}
	watch := newSessionWatch()
	watch.install(hooks)
	hooks.AddOnRegisterSession(func(ctx context.Context, session server.ClientSession) {
		// ctx is the request context of the GET that opens the stream.
		if stream, ok := ctx.Value(sseStreamKey{}).(*sseStream); ok {
			stream.setSessionID(session.SessionID())
			streams.register(session.SessionID(), stream)
		}
	})
	mcpServer, tasks := mcpserver.NewWithTasks(o.Options, true, hooks)
	asks := mcpserver.NewClientRequests()
	var sse *server.SSEServer
	sse = server.NewSSEServer(mcpServer,
		server.WithSSEEndpoint(sseStreamPath),
		server.WithMessageEndpoint(sseMessagesPath),
		server.WithSSEContextFunc(func(ctx context.Context, _ *http.Request) context.Context {
			session := server.ClientSessionFromContext(ctx)
			if session == nil {
				return ctx
			}
			ctx = mcpserver.WithNotifier(ctx, sseNotifier{events: sse, sessionID: session.SessionID()})
			ctx = mcpserver.WithClientRequests(ctx, asks, session.SessionID())
			return mcpserver.WithSessionDone(ctx, watch.done(session.SessionID()))
		}),
		server.WithSSECORS(corsOrigins(front.limits)...),
	)
	return &HTTPFrontEnd{
		handler:       &sseHandler{sse: sse, pending: pending, streams: streams, front: front, tasks: tasks, asks: asks},
		closeSessions: func(context.Context) { sse.CloseSessions() },
		pending:       pending,
		calls:         o.Calls,
		front:         front,
	}
}

// sseHandler wraps mcp-go's SSE server to follow each request from its POST
// until its response is written to the session's stream. mcp-go queues a
// response after the handler returns and writes it from the stream's own
// goroutine, so a shutdown that closed the sessions as soon as the calls
// returned would lose their results.
type sseHandler struct {
	sse     *server.SSEServer
	pending *pendingResponses
	streams *sseStreams // caps the streams and ends the idle ones
	front   *frontEnd
	tasks   *mcpserver.Tasks // whose task each status is (taskstatus.go)
	asks    *mcpserver.ClientRequests
}

// collectors returns the front end's metrics, for Probes.handler.
func (h *sseHandler) collectors() []prometheus.Collector { return h.front.collectors() }

// ServeHTTP implements http.Handler.
func (h *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == sseStreamPath:
		h.serveStream(w, r)
	case r.Method == http.MethodPost && r.URL.Path == sseMessagesPath:
		h.serveMessage(w, r)
	default:
		h.sse.ServeHTTP(w, r)
	}
}

// serveStream serves a session's event stream through an sseStream, which
// marks responses delivered as they are flushed. Each stream is an MCP
// session: past the cap a new one gets 503, and one idle for too long is
// closed.
func (h *sseHandler) serveStream(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		h.sse.ServeHTTP(w, r)
		return
	}
	principal := principalOf(r)
	if err := h.streams.acquire(principal); err != nil {
		h.front.reject("mcp_sessions_full")
		refuseFull(w, nil, err.Error())
		return
	}
	defer h.streams.release(principal)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream := &sseStream{ResponseWriter: w, flusher: f, pending: h.pending, principal: principalOf(r)}
	h.streams.watchIdle(stream, cancel)
	defer stream.stopIdle()
	r = r.WithContext(context.WithValue(ctx, sseStreamKey{}, stream))
	h.sse.ServeHTTP(filterTaskStatus(stream, h.tasks, stream.sessionID), r)
	h.streams.unregister(stream.sessionID(), stream)
	// Nothing more reaches this session.
	h.pending.dropGroup(stream.sessionID())
}

// serveMessage records a request as pending before mcp-go sees it; mcp-go
// answers 202 and sends the response on the stream later.
func (h *sseHandler) serveMessage(w http.ResponseWriter, r *http.Request) {
	body, err := requestBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msg := decodeMessage(body)
	session := r.URL.Query().Get("sessionId")
	if session != "" && !h.streams.ownedBy(session, principalOf(r)) {
		// Another principal's session is, to this one, no session at all.
		q := r.URL.Query()
		q.Set("sessionId", unknownSessionID())
		r.URL.RawQuery = q.Encode()
		session = ""
	}
	h.streams.message(session)
	if msg.isResponse() && h.asks.Deliver(session, msg.ID, body) {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	key, ok := msg.requestKey()
	if !ok {
		h.sse.ServeHTTP(w, r)
		return
	}
	h.pending.add(session, key)
	rec := &statusRecorder{ResponseWriter: w}
	h.sse.ServeHTTP(rec, r)
	if !(mcpGo{}).sseAccepted(rec.status) {
		h.pending.done(session, key) // refused: no response will follow
	}
}

// sseStreamKey is the context key of the sseStream of a GET /sse request.
type sseStreamKey struct{}

// sseStream is the ResponseWriter of one SSE stream. mcp-go writes each
// event with one Write and then flushes (see mcpGo); the responses among
// them are marked delivered at the flush.
type sseStream struct {
	http.ResponseWriter
	flusher http.Flusher
	pending *pendingResponses

	// idleTimer closes the stream when its client sends no first message
	// in time, or once it has been idle for too long; see
	// sseStreams.watchIdle. It is nil, and watched false, when neither
	// applies.
	idleTimer  *time.Timer
	watched    bool
	greeted    atomic.Bool  // the client has sent a message
	lastActive atomic.Int64 // when, in Unix nanoseconds, once greeted

	principal identity.Principal // who opened it: its session's owner

	mu      sync.Mutex
	session string
	written []string // keys of responses written, not yet flushed
}

// touch records activity on the stream: a message from its client when
// message is set, else an event sent, which counts only once the client
// has sent a message.
func (s *sseStream) touch(message bool) {
	if !s.watched {
		return
	}
	if message {
		s.lastActive.Store(time.Now().UnixNano())
		s.greeted.Store(true)
	} else if s.greeted.Load() {
		s.lastActive.Store(time.Now().UnixNano())
	}
}

// stopIdle stops watching the stream for idleness.
func (s *sseStream) stopIdle() {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
}

// setSessionID records the session the stream belongs to.
func (s *sseStream) setSessionID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session = id
}

// sessionID returns the stream's session, "" before it is registered.
func (s *sseStream) sessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

// Write implements http.ResponseWriter.
func (s *sseStream) Write(p []byte) (int, error) {
	n, err := s.ResponseWriter.Write(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != "" && s.pending.has(s.session) {
		if key, ok := (mcpGo{}).responseEvent(p); ok {
			s.written = append(s.written, key)
		}
	}
	return n, err
}

// Flush implements http.Flusher.
func (s *sseStream) Flush() {
	s.flusher.Flush()
	s.touch(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.written {
		s.pending.done(s.session, key)
	}
	s.written = nil
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (s *sseStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// statusRecorder records the status code a handler answers with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// pendingResponses holds the requests whose response has not reached the
// client yet, by group (an SSE session; Streamable HTTP and stdio use one
// group).
type pendingResponses struct {
	mu      sync.Mutex
	groups  map[string]map[string]struct{}
	n       int
	changed chan struct{} // closed and replaced whenever n falls
	next    atomic.Uint64 // for unique keys
}

// newPendingResponses returns an empty set.
func newPendingResponses() *pendingResponses {
	return &pendingResponses{groups: map[string]map[string]struct{}{}, changed: make(chan struct{})}
}

// uniqueKey returns a key no other caller gets.
func (p *pendingResponses) uniqueKey() string {
	return "u:" + strconv.FormatUint(p.next.Add(1), 10)
}

// add records a pending response.
func (p *pendingResponses) add(group, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := p.groups[group]
	if keys == nil {
		keys = map[string]struct{}{}
		p.groups[group] = keys
	}
	if _, ok := keys[key]; !ok {
		keys[key] = struct{}{}
		p.n++
	}
}

// done records that a response reached its client.
func (p *pendingResponses) done(group, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := p.groups[group]
	if _, ok := keys[key]; !ok {
		return
	}
	delete(keys, key)
	if len(keys) == 0 {
		delete(p.groups, group)
	}
	p.fell(1)
}

// dropGroup forgets the responses of a group that no client will receive.
func (p *pendingResponses) dropGroup(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.groups[group]); n > 0 {
		delete(p.groups, group)
		p.fell(n)
	}
}

// fell lowers the count by n and wakes the waiters; p.mu is held.
func (p *pendingResponses) fell(n int) {
	p.n -= n
	close(p.changed)
	p.changed = make(chan struct{})
}

// has reports whether a group has pending responses.
func (p *pendingResponses) has(group string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.groups[group]) > 0
}

// wait returns once no response is pending, or with ctx's error.
func (p *pendingResponses) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		n, changed := p.n, p.changed
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d response(s) not delivered: %w", n, ctx.Err())
		}
	}
}

// newStreamableFrontEnd serves Streamable HTTP at /mcp, with sessions or
// stateless.
func newStreamableFrontEnd(o Options, stateless bool) *HTTPFrontEnd {
	front := newFrontEnd(o.frontEndLimits(), o.Log)
	hooks := &server.Hooks{}
	listen := newListenStreams()
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		listen.end(session.SessionID())
	})
	mcpServer, tasks := mcpserver.NewWithTasks(o.Options, !stateless, hooks)
	opts := []server.StreamableHTTPOption{
		server.WithEndpointPath(streamablePath),
		server.WithStreamableHTTPLogger(slogzap.New(o.Log)),
		server.WithStreamableHTTPCORS(corsOrigins(front.limits)...),
	}
	var ids *sessionIDs
	if stateless {
		opts = append(opts, server.WithStateLess(true))
	} else {
		ids = newSessionIDs(front.limits)
		// Session IDs must name a live session of this server; mcp-go's
		// default only checks their format.
		opts = append(opts, server.WithSessionIdManagerResolver(ids))
		front.liveSessions = ids.count
		if ttl := front.limits.MCPSessionIdle; ttl > 0 {
			opts = append(opts, server.WithSessionIdleTTL(ttl))
		}
	}
	streamable := server.NewStreamableHTTPServer(mcpServer, opts...)
	pending := newPendingResponses()
	mux := http.NewServeMux()
	mux.Handle(streamablePath, &streamableHandler{
		next: streamable, stateless: stateless, pending: pending,
		ids: ids, listen: listen, front: front, tasks: tasks,
		asks: mcpserver.NewClientRequests(),
	})
	return &HTTPFrontEnd{
		handler: frontHandler{Handler: mux, front: front},
		// Shutdown, rather than CloseSessions, also stops the idle sweeper.
		closeSessions: func(ctx context.Context) { _ = streamable.Shutdown(ctx) },
		pending:       pending,
		calls:         o.Calls,
		front:         front,
	}
}

// streamableHandler wraps mcp-go's Streamable HTTP handler.
type streamableHandler struct {
	next      http.Handler
	stateless bool
	pending   *pendingResponses // POSTs in flight: each carries its response
	ids       *sessionIDs       // the live sessions (with sessions only)
	listen    *listenStreams    // the GET streams (with sessions only)
	front     *frontEnd
	tasks     *mcpserver.Tasks // whose task each status is (taskstatus.go)
	// asks carries the sampling and elicitation requests of a call to an
	// older client on the call's own POST stream, and takes the responses
	// its client POSTs.
	asks *mcpserver.ClientRequests
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
//   - With sessions, an initialize past --max-mcp-sessions gets 503, and a
//     GET stream must name a live session that has no stream yet (see
//     serveListen).
func (h *streamableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.stateless && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
		writeMethodNotAllowed(w)
		return
	}
	if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !h.stateless && !h.ids.ownedBy(id, principalOf(r)) {
		// Another principal's session is, to this one, no session at all.
		r.Header.Set(server.HeaderKeySessionID, unknownSessionID())
	}
	if !h.stateless && r.Method == http.MethodGet && !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		var st *listenStream
		if r, st = h.serveListen(w, r); st == nil {
			return
		}
		defer h.listen.stop(r.Header.Get(server.HeaderKeySessionID), st)
	}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := requestBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg := decodeMessage(body)
		if unaddressableCancel(h.stateless, r.Header, msg) ||
			msg.isResponse() && h.asks.Deliver(r.Header.Get(server.HeaderKeySessionID), msg.ID, body) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if !h.stateless && msg.isInitialize() {
			var res *reservation
			if r, res, err = h.ids.reserve(r); err != nil {
				h.front.reject("mcp_sessions_full")
				refuseFull(w, msg.requestID(), err.Error())
				return
			}
			defer h.ids.unreserve(res)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := h.pending.uniqueKey()
		h.pending.add("", key)
		defer h.pending.done("", key)
	}
	if f, ok := w.(http.Flusher); ok {
		stream := newCallStream(w, f)
		session := r.Header.Get(server.HeaderKeySessionID)
		ctx := mcpserver.WithNotifier(r.Context(), httpNotifier{stream: stream})
		r = r.WithContext(mcpserver.WithClientRequests(ctx, h.asks, session))
		w = filterTaskStatus(stream, h.tasks, func() string { return session })
	}
	h.next.ServeHTTP(w, r)
}

// serveListen admits a standalone GET stream, as the MCP TypeScript SDK
// does: it needs the Mcp-Session-Id of a live session (400 without, 404 for
// another), and a session has one stream at most (409 for a second). mcp-go
// would open a stream, and register a new session, for any ID or none,
// outside the session cap. It returns r with the stream's context, which
// the end of its session cancels, and the stream; nil when it has answered.
func (h *streamableHandler) serveListen(w http.ResponseWriter, r *http.Request) (*http.Request, *listenStream) {
	id := r.Header.Get(server.HeaderKeySessionID)
	switch {
	case id == "":
		writeJSONRPCError(w, http.StatusBadRequest, nil, codeRefused, "Bad Request: the Mcp-Session-Id header is required")
		return r, nil
	case !h.ids.isLive(id):
		writeJSONRPCError(w, http.StatusNotFound, nil, codeRefused, "Session not found")
		return r, nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	st, ok := h.listen.start(id, cancel)
	if !ok {
		cancel()
		writeJSONRPCError(w, http.StatusConflict, nil, codeRefused, "Conflict: only one stream is allowed per session")
		return r, nil
	}
	return r.WithContext(ctx), st
}

// writeMethodNotAllowed answers as upstream's stateless server did.
func writeMethodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Method not allowed."},"id":null}`)
}

// unaddressableCancel reports whether msg is a notifications/cancelled that
// mcp-go could only match against a shared session (see streamableHandler).
func unaddressableCancel(stateless bool, header http.Header, msg message) bool {
	version, ok := msg.isCancel()
	if !ok {
		return false
	}
	return stateless ||
		mcp.IsModernProtocol(header.Get(mcp.HeaderProtocolVersion)) ||
		mcp.IsModernProtocol(version)
}

// ServeHTTP serves fe on ln until ctx is done, then shuts down gracefully:
// the listener closes and new calls are refused, running calls get
// fe.calls's timeout to finish and are cancelled after it, their results
// reach their clients, and then the long-lived streams are closed.
//
// Every request passes fe's guard (Host, Origin, request limit, read
// timeout), the connections are capped (see connLimiter), and the JSON
// goes out as upstream writes it (see literalJSON).
func ServeHTTP(ctx context.Context, ln net.Listener, fe *HTTPFrontEnd, log *zap.Logger) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	if fe.front == nil {
		fe.front = newFrontEnd(DefaultLimits(0), log)
	}
	conns := newConnLimiter(ln, fe.front)
	srv := &http.Server{
		// Every message leaves as upstream writes it (see literalJSON).
		// guard's own refusals, which upstream has not, are left out: its
		// http.MaxBytesReader must have net/http's own ResponseWriter,
		// which then lingers over the unread body rather than resetting
		// the connection under the 413 (TestLargeBodyOverTCP).
		Handler: fe.front.guard(literalJSON(fe.handler)),
		// No ReadTimeout or WriteTimeout: they would cut the streams.
		// guard bounds the body's reading instead.
		ReadHeaderTimeout: fe.front.limits.ReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         conns.connState,
		ConnContext:       withConn,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          zap.NewStdLog(log),
	}
	served := make(chan error, 1)
	if fe.tls != nil {
		srv.TLSConfig = fe.tls
		go func() { served <- srv.ServeTLS(conns, "", "") }()
	} else {
		go func() { served <- srv.Serve(conns) }()
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}

	fe.calls.Close()
	// Shutdown closes the listener and idle connections at once and returns
	// when the rest are idle, which needs the sessions closed.
	shutdownCtx, cancelShutdown := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelShutdown()
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(shutdownCtx) }()
	// With the listener closed no client can retry a parked call.
	fe.calls.EndRetries()
	fe.calls.Shutdown(log)
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancelFlush()
	if err := fe.pending.wait(flushCtx); err != nil {
		log.Warn("results lost at shutdown", zap.Error(err))
	}
	fe.closeSessions(flushCtx)
	select {
	case err := <-shutdown:
		if err != nil {
			log.Warn("shut down the HTTP server", zap.Error(err))
		}
	case <-time.After(flushTimeout):
		log.Warn("connections still open at shutdown are closed")
		cancelShutdown()
		cancelBase()
		_ = srv.Close()
		<-shutdown
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
