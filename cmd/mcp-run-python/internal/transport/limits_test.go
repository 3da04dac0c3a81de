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
	"sync"
	"testing"
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

// serveFront serves fe through ServeHTTP on a loopback port, as the program
// does, until the test ends; it returns the base URL.
func serveFront(t *testing.T, fe *HTTPFrontEnd) string {
	t.Helper()
	return mcptest.ServeHTTP(t, func(ctx context.Context, ln net.Listener) error {
		return ServeHTTP(ctx, ln, fe, zap.NewNop())
	})
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
			fe := handlerFront(Limits{RequestLimit: limit, ReadTimeout: 300 * time.Millisecond}, bodyLength)
			url := serveFront(t, fe)
			if tt.spend {
				budget := int64(bodyBudgetFactor * limit)
				if err := fe.front.budget.Acquire(mcptest.Context(t), budget); err != nil {
					t.Fatal(err)
				}
				defer fe.front.budget.Release(budget)
			}
			var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), tt.size))
			if tt.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req, err := http.NewRequestWithContext(mcptest.Context(t), http.MethodPost, url+"/mcp", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
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
	}
}

// TestReadTimeout: a body that trickles in is dropped at the read timeout,
// and a slow header block too; a response stream that follows a body is not
// cut by it.
func TestReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	streamed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := requestBody(r); err != nil {
			return
		}
		for i := range 5 { // a stream that outlasts the read timeout
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(timeout / 2) // the stream's pace, not synchronisation
		}
	})
	url := serveFront(t, handlerFront(Limits{RequestLimit: 1 << 20, ReadTimeout: timeout}, streamed))
	addr := strings.TrimPrefix(url, "http://")

	t.Run("slow body", func(t *testing.T) {
		conn := dial(t, addr)
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", addr)
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a slow body: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "--read-timeout") {
			t.Errorf("got %d %q, want 408 naming --read-timeout", resp.StatusCode, body)
		}
		if took := time.Since(start); took > 10*timeout {
			t.Errorf("dropped after %v, want about %v", took, timeout)
		}
		// The rest of the body never comes: the server must close the
		// connection rather than wait for it (it used to wait for ever,
		// or as long as a trickle kept coming).
		expectClosed(t, conn, 10*timeout)
	})
	t.Run("trickling body", func(t *testing.T) {
		conn := dial(t, addr)
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", addr)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte at a time, forever, faster than the timeout
			tick := time.NewTicker(timeout / 4)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := fmt.Fprint(conn, " "); err != nil {
						return
					}
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a trickling body: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("got %d, want 408", resp.StatusCode)
		}
		expectClosed(t, conn, 10*timeout)
	})
	t.Run("slow headers", func(t *testing.T) {
		conn := dial(t, addr)
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr)
		start := time.Now()
		if _, err := io.ReadAll(conn); err != nil {
			t.Logf("read: %v", err)
		}
		if took := time.Since(start); took > 10*timeout {
			t.Errorf("closed after %v, want about %v", took, timeout)
		}
	})
	t.Run("stream after the body", func(t *testing.T) {
		resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || strings.Count(string(body), "event") != 5 {
			t.Errorf("stream: %q, %v; want 5 events", body, err)
		}
	})
}

// expectClosed fails the test unless the server closes conn, with or
// without a reset, within d.
func expectClosed(t *testing.T, conn net.Conn, d time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	n, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the connection is still open %v after the answer (%d more bytes came)", d, n)
	}
}

// dial opens a TCP connection that the test closes.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(mcptest.Timeout))
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestConnectionLimit: past the cap, the connection that has waited longest
// for its request makes room for the new one; only when every connection
// serves a request is the new one refused.
func TestConnectionLimit(t *testing.T) {
	const max = 3
	tests := []struct {
		name    string
		setup   func(t *testing.T, addr string) []net.Conn // what holds the connections
		status  int
		evicted int // how many of the setup's connections the server closed
	}{
		{"slow clients make room", func(t *testing.T, addr string) []net.Conn {
			var conns []net.Conn
			for range max {
				c := dial(t, addr)
				fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\n{", addr)
				conns = append(conns, c)
			}
			return conns
		}, http.StatusOK, 1},
		{"busy connections refuse", func(t *testing.T, addr string) []net.Conn {
			var conns []net.Conn
			for range max {
				c := dial(t, addr)
				fmt.Fprintf(c, "GET /block HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
				if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			return conns
		}, http.StatusServiceUnavailable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/block" {
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					<-release
				}
				_, _ = io.WriteString(w, "ok")
			})
			fe := handlerFront(Limits{ReadTimeout: mcptest.Timeout, MaxConnections: max}, handler)
			url := serveFront(t, fe)
			defer close(release)
			held := tt.setup(t, strings.TrimPrefix(url, "http://"))
			waitFor(t, func() bool { return fe.front.conns.open() == max })

			start := time.Now()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(url + "/x")
			if err != nil {
				t.Fatalf("new client: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if took := time.Since(start); took > time.Second {
				t.Errorf("the new client waited %v", took)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("new client: %d %q, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.status != http.StatusOK && !strings.Contains(string(body), "--max-connections") {
				t.Errorf("refusal %q does not name --max-connections", body)
			}
			closed := 0
			for _, c := range held {
				_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); err == io.EOF {
					closed++
				}
			}
			if closed != tt.evicted {
				t.Errorf("%d held connections closed, want %d", closed, tt.evicted)
			}
			if n := fe.front.conns.open(); n > max {
				t.Errorf("%d connections open, over the cap of %d", n, max)
			}
		})
	}
}

