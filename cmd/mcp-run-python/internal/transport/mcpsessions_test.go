package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// mcpHTTPClient is a client of Streamable HTTP, as raw as the tests need.
type mcpHTTPClient struct {
	srv     *memServer
	http    *http.Client
	session string // once initialized
}

// post sends a JSON-RPC message with the client's session, and returns
// the answer's status, headers and body.
func (c *mcpHTTPClient) post(t *testing.T, method, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, c.srv.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(got)
}

// initialize starts the client's session.
func (c *mcpHTTPClient) initialize(t *testing.T) {
	t.Helper()
	status, header, body := c.post(t, http.MethodPost, initializeBody(1))
	if status != http.StatusOK || header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %q", status, body)
	}
	c.session = header.Get("Mcp-Session-Id")
	if status, _, body := c.post(t, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %q", status, body)
	}
}

// call posts a request on the client's session.
func (c *mcpHTTPClient) call(t *testing.T, body string) (int, string) {
	t.Helper()
	status, _, got := c.post(t, http.MethodPost, body)
	return status, got
}

// callWorks runs 1+1 on the client's session.
func (c *mcpHTTPClient) callWorks(t *testing.T, during string) {
	t.Helper()
	if status, body := c.call(t, callBody); status != http.StatusOK || !strings.Contains(body, `"result"`) || strings.Contains(body, `"isError":true`) {
		t.Errorf("%s: 1+1: %d %q", during, status, body)
	}
}

// callBody is a tools/call request running 1+1.
const callBody = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1 + 1"}}}`

// sessionRequest posts a JSON-RPC message to /mcp, with a session ID when
// not empty; it returns the status, the session ID answered and the body.
func sessionRequest(t *testing.T, srv *memServer, method, session, body string) (int, string, string) {
	t.Helper()
	c := &mcpHTTPClient{srv: srv, http: srv.http, session: session}
	status, header, got := c.post(t, method, body)
	return status, header.Get("Mcp-Session-Id"), got
}

// initializeBody is an initialize request with id.
func initializeBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, id)
}

// pingBody is a ping request.
const pingBody = `{"jsonrpc":"2.0","id":99,"method":"ping"}`

// streamableFront serves Streamable HTTP with sessions and the limits l in
// the test's bubble.
func streamableFront(t *testing.T, l Limits) (*memServer, *HTTPFrontEnd) {
	t.Helper()
	o := testOptions(&mcptest.FakeRunner{})
	o.Limits = &l
	fe, err := NewHTTPFrontEnd(StreamableHTTP, o)
	if err != nil {
		t.Fatal(err)
	}
	return serveMem(t, fe), fe
}

// keepActive calls ping every 300 ms until the test ends, as a client in a
// conversation does, so that the idle timeout spares its session.
func keepActive(t *testing.T, ping func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(300 * time.Millisecond) // the client's pace
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := ping(); err != nil {
					t.Errorf("the live client's ping: %v", err)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
}

// TestMCPSessionLimit: past the cap an initialize gets 503 and a JSON-RPC
// error with its ID; ended sessions make room; GET streams need a live
// session of their own and end with it.
func TestMCPSessionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := DefaultLimits(0)
		l.MaxMCPSessions = 2
		srv, fe := streamableFront(t, l)
		var sessions []string
		for i := range 2 {
			status, id, body := sessionRequest(t, srv, http.MethodPost, "", initializeBody(i))
			if status != http.StatusOK || id == "" {
				t.Fatalf("initialize %d: %d %q", i, status, body)
			}
			sessions = append(sessions, id)
		}
		status, _, body := sessionRequest(t, srv, http.MethodPost, "", initializeBody(3))
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
			if status, _, body := sessionRequest(t, srv, http.MethodGet, tt.session, ""); status != tt.status {
				t.Errorf("GET with session %q: %d %q, want %d", tt.session, status, body, tt.status)
			}
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url+"/mcp", nil)
		req.Header.Set("Mcp-Session-Id", sessions[0])
		req.Header.Set("Accept", "text/event-stream")
		stream, err := srv.http.Do(req)
		if err != nil || stream.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %v %v", stream, err)
		}
		defer stream.Body.Close()
		if status, _, body := sessionRequest(t, srv, http.MethodGet, sessions[0], ""); status != http.StatusConflict {
			t.Errorf("second GET stream: %d %q, want 409", status, body)
		}

		// Ending a session closes its stream and makes room.
		ended := make(chan error, 1)
		go func() { _, err := io.ReadAll(stream.Body); ended <- err }()
		if status, _, body := sessionRequest(t, srv, http.MethodDelete, sessions[0], ""); status != http.StatusOK {
			t.Fatalf("DELETE: %d %q", status, body)
		}
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Error("the GET stream outlived its session")
		}
		if status, _, body := sessionRequest(t, srv, http.MethodPost, sessions[0], pingBody); status != http.StatusNotFound {
			t.Errorf("request on the ended session: %d %q, want 404", status, body)
		}
		if status, _, body := sessionRequest(t, srv, http.MethodPost, "", initializeBody(4)); status != http.StatusOK {
			t.Errorf("initialize after a DELETE: %d %q", status, body)
		}
	})
}

