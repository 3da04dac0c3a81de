package transport

// The front end's defences against hostile load: what one caller, or many,
// can make the server hold (bytes, connections, sessions, time) is bounded,
// and requests from other web sites are refused. The pieces live in the
// limits*.go files: this one has the configuration, the HTTP request guard
// and the origin policy; limits_conn.go the connection cap; limits_sessions.go
// the MCP session caps and idle timeouts; limits_stdio.go the stdio line
// limit.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"
)

// Defaults of the front end's limits.
const (
	// defaultRequestLimit carries the largest python_code of the default
	// --code-limit (1 MiB) however it is escaped: JSON spells a control
	// character as \u00XX, six bytes for one, so 1 MiB of code takes at most
	// 6 MiB, plus the envelope. A larger --code-limit raises it (see
	// requestLimitFor).
	defaultRequestLimit = 8 << 20
	// defaultReadTimeout is how long a client may take to send a request's
	// headers, and then its body: a local client needs milliseconds, and a
	// body of the default limit crosses a 4 Mbit/s link in about 16 s.
	defaultReadTimeout = 30 * time.Second
	// defaultMaxConnections keeps the server well under its open-file limit
	// (Go raises the soft limit to the hard one, some thousands at least
	// where the server runs), with room for the workers' pipes and sockets;
	// at about 30 KiB a connection it is some 30 MiB.
	defaultMaxConnections = 1024
	// defaultMaxMCPSessions is far more clients than the workers can serve
	// at once (calls past --workers plus --queue are refused anyway), and
	// small enough that sessions holding a stream each leave most of
	// --max-connections to requests.
	defaultMaxMCPSessions = 256
	// defaultMCPSessionIdle outlasts a pause in a conversation, and frees
	// the slot of a client that left without closing its session within
	// half an hour.
	defaultMCPSessionIdle = 30 * time.Minute
)

// Fixed limits of the HTTP server.
const (
	// maxHeaderBytes bounds a request's header block (Go's default is
	// 1 MiB): MCP requests send a few hundred bytes of headers, and 1 MiB on
	// each of --max-connections connections would be a gigabyte.
	maxHeaderBytes = 64 << 10
	// idleTimeout closes a keep-alive connection without a request for this
	// long; clients open a new one when they need it.
	idleTimeout = time.Minute
	// freeBodyBytes of each request body (a little less: reading needs room
	// to find the end) are read without drawing on the shared body budget:
	// small requests are bounded by the connection cap, and never wait
	// behind large ones.
	freeBodyBytes = 64 << 10
	// bodyBudgetFactor times the request limit is the memory that the bodies
	// beyond their free bytes may take at once: several requests of the
	// largest size, while --max-connections of them could otherwise hold
	// gigabytes.
	bodyBudgetFactor = 4
)

// Limits bound what callers can make the server hold. They protect
// the MCP front end (HTTP connections, MCP protocol sessions, requests);
// the workers have their own limits in supervisor.Config.
type Limits struct {
	// RequestLimit is the largest request accepted, in bytes: an HTTP
	// request body, or a line on stdin. 0 means no limit.
	RequestLimit int64
	// ReadTimeout is how long an HTTP client may take to send a request's
	// headers, and then again its body; and an SSE client its first
	// message once its stream is open.
	ReadTimeout time.Duration
	// MaxConnections caps the open HTTP connections; 0 means no cap.
	MaxConnections int
	// MaxMCPSessions caps the live MCP protocol sessions: Streamable HTTP
	// sessions, or SSE streams (each is one session). 0 means no cap.
	MaxMCPSessions int
	// MaxMCPSessionsPerPrincipal caps the live MCP protocol sessions of
	// one authenticated caller; 0 means no cap.
	MaxMCPSessionsPerPrincipal int
	// MCPSessionIdle ends an MCP protocol session that has had no request
	// for this long; 0 means never.
	MCPSessionIdle time.Duration
	// AllowOrigins lists the web origins, as scheme://host[:port], whose
	// pages may call the HTTP modes besides local ones; "*" allows every
	// origin.
	AllowOrigins []string
}