// waitFor polls cond until it holds, for at most mcptest.Timeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(mcptest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(10 * time.Millisecond) // bounded polling of the server's state
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

// sessionRequest posts a JSON-RPC message to /mcp, with a session ID when
// not empty; it returns the status, the session ID answered and the body.
func sessionRequest(t *testing.T, url, method, session, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(mcptest.Context(t), method, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(got)
}

// initializeBody is an initialize request with id.
func initializeBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, id)
}

// pingBody is a ping request.
const pingBody = `{"jsonrpc":"2.0","id":99,"method":"ping"}`

// streamableFront serves Streamable HTTP with sessions and the limits l.
func streamableFront(t *testing.T, l Limits) (string, *HTTPFrontEnd) {
	t.Helper()
	o := testOptions(&mcptest.FakeRunner{})
	o.Limits = &l
	fe, err := NewHTTPFrontEnd(StreamableHTTP, o)
	if err != nil {
		t.Fatal(err)
	}
	return serveFront(t, fe), fe
}

// TestMCPSessionLimit: past the cap an initialize gets 503 and a JSON-RPC
// error with its ID; ended sessions make room; GET streams need a live
// session of their own and end with it.
func TestMCPSessionLimit(t *testing.T) {
	l := DefaultLimits(0)
	l.MaxMCPSessions = 2
	url, fe := streamableFront(t, l)
	var sessions []string
	for i := range 2 {
		status, id, body := sessionRequest(t, url, http.MethodPost, "", initializeBody(i))
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize %d: %d %q", i, status, body)
		}
		sessions = append(sessions, id)
	}
	status, _, body := sessionRequest(t, url, http.MethodPost, "", initializeBody(3))
	if status != http.StatusServiceUnavailable {
		t.Fatalf("initialize past the cap: %d %q, want 503", status, body)
	}
	if id, code, msg := jsonRPCErrorOf(t, []byte(body)); id != "3" || code != codeRefused || !strings.Contains(msg, "--max-mcp-sessions") {
		t.Errorf("refusal: id %s, code %d, %q", id, code, msg)
	}
	if got := fe.front.liveSessions(); got != 2 {
		t.Errorf("%d live sessions, want 2", got)
	}

	// GET streams.
	for _, tt := range []struct {
		session string
		status  int
	}{{"", http.StatusBadRequest}, {sessionIDPrefix + "unknown", http.StatusNotFound}} {
		if status, _, body := sessionRequest(t, url, http.MethodGet, tt.session, ""); status != tt.status {
			t.Errorf("GET with session %q: %d %q, want %d", tt.session, status, body, tt.status)
		}
	}
	req, _ := http.NewRequestWithContext(mcptest.Context(t), http.MethodGet, url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sessions[0])
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	if status, _, body := sessionRequest(t, url, http.MethodGet, sessions[0], ""); status != http.StatusConflict {
		t.Errorf("second GET stream: %d %q, want 409", status, body)
	}

	// Ending a session closes its stream and makes room.
	if status, _, body := sessionRequest(t, url, http.MethodDelete, sessions[0], ""); status != http.StatusOK {
		t.Fatalf("DELETE: %d %q", status, body)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(stream.Body); ended <- err }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the GET stream outlived its session")
	}
	if status, _, body := sessionRequest(t, url, http.MethodPost, sessions[0], pingBody); status != http.StatusNotFound {
		t.Errorf("request on the ended session: %d %q, want 404", status, body)
	}
	if status, _, body := sessionRequest(t, url, http.MethodPost, "", initializeBody(4)); status != http.StatusOK {
		t.Errorf("initialize after a DELETE: %d %q", status, body)
	}
}

// TestMCPSessionCapIsExact: concurrent initialize requests fill the cap
// exactly, neither past it nor short of it.
func TestMCPSessionCapIsExact(t *testing.T) {
	const max, attempts = 10, 40
	l := DefaultLimits(0)
	l.MaxMCPSessions = max
	url, fe := streamableFront(t, l)
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			status, _, _ := sessionRequest(t, url, http.MethodPost, "", initializeBody(i))
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
		})
	}
	wg.Wait()
	if statuses[http.StatusOK] != max || statuses[http.StatusServiceUnavailable] != attempts-max {
		t.Errorf("statuses %v, want %d × 200 and %d × 503", statuses, max, attempts-max)
	}
	if n := fe.front.liveSessions(); n != max {
		t.Errorf("%d live sessions, want %d", n, max)
	}
}

