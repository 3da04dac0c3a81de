package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// TestOriginPolicy covers the Host and Origin rules of every HTTP request.
func TestOriginPolicy(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3001}
	lan := &net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 3001}
	tests := []struct {
		name    string
		local   net.Addr // the connection's local address
		host    string
		origins []string // Origin headers
		allow   []string // --allow-origin
		want    string   // the reason, "" to serve
	}{
		{"program on loopback", loopback, "127.0.0.1:3001", nil, nil, ""},
		{"localhost name", loopback, "localhost:3001", nil, nil, ""},
		{"IPv6 loopback", loopback, "[::1]:3001", nil, nil, ""},
		{"another loopback address", loopback, "127.0.0.2", nil, nil, ""},
		{"rebound name on loopback", loopback, "evil.example:3001", nil, nil, "host"},
		{"name that starts like loopback", loopback, "127.0.0.1.evil.example", nil, nil, "host"},
		{"any name on another interface", lan, "mcp.example.com", nil, nil, ""},
		{"local page on a local server", loopback, "127.0.0.1:3001", []string{"http://localhost:5173"}, nil, ""},
		{"local page by address", loopback, "127.0.0.1:3001", []string{"http://127.0.0.1:3001"}, nil, ""},
		{"local page on IPv6", loopback, "localhost:3001", []string{"http://[::1]:8080"}, nil, ""},
		{"local page on another interface", lan, "192.168.1.5:3001", []string{"http://localhost:5173"}, nil, "origin"},
		{"foreign page", loopback, "127.0.0.1:3001", []string{"https://evil.example"}, nil, "origin"},
		{"foreign page posing as loopback", loopback, "127.0.0.1:3001", []string{"http://127.0.0.1.evil.example"}, nil, "origin"},
		{"opaque origin", loopback, "127.0.0.1:3001", []string{"null"}, nil, "origin"},
		{"two origins", loopback, "127.0.0.1:3001", []string{"http://localhost", "https://evil.example"}, nil, "origin"},
		{"allowed origin", lan, "mcp.example.com", []string{"https://app.example.com"}, []string{"https://app.example.com"}, ""},
		{"allowed origin spelled otherwise", lan, "mcp.example.com", []string{"https://APP.example.com:443"}, []string{"https://app.example.com"}, ""},
		{"allowed host on another scheme", lan, "mcp.example.com", []string{"http://app.example.com"}, []string{"https://app.example.com"}, "origin"},
		{"allowed host on another port", lan, "mcp.example.com", []string{"https://app.example.com:8443"}, []string{"https://app.example.com"}, "origin"},
		{"any origin", lan, "mcp.example.com", []string{"https://evil.example"}, []string{"*"}, ""},
		{"any origin keeps the Host rule", loopback, "evil.example", []string{"https://evil.example"}, []string{"*"}, "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			r.Host = tt.host
			for _, o := range tt.origins {
				r.Header.Add("Origin", o)
			}
			if got, detail := newOriginPolicy(tt.allow).check(r); got != tt.want {
				t.Errorf("check = %q (%s), want %q", got, detail, tt.want)
			}
		})
	}
}

// handlerFront returns a front end that serves h with the limits l.
func handlerFront(l Limits, h http.Handler) *HTTPFrontEnd {
	return &HTTPFrontEnd{
		handler:       h,
		closeSessions: func(context.Context) {},
		pending:       newPendingResponses(),
		calls:         mcpserver.NewCallGate(time.Second, time.Second),
		front:         newFrontEnd(l, zap.NewNop()),
	}
}

// bodyLength answers with the length of the request's body.
var bodyLength = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := requestBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d", len(body))
})

// jsonRPCErrorOf decodes a JSON-RPC error response.
func jsonRPCErrorOf(t *testing.T, body []byte) (id string, code int, message string) {
	t.Helper()
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("not a JSON-RPC error: %v: %q", err, body)
	}
	return string(msg.ID), msg.Error.Code, msg.Error.Message
}