// requestLimitFor returns the default request limit for a code limit: big
// enough for the largest code escaped as JSON, at most math.MaxInt.
func requestLimitFor(codeLimit int64) int64 {
	if codeLimit > (math.MaxInt-1<<20)/6 {
		return math.MaxInt
	}
	return max(defaultRequestLimit, 6*codeLimit+1<<20)
}

// DefaultLimits returns the limits of a server whose flags are not
// set, for a code limit.
func DefaultLimits(codeLimit int64) Limits {
	return Limits{
		RequestLimit:   requestLimitFor(codeLimit),
		ReadTimeout:    defaultReadTimeout,
		MaxConnections: defaultMaxConnections,
		MaxMCPSessions: defaultMaxMCPSessions,
		MCPSessionIdle: defaultMCPSessionIdle,
	}
}

// NormalizeOrigin returns an origin as scheme://host[:port], lower case and
// without the scheme's default port, as browsers send it; false for anything
// else (a path, credentials, "null"). --allow-origin's entries are checked
// with it, and the Origin headers compared through it.
func NormalizeOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

// isLoopbackName reports whether host (a name or an IP address, without a
// port; an IPv6 address with or without brackets) is this machine: localhost
// or a loopback address.
func isLoopbackName(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostOnly returns the host of a host[:port] such as a Host header.
func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// originPolicy decides which requests a browser may make.
type originPolicy struct {
	any     bool                // "*" was allowed
	allowed map[string]struct{} // normalised origins
}

// newOriginPolicy returns the policy for --allow-origin's entries.
func newOriginPolicy(origins []string) originPolicy {
	p := originPolicy{allowed: map[string]struct{}{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
		} else if n, ok := NormalizeOrigin(o); ok {
			p.allowed[n] = struct{}{}
		}
	}
	return p
}

// check returns why r must be refused with 403, or "" to serve it. Two
// rules keep web pages that a user visits from driving a local server:
//
//   - DNS rebinding: on a connection to a loopback address, the Host header
//     must name this machine too, as mcp-go checks for /mcp; here it holds
//     for every path, the probes and metrics included.
//   - Origin: the MCP transport specification requires servers to check it.
//     A request without one comes from a program, not a browser, and is
//     served; one from a page is served when --allow-origin lists the page's
//     origin, or when both the page and the connection are local.
func (p originPolicy) check(r *http.Request) (reason, detail string) {
	local := false
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && addr != nil {
		local = isLoopbackName(hostOnly(addr.String()))
	}
	if local && !isLoopbackName(hostOnly(r.Host)) {
		return "host", fmt.Sprintf("Host header %q does not name this machine, which the request reached over a loopback address", r.Host)
	}
	origins := r.Header.Values("Origin")
	if len(origins) == 0 || p.any {
		return "", ""
	}
	if len(origins) == 1 {
		if origin, ok := NormalizeOrigin(origins[0]); ok {
			if _, ok := p.allowed[origin]; ok {
				return "", ""
			}
			if u, err := url.Parse(origin); err == nil && local && isLoopbackName(u.Hostname()) {
				return "", ""
			}
		}
	}
	return "origin", fmt.Sprintf("Origin %q is not allowed; allow a web page's origin with --allow-origin", strings.Join(origins, ", "))
}

// JSON-RPC error codes of the front end's refusals: -32600 for a request
// that is itself wrong (too large), and -32000, the first of the codes left
// to servers, for the rest, as the MCP TypeScript SDK answers them.
const (
	codeInvalidRequest = mcp.INVALID_REQUEST
	codeRefused        = -32000
)

// writeJSONRPCError answers with an HTTP status and a JSON-RPC error
// response, so that MCP clients can show the message. id is the request's
// ID when known, else nil for null.
func writeJSONRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(jsonRPCError(id, code, message), '\n'))
}

// errorResponse is a JSON-RPC error response.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   errorObject     `json:"error"`
}