// TestMCPSessionIdle: an idle session ends after --mcp-session-idle, a busy
// one lives on.
func TestMCPSessionIdle(t *testing.T) {
	l := DefaultLimits(0)
	l.MaxMCPSessions, l.MCPSessionIdle = 2, time.Second
	url, _ := streamableFront(t, l)
	var sessions []string
	for i := range 2 {
		_, id, _ := sessionRequest(t, url, http.MethodPost, "", initializeBody(i))
		sessions = append(sessions, id)
	}
	// The sweeper runs every second: after 3 s the idle session is gone.
	for range 12 {
		if status, _, body := sessionRequest(t, url, http.MethodPost, sessions[0], pingBody); status != http.StatusOK {
			t.Fatalf("the busy session ended: %d %q", status, body)
		}
		time.Sleep(250 * time.Millisecond) // the busy client's pace
	}
	if status, _, _ := sessionRequest(t, url, http.MethodPost, sessions[1], pingBody); status != http.StatusNotFound {
		t.Errorf("the idle session answered %d, want 404", status)
	}
	if status, _, body := sessionRequest(t, url, http.MethodPost, "", initializeBody(3)); status != http.StatusOK {
		t.Errorf("initialize after the idle session ended: %d %q", status, body)
	}
}

// openSSE opens an SSE stream and returns it with its message endpoint, or
// the status of a refusal and its body.
func openSSE(t *testing.T, url string) (*http.Response, *bufio.Reader, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(mcptest.Context(t), http.MethodGet, url+sseStreamPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		return resp, nil, ""
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the endpoint event: %v", err)
		}
		if endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			return resp, r, endpoint
		}
	}
}

// TestSSEStreamLimits: SSE streams are MCP sessions: capped, and closed
// when idle.
func TestSSEStreamLimits(t *testing.T) {
	url := sseFront(t, func(l *Limits) { l.MaxMCPSessions, l.MCPSessionIdle = 2, 700*time.Millisecond })
	_, busy, endpoint := openSSE(t, url)
	_, idle, _ := openSSE(t, url)
	if resp, _, _ := openSSE(t, url); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third stream: %d, want 503", resp.StatusCode)
	} else if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "--max-mcp-sessions") {
		t.Errorf("refusal %q does not name --max-mcp-sessions", body)
	}
	idleEnded := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, idle)
		close(idleEnded)
	}()
	go func() { _, _ = io.Copy(io.Discard, busy) }()
	deadline := time.After(3 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-idleEnded:
			waiting = false
		case <-deadline:
			t.Fatal("the idle stream is still open after 3s")
		case <-time.After(200 * time.Millisecond): // the busy client's pace
			resp, err := http.Post(url+endpoint, "application/json", strings.NewReader(pingBody))
			if err != nil || resp.StatusCode != http.StatusAccepted {
				t.Fatalf("ping on the busy stream: %v %v", resp, err)
			}
			resp.Body.Close()
		}
	}
	if resp, _, _ := openSSE(t, url); resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after the idle one ended: %d", resp.StatusCode)
	}
}

// TestSSEFirstMessage: an SSE stream whose client sends no message within
// the read timeout is closed, even when idle streams are kept; one whose
// client has spoken is not.
func TestSSEFirstMessage(t *testing.T) {
	url := sseFront(t, func(l *Limits) { l.ReadTimeout, l.MCPSessionIdle = 300*time.Millisecond, 0 })
	_, silent, _ := openSSE(t, url)
	_, spoken, endpoint := openSSE(t, url)
	resp, err := http.Post(url+endpoint, "application/json", strings.NewReader(pingBody))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ping: %v %v", resp, err)
	}
	resp.Body.Close()
	ended := func(r *bufio.Reader) <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, r)
			close(ch)
		}()
		return ch
	}
	silentEnded, spokenEnded := ended(silent), ended(spoken)
	select {
	case <-silentEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the silent stream is still open after 5s")
	}
	select {
	case <-spokenEnded:
		t.Error("the stream whose client spoke was closed")
	case <-time.After(time.Second): // ample past the read timeout
	}
}

// TestFrontEndMetrics: the probes serve the front end's metrics.
func TestFrontEndMetrics(t *testing.T) {
	o := testOptions(&mcptest.FakeRunner{})
	fe, err := NewHTTPFrontEnd(StreamableHTTP, o)
	if err != nil {
		t.Fatal(err)
	}
	fe.AddProbes(Probes{Health: (&mcptest.FakeHealth{}).Health, Metrics: NewMetricsRegistry(), Calls: o.Calls, Log: zap.NewNop()})
	url := serveFront(t, fe)
	req, _ := http.NewRequest(http.MethodGet, url+"/healthz", nil)
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/healthz from a foreign page: %v %v, want 403", resp, err)
	}
	sessionRequest(t, url, http.MethodPost, "", initializeBody(1))
	resp, err := http.Get(url + "/metrics")
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
}

// sseFront serves an SSE front end with the default limits changed by set,
// and returns its URL.
func sseFront(t *testing.T, set func(*Limits)) string {
	t.Helper()
	l := DefaultLimits(0)
	set(&l)
	o := testOptions(&mcptest.FakeRunner{})
	o.Limits = &l
	fe, err := NewHTTPFrontEnd(SSE, o)
	if err != nil {
		t.Fatal(err)
	}
	return serveFront(t, fe)
}