// TestRequestLimit covers the request limit on HTTP bodies, declared or
// chunked, and the body budget.
func TestRequestLimit(t *testing.T) {
	const limit = 200 << 10
	tests := []struct {
		name    string
		size    int
		chunked bool
		spend   bool // the whole body budget is taken
		status  int
		mention string
	}{
		{"small", 5, false, false, http.StatusOK, ""},
		{"at the limit", limit, false, false, http.StatusOK, ""},
		{"at the limit chunked", limit, true, false, http.StatusOK, ""},
		{"one byte over", limit + 1, false, false, http.StatusRequestEntityTooLarge, "--request-limit"},
		{"one byte over chunked", limit + 1, true, false, http.StatusRequestEntityTooLarge, "--request-limit"},
		{"far over chunked", 20 << 20, true, false, http.StatusRequestEntityTooLarge, "200 KiB"},
		{"small while the budget is spent", freeBodyBytes - 1, true, true, http.StatusOK, ""},
		{"large while the budget is spent", 2 * freeBodyBytes, true, true, http.StatusServiceUnavailable, "busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fe := handlerFront(Limits{RequestLimit: limit, ReadTimeout: 300 * time.Millisecond}, bodyLength)
				srv := serveMem(t, fe)
				if tt.spend {
					budget := int64(bodyBudgetFactor * limit)
					if err := fe.front.budget.Acquire(t.Context(), budget); err != nil {
						t.Fatal(err)
					}
					defer fe.front.budget.Release(budget)
				}
				length := int64(tt.size)
				if tt.chunked {
					length = -1
				}
				start := time.Now()
				resp, got := srv.post(t, "/mcp", bytes.NewReader(bytes.Repeat([]byte("x"), tt.size)), length)
				// The budget is waited for until the read timeout; the rest
				// is answered at once.
				if took, want := time.Since(start), time.Duration(0); tt.status == http.StatusServiceUnavailable {
					if want = 300 * time.Millisecond; took != want {
						t.Errorf("answered after %v, want %v", took, want)
					}
				} else if took != want {
					t.Errorf("answered after %v, want at once", took)
				}
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d %q, want %d", resp.StatusCode, got, tt.status)
				}
				if tt.status == http.StatusOK {
					if string(got) != fmt.Sprint(tt.size) {
						t.Errorf("the handler saw %s bytes, want %d", got, tt.size)
					}
					return
				}
				if _, _, msg := jsonRPCErrorOf(t, got); !strings.Contains(msg, tt.mention) {
					t.Errorf("message %q does not mention %q", msg, tt.mention)
				}
			})
		})
	}
}

// TestLineLimitReader covers the stdio line limit.
func TestLineLimitReader(t *testing.T) {
	const limit = 10
	big := strings.Repeat("y", 200<<10) // past bufio's buffer
	tests := []struct {
		name  string
		in    string
		want  string
		sizes []int64 // of the lines reported
	}{
		{"short lines", "a\nbb\n", "a\nbb\n", nil},
		{"at the limit", "0123456789\n", "0123456789\n", nil},
		{"at the limit with CRLF", "0123456789\r\n", "0123456789\r\n", nil},
		{"over", "0123456789A\nok\n", "ok\n", []int64{12}},
		{"far over", "ok\n" + big + "\nok2\n", "ok\nok2\n", []int64{200<<10 + 1}},
		{"two over in a row", big + "\n" + big + "\nz\n", "z\n", []int64{200<<10 + 1, 200<<10 + 1}},
		{"over at the end", "ok\n" + big, "ok\n", []int64{200 << 10}},
		{"last line unterminated", "ok\nlast", "ok\nlast", nil},
		{"empty lines", "\n\n", "\n\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sizes []int64
			r := newLineLimitReader(strings.NewReader(tt.in), limit, func(prefix []byte, size int64) {
				if len(prefix) > idPrefixBytes {
					t.Errorf("prefix of %d bytes", len(prefix))
				}
				sizes = append(sizes, size)
			})
			got, err := io.ReadAll(iotestHalf{r})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("passed %q, want %q", got, tt.want)
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tt.sizes) {
				t.Errorf("reported %v, want %v", sizes, tt.sizes)
			}
		})
	}
}

// iotestHalf reads at most 3 bytes at a time, as a reader with a small
// buffer would.
type iotestHalf struct{ r io.Reader }

func (h iotestHalf) Read(p []byte) (int, error) { return h.r.Read(p[:min(len(p), 3)]) }