// errorObject is the error of an errorResponse.
type errorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// jsonRPCError returns a JSON-RPC error response.
func jsonRPCError(id json.RawMessage, code int, message string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, err := json.Marshal(errorResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Error: errorObject{code, message}})
	if err != nil { // only an ID that is not JSON, which callers never pass
		return jsonRPCError(nil, code, message)
	}
	return body
}

// tooLargeMessage is the error of a request over the limit.
func tooLargeMessage(limit int64) string {
	return fmt.Sprintf("request too large: over the limit of %s (%d bytes); the server's --request-limit sets it",
		humanize.IBytes(uint64(limit)), limit)
}

// frontEnd holds the limits of an HTTP front end and what they count.
type frontEnd struct {
	limits  Limits
	origins originPolicy
	log     *zap.Logger
	// budget is shared by the request bodies beyond their free bytes; nil
	// without a request limit.
	budget *semaphore.Weighted

	rejected    *prometheus.CounterVec // by reason
	connections prometheus.GaugeFunc
	sessions    prometheus.GaugeFunc
	conns       connCount
	// liveSessions counts the live MCP protocol sessions; set by the
	// transport.
	liveSessions func() int
}

// newFrontEnd returns the limits l of an HTTP front end.
func newFrontEnd(l Limits, log *zap.Logger) *frontEnd {
	f := &frontEnd{limits: l, origins: newOriginPolicy(l.AllowOrigins), log: log, liveSessions: func() int { return 0 }}
	if l.RequestLimit > 0 {
		f.budget = semaphore.NewWeighted(bodyBudgetFactor * l.RequestLimit)
	}
	f.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_run_python_http_rejected_total",
		Help: "HTTP requests and connections refused by the front end's limits, by reason.",
	}, []string{"reason"})
	for _, reason := range []string{"host", "origin", "request_too_large", "read_timeout", "busy",
		"mcp_sessions_full", "connection_evicted", "connection_refused"} {
		f.rejected.WithLabelValues(reason)
	}
	f.connections = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcp_run_python_http_connections",
		Help: "Open HTTP connections.",
	}, func() float64 { return float64(f.conns.open()) })
	f.sessions = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcp_run_python_mcp_sessions",
		Help: "Live MCP protocol sessions: Streamable HTTP sessions, or SSE streams.",
	}, func() float64 { return float64(f.liveSessions()) })
	return f
}

// collectors returns the front end's metrics, for the probes' registry.
func (f *frontEnd) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.rejected, f.connections, f.sessions}
}

// reject counts a refusal.
func (f *frontEnd) reject(reason string) {
	f.rejected.WithLabelValues(reason).Inc()
}

// guard returns next behind the checks that every HTTP request passes:
// Host and Origin, then the request limit and the read timeout on its body.
func (f *frontEnd) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason, detail := f.origins.check(r); reason != "" {
			f.reject(reason)
			f.log.Debug("request refused", zap.String("reason", reason), zap.String("detail", detail))
			writeJSONRPCError(w, http.StatusForbidden, nil, codeRefused, "Forbidden: "+detail)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, held, ok := f.readBody(w, r)
			if !ok {
				return
			}
			defer f.release(held)
			r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// The request is in: from now on the connection serves it, and a
		// new client may no longer take its place.
		if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			c.serving()
		}
		next.ServeHTTP(w, r)
	})
}

// bodyKey is the context key of a request body that guard has read.
type bodyKey struct{}