// TestMCPSessionCapIsExact: concurrent initialize requests fill the cap
// exactly, neither past it nor short of it.
func TestMCPSessionCapIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, attempts = 10, 40
		l := DefaultLimits(0)
		l.MaxMCPSessions = max
		srv, fe := streamableFront(t, l)
		var mu sync.Mutex
		statuses := map[int]int{}
		var wg sync.WaitGroup
		for i := range attempts {
			wg.Go(func() {
				status, _, _ := sessionRequest(t, srv, http.MethodPost, "", initializeBody(i))
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
	})
}

// TestMCPSessionFlood, the unit twin of TestE2ELimitsStreamableHTTP's
// session cap: sessions opened at once and left, against a cap: initialize
// past the cap gets 503 with its ID and Retry-After, a live session is never
// evicted, and the idle ones end after --mcp-session-idle (mcp-go's sweeper
// looks every max(idle/2, 1 s)), not before.
func TestMCPSessionFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, attempts, idle, sweep = 10, 16, 2 * time.Second, time.Second
		l := DefaultLimits(0)
		l.MaxMCPSessions, l.MCPSessionIdle = max, idle
		srv, fe := streamableFront(t, l)
		live := &mcpHTTPClient{srv: srv, http: srv.client(t)}
		live.initialize(t)
		keepActive(t, func() error {
			if status, body := live.call(t, pingBody); status != http.StatusOK {
				return fmt.Errorf("%d %q", status, body)
			}
			return nil
		})

		var mu sync.Mutex
		var sessions []string
		refused := 0
		var wg sync.WaitGroup
		for i := range attempts {
			wg.Go(func() {
				c := &mcpHTTPClient{srv: srv, http: srv.client(t)}
				status, header, body := c.post(t, http.MethodPost, initializeBody(1000+i))
				mu.Lock()
				defer mu.Unlock()
				if status == http.StatusOK {
					sessions = append(sessions, header.Get("Mcp-Session-Id"))
					return
				}
				refused++
				id, code, msg := jsonRPCErrorOf(t, []byte(body))
				if status != http.StatusServiceUnavailable || code != codeRefused || !strings.Contains(msg, "--max-mcp-sessions") ||
					id != fmt.Sprint(1000+i) || header.Get("Retry-After") == "" {
					t.Errorf("initialize past the cap: %d %v %q, want 503 with its ID, Retry-After and a message naming --max-mcp-sessions", status, header, body)
				}
			})
		}
		wg.Wait()
		if want := attempts - (max - 1); refused != want {
			t.Errorf("%d of %d initialize refused, want %d (the live client holds one session)", refused, attempts, want)
		}
		if n := fe.front.liveSessions(); n != max {
			t.Errorf("%d sessions, want the cap, %d", n, max)
		}
		live.callWorks(t, "the live client at the session cap")

		time.Sleep(idle - time.Millisecond)
		synctest.Wait()
		if n := fe.front.liveSessions(); n != max {
			t.Errorf("%d sessions just before --mcp-session-idle, want %d", n, max)
		}
		time.Sleep(sweep + 2*time.Millisecond)
		synctest.Wait()
		if n := fe.front.liveSessions(); n != 1 {
			t.Errorf("%d sessions a sweep after --mcp-session-idle, want the live one", n)
		}
		if status, _, body := sessionRequest(t, srv, http.MethodPost, sessions[0], pingBody); status != http.StatusNotFound {
			t.Errorf("a request on an expired session: %d %q, want 404", status, body)
		}
		live.callWorks(t, "the live client after the idle sessions ended")
		servedAtOnce(t, srv, "a new client after the idle sessions ended")
	})
}