// TestLeadingID covers the request ID of an oversized stdio line.
func TestLeadingID(t *testing.T) {
	tests := []struct {
		prefix string
		want   string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"python_code":"xxxx`, "7"},
		{`{"id":"abc","method":"x","params":{"a":"`, `"abc"`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"python_code":"xxxx`, ""},
		{`{"method":"x","params":{"big":"xx"},"id":`, ""},
		{`{"id":null,"method":"x"`, ""},
		{`{"id":{"a":1},"method":"x"`, ""},
		{`[{"id":1,"method":"x"}`, ""},
		{`garbage`, ""},
	}
	for _, tt := range tests {
		if got := string(leadingID([]byte(tt.prefix))); got != tt.want {
			t.Errorf("leadingID(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

// TestStdioRequestLimit: over stdio, a line over the limit gets a JSON-RPC
// error with its ID, and the server reads on.
func TestStdioRequestLimit(t *testing.T) {
	o := testOptions(&mcptest.FakeRunner{})
	l := DefaultLimits(0)
	l.RequestLimit = 4 << 10
	o.Limits = &l
	clientIn, clientOut := mcptest.StdioPipes(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ServeStdio(ctx, o, 2, in, out)
	})
	go func() {
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` + strings.Repeat("x", 2<<20) + `"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/x","params":{"pad":"` + strings.Repeat("x", 8<<10) + `"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1+1"}}}`,
		} {
			if _, err := io.WriteString(clientOut, line+"\n"); err != nil {
				return
			}
		}
	}()
	lines := bufio.NewScanner(clientIn)
	lines.Buffer(nil, 1<<20)
	var got []string
	for len(got) < 4 && lines.Scan() {
		got = append(got, lines.Text())
	}
	if len(got) < 4 {
		t.Fatalf("got %d lines, want 4: %q", len(got), got)
	}
	for i, want := range []string{`7`, `null`} {
		id, code, msg := jsonRPCErrorOf(t, []byte(got[i]))
		if id != want || code != codeInvalidRequest || !strings.Contains(msg, "--request-limit") {
			t.Errorf("line %d: id %s, code %d, %q; want id %s, -32600 naming --request-limit", i, id, code, msg, want)
		}
	}
	// The two answers may come in either order.
	if rest := strings.Join(got[2:], "\n"); !strings.Contains(rest, `"id":1,"result"`) || !strings.Contains(rest, `"id":2,"result"`) {
		t.Errorf("the requests after the long lines: %q", got[2:])
	}
}

// TestFrontEndMetrics: the probes serve the front end's metrics.
func TestFrontEndMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(&mcptest.FakeRunner{})
		fe, err := NewHTTPFrontEnd(StreamableHTTP, o)
		if err != nil {
			t.Fatal(err)
		}
		fe.AddProbes(Probes{Health: (&mcptest.FakeHealth{}).Health, Metrics: NewMetricsRegistry(), Calls: o.Calls, Log: zap.NewNop()})
		srv := serveMem(t, fe)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url+"/healthz", nil)
		req.Header.Set("Origin", "https://evil.example")
		if resp, err := srv.http.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("/healthz from a foreign page: %v %v, want 403", resp, err)
		}
		sessionRequest(t, srv, http.MethodPost, "", initializeBody(1))
		resp, err := srv.http.Get(srv.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`mcp_run_python_http_rejected_total{reason="origin"} 1`,
			`mcp_run_python_http_rejected_total{reason="request_too_large"} 0`,
			"mcp_run_python_http_connections ",
			"mcp_run_python_mcp_sessions 1",
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

// Read implements io.Reader.
func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// endless is a body without end.
type endless struct{}

// Read implements io.Reader.
func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// kindNames name the HTTP transports as the command line's modes do.
var kindNames = map[Kind]string{SSE: "sse", StreamableHTTP: "streamable_http", StreamableHTTPStateless: "streamable_http_stateless"}

// frontOf serves a front end of kind with the default limits in the test's
// bubble.
func frontOf(t *testing.T, kind Kind) (*memServer, *HTTPFrontEnd) {
	t.Helper()
	fe, err := NewHTTPFrontEnd(kind, testOptions(&mcptest.FakeRunner{}))
	if err != nil {
		t.Fatal(err)
	}
	return serveMem(t, fe), fe
}

// TestLargeBodyEveryMode, with no end-to-end twin (TestRunFrontEndFlags
// shows --request-limit reaching the front end): a 50 MB POST to the MCP
// endpoint of every HTTP mode gets 413 naming --request-limit after at most
// the request limit has been read, whether its length is declared or not
// (declared, nothing is read), and the next client is served. The pipe under
// the server holds no bytes, so what the client got to send is what the
// server read, and a little of the client's own buffering.
func TestLargeBodyEveryMode(t *testing.T) {
	const size = 50 << 20
	limit := DefaultLimits(0).RequestLimit
	for _, kind := range []Kind{StreamableHTTP, StreamableHTTPStateless, SSE} {
		for _, declared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/declared=%v", kindNames[kind], declared), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv, _ := frontOf(t, kind)
					path := "/mcp"
					if kind == SSE {
						path = sseMessagesPath + "?sessionId=any"
					}
					body := &countingReader{r: io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"`),
						io.LimitReader(endless{}, size))}
					length := int64(-1)
					if declared {
						length = size + 100
					}
					resp, got := srv.post(t, path, body, length)
					if _, code, msg := jsonRPCErrorOf(t, got); resp.StatusCode != http.StatusRequestEntityTooLarge || code != codeInvalidRequest || !strings.Contains(msg, "--request-limit") {
						t.Errorf("POST %d MB: %d %q, want 413 and a JSON-RPC error -32600 naming --request-limit", size>>20, resp.StatusCode, got)
					}
					// Slack for the client's own buffers.
					sent, want := body.n.Load(), limit+(1<<20)
					if declared {
						want = 1 << 20
					}
					if sent > want {
						t.Errorf("the client sent %d MiB of the body, want at most %d MiB", sent>>20, want>>20)
					}
					t.Logf("the client sent %d KiB of the body", sent>>10)
					servesAfter(t, srv, kind)
				})
			})
		}
	}
}