// requestBody returns r's body: the one guard has read, or else (a handler
// served without guard, as in tests) read now.
func requestBody(r *http.Request) ([]byte, error) {
	if body, ok := r.Context().Value(bodyKey{}).([]byte); ok {
		return body, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, nil
}

// errBodyBudget reports that the body budget stayed spent until the read
// timeout.
var errBodyBudget = errors.New("the server is receiving too many large requests")

// readBody reads r's whole body under the request limit, the read timeout
// and the body budget. It answers the request itself when it fails. It
// returns the body and the budget it holds, which the caller releases once
// the request is served.
func (f *frontEnd) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int64, bool) {
	limit := f.limits.RequestLimit
	rc := http.NewResponseController(w)
	if limit > 0 && r.ContentLength > limit {
		abandonBody(rc)
		f.tooLarge(w, limit)
		return nil, 0, false
	}
	deadline := time.Now().Add(f.limits.ReadTimeout)
	_ = rc.SetReadDeadline(deadline)
	body := r.Body
	if limit > 0 {
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	buf, held, err := f.readAll(ctx, body, r.ContentLength)
	if err == nil {
		// The deadline holds for the body only: cleared, it does not cut
		// the response streams that follow some requests.
		_ = rc.SetReadDeadline(time.Time{})
		return buf, held, true
	}
	f.release(held)
	abandonBody(rc)
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		f.tooLarge(w, limit)
	case errors.Is(err, errBodyBudget):
		f.reject("busy")
		w.Header().Set("Connection", "close") // the rest of the body is not read
		w.Header().Set("Retry-After", "1")
		writeJSONRPCError(w, http.StatusServiceUnavailable, nil, codeRefused,
			"the server is busy receiving other large requests; try again later")
	case errors.As(err, &netErr) && netErr.Timeout():
		f.reject("read_timeout")
		w.Header().Set("Connection", "close")
		writeJSONRPCError(w, http.StatusRequestTimeout, nil, codeRefused,
			fmt.Sprintf("request body not received within %v; the server's --read-timeout sets it", f.limits.ReadTimeout))
	default: // the client went away
		w.Header().Set("Connection", "close")
		writeJSONRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest, "read request body: "+err.Error())
	}
	return nil, 0, false
}

// abandonBody gives up on the rest of a request body that will not be read,
// whose answer closes the connection. After the handler, net/http reads up to
// 256 KiB of an unread body, to reuse the connection, with no deadline: a
// client trickling a byte now and then held the connection for as long as it
// liked after its 408 or 413. A deadline already past ends that read at once.
func abandonBody(rc *http.ResponseController) {
	_ = rc.SetReadDeadline(time.Now())
}

// tooLarge answers a request over the limit with 413.
func (f *frontEnd) tooLarge(w http.ResponseWriter, limit int64) {
	f.reject("request_too_large")
	// The rest of the body is never read: the connection cannot carry
	// another request.
	w.Header().Set("Connection", "close")
	writeJSONRPCError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest, tooLargeMessage(limit))
}

// readAll reads body to its end. Buffer space beyond freeBodyBytes is drawn
// from the body budget, waiting for it until ctx ends; it returns the amount
// drawn. size is the declared length, -1 when unknown.
func (f *frontEnd) readAll(ctx context.Context, body io.Reader, size int64) ([]byte, int64, error) {
	var held int64
	// The buffer starts small whatever the declared size, which costs
	// nothing to declare: a slow client must send the bytes it makes the
	// server hold.
	buf := make([]byte, 0, int(min(max(size+1, 512), 4<<10)))
	for {
		if len(buf) == cap(buf) {
			want := max(2*cap(buf), 512)
			if limit := f.limits.RequestLimit; limit > 0 {
				want = int(min(int64(want), limit+1)) // +1: to see that the body is over
			}
			if f.budget != nil {
				if need := int64(want-freeBodyBytes) - held; need > 0 {
					if err := f.budget.Acquire(ctx, need); err != nil {
						return nil, held, fmt.Errorf("%w: %w", errBodyBudget, err)
					}
					held += need
				}
			}
			grown := make([]byte, len(buf), want)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// release returns budget drawn by readAll.
func (f *frontEnd) release(held int64) {
	if held > 0 {
		f.budget.Release(held)
	}
}

// retryAfter is the Retry-After of a refusal for lack of room, in seconds.
const retryAfter = 5

// refuseFull answers 503 for lack of room: an MCP session or a stream.
func refuseFull(w http.ResponseWriter, id json.RawMessage, message string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeJSONRPCError(w, http.StatusServiceUnavailable, id, codeRefused, message)
}