// sseFront serves an SSE front end with the default limits changed by set
// in the test's bubble.
func sseFront(t *testing.T, set func(*Limits)) (*memServer, *HTTPFrontEnd) {
	t.Helper()
	l := DefaultLimits(0)
	set(&l)
	o := testOptions(&mcptest.FakeRunner{})
	o.Limits = &l
	fe, err := NewHTTPFrontEnd(SSE, o)
	if err != nil {
		t.Fatal(err)
	}
	return serveMem(t, fe), fe
}

// openSSE opens an SSE stream and returns it with its message endpoint, or
// the status of a refusal and its body.
func openSSE(t *testing.T, srv *memServer) (*http.Response, *bufio.Reader, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url+sseStreamPath, nil)
	resp, err := srv.http.Do(req)
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

// endOf returns a channel closed when r ends, which it reads to the end.
func endOf(r io.Reader) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(ch)
	}()
	return ch
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSSEStreamFlood, the unit twin of TestE2ELimitsSSE: SSE streams are MCP
// sessions: past the cap a stream gets 503 naming --max-mcp-sessions, a live
// client keeps being served, and the idle ones, whose clients never speak,
// are closed at --mcp-session-idle, not before.
func TestSSEStreamFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, streams, idle = 10, 15, 2 * time.Second
		srv, fe := sseFront(t, func(l *Limits) { l.MaxMCPSessions, l.MCPSessionIdle = max, idle })
		_, live, endpoint := openSSE(t, srv)
		liveEnded := endOf(live)
		keepActive(t, func() error {
			resp, err := srv.http.Post(srv.url+endpoint, "application/json", strings.NewReader(pingBody))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})

		refused := 0
		var ended []<-chan struct{}
		for range streams {
			resp, r, _ := openSSE(t, srv)
			if resp.StatusCode == http.StatusOK {
				ended = append(ended, endOf(r))
				continue
			}
			refused++
			body, _ := io.ReadAll(resp.Body)
			if _, code, msg := jsonRPCErrorOf(t, body); resp.StatusCode != http.StatusServiceUnavailable || code != codeRefused || !strings.Contains(msg, "--max-mcp-sessions") {
				t.Errorf("a stream past the cap: %d %q, want 503 naming --max-mcp-sessions", resp.StatusCode, body)
			}
		}
		if want := streams - (max - 1); refused != want {
			t.Errorf("%d of %d streams refused, want %d (the live client holds one session)", refused, streams, want)
		}
		if n := fe.front.liveSessions(); n != max {
			t.Errorf("%d sessions, want the cap, %d", n, max)
		}

		time.Sleep(idle - time.Millisecond)
		synctest.Wait()
		for i, ch := range ended {
			if isDone(ch) {
				t.Errorf("idle stream %d closed before --mcp-session-idle", i)
			}
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		for i, ch := range ended {
			if !isDone(ch) {
				t.Errorf("idle stream %d still open at --mcp-session-idle", i)
			}
		}
		if isDone(liveEnded) {
			t.Error("the live client's stream was closed")
		}
		if n := fe.front.liveSessions(); n != 1 {
			t.Errorf("%d sessions after the idle ones ended, want the live one", n)
		}
		if resp, _, _ := openSSE(t, srv); resp.StatusCode != http.StatusOK {
			t.Errorf("a stream after the idle ones ended: %d", resp.StatusCode)
		}
	})
}

// TestSSEFirstMessage: an SSE stream whose client sends no message within
// the read timeout is closed, even when idle streams are kept; one whose
// client has spoken is not.
func TestSSEFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		srv, _ := sseFront(t, func(l *Limits) { l.ReadTimeout, l.MCPSessionIdle = timeout, 0 })
		_, silent, _ := openSSE(t, srv)
		_, spoken, endpoint := openSSE(t, srv)
		resp, err := srv.http.Post(srv.url+endpoint, "application/json", strings.NewReader(pingBody))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ping: %v %v", resp, err)
		}
		resp.Body.Close()
		silentEnded, spokenEnded := endOf(silent), endOf(spoken)
		time.Sleep(timeout)
		synctest.Wait()
		if !isDone(silentEnded) {
			t.Fatalf("the silent stream is still open after %v", timeout)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if isDone(spokenEnded) {
			t.Error("the stream whose client spoke was closed")
		}
	})
}