// servesAfter checks that a new client of a front end of kind is served.
func servesAfter(t *testing.T, srv *memServer, kind Kind) {
	t.Helper()
	if kind == SSE {
		_, _, endpoint := openSSE(t, srv)
		resp, err := srv.client(t).Post(srv.url+endpoint, "application/json", strings.NewReader(pingBody))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ping on a new stream: %v %v", resp, err)
		}
		resp.Body.Close()
		return
	}
	c := &mcpHTTPClient{srv: srv, http: srv.client(t)}
	if status, _, body := c.post(t, http.MethodPost, initializeBody(1)); status != http.StatusOK {
		t.Errorf("initialize of a new client: %d %q", status, body)
	}
}

// TestOriginEveryEndpoint, with no end-to-end twin (TestRunFrontEndFlags
// shows --allow-origin reaching the front end): every endpoint, the probes
// included, refuses a foreign web page (Origin) and a rebound name (Host)
// with 403 and a JSON-RPC error, and serves programs, local pages and those
// of --allow-origin; a browser's preflight from an allowed page gets its
// CORS answer.
func TestOriginEveryEndpoint(t *testing.T) {
	const allowed = "https://app.example"
	for _, kind := range []Kind{StreamableHTTP, StreamableHTTPStateless, SSE} {
		t.Run(kindNames[kind], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := DefaultLimits(0)
				l.AllowOrigins = []string{allowed}
				o := testOptions(&mcptest.FakeRunner{})
				o.Limits = &l
				fe, err := NewHTTPFrontEnd(kind, o)
				if err != nil {
					t.Fatal(err)
				}
				fe.AddProbes(Probes{Health: (&mcptest.FakeHealth{}).Health, Metrics: NewMetricsRegistry(), Calls: o.Calls, Log: zap.NewNop()})
				srv := serveMem(t, fe)
				type request struct{ method, path string }
				requests := []request{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}}
				preflight := "/mcp"
				if kind == SSE {
					requests = append(requests, request{"GET", sseStreamPath}, request{"POST", sseMessagesPath + "?sessionId=any"})
					preflight = sseMessagesPath
				} else {
					requests = append(requests, request{"POST", "/mcp"}, request{"GET", "/mcp"})
				}
				tests := []struct {
					name, origin, host string
					forbidden          bool
				}{
					{"foreign page", "https://evil.example", "", true},
					{"rebound name", "", "evil.example:3001", true},
					{"program", "", "", false},
					{"local page", "http://localhost:5173", "", false},
					{"allowed page", allowed, "", false},
				}
				for _, tt := range tests {
					for _, r := range requests {
						ctx, cancel := context.WithCancel(t.Context())
						req, _ := http.NewRequestWithContext(ctx, r.method, srv.url+r.path, strings.NewReader(pingBody))
						req.Header.Set("Content-Type", "application/json")
						if tt.origin != "" {
							req.Header.Set("Origin", tt.origin)
						}
						if tt.host != "" {
							req.Host = tt.host
						}
						resp, err := srv.http.Do(req)
						if err != nil {
							cancel()
							t.Fatalf("%s %s %s: %v", tt.name, r.method, r.path, err)
						}
						if forbidden := resp.StatusCode == http.StatusForbidden; forbidden != tt.forbidden {
							t.Errorf("%s: %s %s: %d, want forbidden: %v", tt.name, r.method, r.path, resp.StatusCode, tt.forbidden)
						}
						if tt.forbidden {
							body, _ := io.ReadAll(resp.Body)
							if _, code, msg := jsonRPCErrorOf(t, body); code != codeRefused || !strings.HasPrefix(msg, "Forbidden") {
								t.Errorf("%s: %s %s: %q, want a JSON-RPC error %d saying Forbidden", tt.name, r.method, r.path, body, codeRefused)
							}
						}
						cancel() // ends the streams
						resp.Body.Close()
					}
				}
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, srv.url+preflight, nil)
				req.Header.Set("Origin", allowed)
				req.Header.Set("Access-Control-Request-Method", "POST")
				req.Header.Set("Access-Control-Request-Headers", "content-type")
				resp, err := srv.http.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode >= 300 || got != allowed {
					t.Errorf("preflight from %s: %d, Access-Control-Allow-Origin %q", allowed, resp.StatusCode, got)
				}
			})
		})
	}
}
