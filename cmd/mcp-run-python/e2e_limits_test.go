package main_test

// Hostile load on the front end (docs/SECURITY.md has the figures): a test
// for stdio, Streamable HTTP and SSE each runs on the real binary the
// attacks that take a long line, time or many clients, over loopback only
// and at a scale that runs in seconds on two cores, and checks that each
// meets a clear error or a bounded cost while a normal client's initialize
// and 1+1 are served within a second. The attacks in full, and their
// timing, are the unit twins' in internal/transport; those that a
// request's headers or body meet alone are there and in
// TestRunFrontEndFlags only.
//
//	go test ./cmd/mcp-run-python/ -run E2ELimits -count=1 -v

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// serveWithin is how long a normal client may take for its initialize and
// a 1+1 call while the server is under attack.
const serveWithin = time.Second

// servedWithin connects a new client to tg, runs 1+1 and closes it; the
// test fails when that took longer than serveWithin.
func servedWithin(t *testing.T, tg *target, during string) time.Duration {
	t.Helper()
	// Connections of its own: an idle keep-alive connection of an earlier
	// client is, rightly, among the first the server closes for newer ones.
	fresh := *tg
	fresh.client = &http.Client{Transport: &http.Transport{}}
	defer fresh.client.CloseIdleConnections()
	start := time.Now()
	c := fresh.connect(t)
	c.expectWorks(t)
	took := time.Since(start)
	_ = c.Close()
	if took > serveWithin {
		t.Errorf("%s: a normal client's initialize and 1+1 took %v, want at most %v", during, took, serveWithin)
	}
	t.Logf("%s: a normal client's initialize and 1+1 took %v", during, took.Round(time.Millisecond))
	return took
}

// timedWorks runs 1+1 on c; the test fails when it took longer than
// serveWithin.
func timedWorks(t *testing.T, c *e2eClient, during string) {
	t.Helper()
	start := time.Now()
	c.expectWorks(t)
	if took := time.Since(start); took > serveWithin {
		t.Errorf("%s: 1+1 took %v, want at most %v", during, took, serveWithin)
	}
}

// metric returns the value of one series of the server's /metrics.
func metric(t *testing.T, tg *target, series string) float64 {
	t.Helper()
	_, body := tg.get(t, "/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no series %s", series)
	return 0
}

// waitMetric polls a series of /metrics until ok accepts its value, and
// returns how long that took.
func waitMetric(t *testing.T, tg *target, series string, within time.Duration, ok func(float64) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		v := metric(t, tg, series)
		if ok(v) {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s is still %v after %v", series, v, within)
		}
		time.Sleep(50 * time.Millisecond) // bounded polling of the server's state
	}
}

// keepActive pings c every 300 ms until the test ends, or until the
// function it returns is called, as a client in a conversation does, so
// that the idle timeout does not end its session.
func keepActive(t *testing.T, c *e2eClient) (stopPinging func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond): // the client's pace
			}
			pctx, cancel := context.WithTimeout(ctx, startTimeout)
			err := c.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				t.Errorf("the live client's ping failed: %v", err)
				return
			}
		}
	}()
	stopPinging = func() { stop(); <-done }
	t.Cleanup(stopPinging)
	return stopPinging
}

// testCtx returns a context that ends with the test, after startTimeout at
// most.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestE2ELimitsStdioLine: a 20 MB line on stdin gets a JSON-RPC error with
// its request's ID, without the server holding it whole, and the next
// lines are served.
func TestE2ELimitsStdioLine(t *testing.T) {
	s := setup(t)
	p := startRawStdio(t, s, "--workers", "2")
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1 + 1"}}}`, id)
	}
	p.send(t, pipedInitialize)
	p.next(t, startTimeout)
	p.send(t, pipedInitialized, call(2))
	if got := p.next(t, callTimeout); !strings.Contains(got, `"id":2`) || !strings.Contains(got, "success") {
		t.Fatalf("1+1 before the long line: %s", got)
	}

	before := rssOf(t, p.cmd.Process.Pid)
	const size = 20 << 20
	long := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` +
		strings.Repeat("x", size) + `"}}}`
	go func() { _, _ = io.WriteString(p.stdin, long+"\n") }()
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	got := p.next(t, startTimeout)
	if json.Unmarshal([]byte(got), &msg) != nil || msg.ID != 7 || msg.Error.Code != -32600 || !strings.Contains(msg.Error.Message, "--request-limit") {
		t.Fatalf("answer to a %d MB line: %s, want error -32600 for id 7 naming --request-limit", size>>20, got)
	}
	start := time.Now()
	p.send(t, call(3))
	if got := p.next(t, callTimeout); !strings.Contains(got, `"id":3`) || !strings.Contains(got, "success") {
		t.Fatalf("1+1 after the long line: %s", got)
	}
	if took := time.Since(start); took > serveWithin {
		t.Errorf("1+1 after the long line took %v, want at most %v", took, serveWithin)
	}
	after := rssOf(t, p.cmd.Process.Pid)
	t.Logf("a %d MB line: %s; server RSS %d MiB before, %d MiB after", size>>20, msg.Error.Message, before>>20, after>>20)
	if grew := after - before; grew > 40<<20 {
		t.Errorf("the server's RSS grew by %d MiB for a refused line", grew>>20)
	}
}

// slowClient holds a connection to addr that sends its request slowly, a
// byte every half second (the body's when body is set, else the header
// block's), and opens another half a second after the server drops it,
// until ctx ends. It counts the connections it opened.
func slowClient(ctx context.Context, addr string, body bool, opened *atomic.Int64) {
	head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	if body {
		head += "Content-Length: 1000000\r\n\r\n{"
	}
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			opened.Add(1)
			_, err = io.WriteString(conn, head)
			for err == nil {
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(500 * time.Millisecond): // the attack's pace
					_, err = conn.Write([]byte("x"))
				}
			}
			_ = conn.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // pause before the next connection
		}
	}
}

// The limits of the HTTP modes that take time or many clients, one server
// each. The unit twins in internal/transport (TestSlowConnectionFlood,
// TestMCPSessionFlood, TestSSEStreamFlood) run every attack, its edge
// cases and its timing, under testing/synctest; these check, on the real
// binary over real sockets, that each flag reaches its limit, what the
// server's memory does, and that a normal client is served meanwhile. The
// limits a request's headers or body meet alone (a large body, a foreign
// Origin, a rebound Host) are internal/transport's TestLargeBodyEveryMode
// and TestOriginEveryEndpoint, and their flags' wiring is
// TestRunFrontEndFlags's: they need no worker.
const e2eIdle = 2 * time.Second // --mcp-session-idle and --read-timeout

// e2eLimitFlags are the front-end limits of the servers of the HTTP tests;
// two workers, so that a normal client's call finds one warm while the
// other is replaced after the previous call.
func e2eLimitFlags(extra ...string) []string {
	return append([]string{"--workers", "2",
		"--mcp-session-idle", e2eIdle.String(), "--read-timeout", e2eIdle.String()}, extra...)
}

// TestE2ELimitsStreamableHTTP: Streamable HTTP with sessions. Past
// --max-mcp-sessions an initialize gets 503 with its ID while a live
// session is kept, and the idle ones end after --mcp-session-idle.
// Meanwhile slow connections, 20 under --max-connections 30, are dropped at
// --read-timeout; then 40 more are held under the cap by closing the
// longest waiting for newer ones, while a normal client is served within a
// second.
func TestE2ELimitsStreamableHTTP(t *testing.T) {
	s := setup(t)
	const maxSessions, attempts = 4, 6
	const maxConns, few, many = 30, 20, 40
	tg := startTarget(t, s, modeStateful, e2eLimitFlags("--max-mcp-sessions", strconv.Itoa(maxSessions),
		"--max-connections", strconv.Itoa(maxConns))...)
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)

	live := tg.connect(t)
	stopPinging := keepActive(t, live)
	var sessions []string
	refused := 0
	for i := range attempts {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`, 1000+i)
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, tg.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("initialize: %v", err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			sessions = append(sessions, resp.Header.Get("Mcp-Session-Id"))
			continue
		}
		refused++
		mcptest.WantRefusal(t, "initialize past the cap", resp.StatusCode, got, http.StatusServiceUnavailable, -32000, "--max-mcp-sessions")
		if !strings.Contains(string(got), fmt.Sprintf(`"id":%d`, 1000+i)) || resp.Header.Get("Retry-After") == "" {
			t.Errorf("refusal without the request's ID or Retry-After: %q", got)
		}
	}
	if want := attempts - (maxSessions - 1); refused != want {
		t.Errorf("%d of %d initialize refused, want %d (the live client holds one session)", refused, attempts, want)
	}
	timedWorks(t, live, "the live client at the session cap")

	// Slow connections under the cap, while the idle sessions expire: the
	// live client's connection is not among those closed for newer ones
	// until the cap is reached.
	before := rssOf(t, tg.cmd.Process.Pid)
	addr := strings.TrimPrefix(tg.url, "http://")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened atomic.Int64
	attack := func(n int) {
		for i := range n {
			wg.Go(func() { slowClient(ctx, addr, i%2 == 0, &opened) })
		}
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	attackStart := time.Now()
	attack(few)

	took := waitMetric(t, tg, "mcp_run_python_mcp_sessions", e2eIdle+5*time.Second, func(v float64) bool { return v == 1 })
	t.Logf("%d initialize: %d sessions, %d refused; the idle ones ended %v later", attempts, len(sessions), refused, took.Round(100*time.Millisecond))
	if len(sessions) > 0 {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, tg.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", sessions[0])
		req.Header.Set("Mcp-Protocol-Version", e2eProtocol)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("a request on an expired session: %v %v, want 404", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	timedWorks(t, live, "the live client after the idle sessions ended")
	waitMetric(t, tg, `mcp_run_python_http_rejected_total{reason="read_timeout"}`, e2eIdle+5*time.Second,
		func(v float64) bool { return v > 0 })
	timedOut := time.Since(attackStart)

	// Its idle keep-alive connection would be among those closed for the
	// slow ones, under a ping.
	stopPinging()
	_ = live.Close()
	attack(many)
	waitMetric(t, tg, "mcp_run_python_http_connections", startTimeout, func(v float64) bool { return v >= maxConns-1 })
	servedWithin(t, tg, fmt.Sprintf("among %d slow connections", few+many))
	open := metric(t, tg, "mcp_run_python_http_connections")
	evicted := metric(t, tg, `mcp_run_python_http_rejected_total{reason="connection_evicted"}`)
	after := rssOf(t, tg.cmd.Process.Pid)
	t.Logf("%d slow connections opened; the first bodies timed out within %v of the attack's start; %v open (cap %d), "+
		"%v closed for newer ones; server RSS %d MiB before, %d MiB after",
		opened.Load(), timedOut.Round(100*time.Millisecond), open, maxConns, evicted, before>>20, after>>20)
	if open > maxConns {
		t.Errorf("%v connections open, over the cap of %d", open, maxConns)
	}
	if evicted == 0 {
		t.Errorf("no connection closed for a newer one: the attack did not reach the cap")
	}
	if grew := after - before; grew > 64<<20 {
		t.Errorf("the server's RSS grew by %d MiB under slow connections", grew>>20)
	}
}

// openStreams opens n SSE streams at url at once and returns how many were
// refused (503 naming --max-mcp-sessions), and a channel that gets one
// value for each accepted stream that the server ends.
func openStreams(t *testing.T, url string, n int) (refused int, ended <-chan struct{}) {
	t.Helper()
	ends := make(chan struct{}, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, url+"/sse", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("open a stream: %v", err)
				return
			}
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mcptest.WantRefusal(t, "a stream past the cap", resp.StatusCode, body, http.StatusServiceUnavailable, -32000, "--max-mcp-sessions")
				mu.Lock()
				refused++
				mu.Unlock()
				return
			}
			go func() { // an idle client: it only reads
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				ends <- struct{}{}
			}()
		})
	}
	wg.Wait()
	return refused, ends
}

// TestE2ELimitsSSE: past --max-mcp-sessions an SSE stream gets 503, a
// live client keeps being served, and the idle streams are closed after
// --mcp-session-idle.
func TestE2ELimitsSSE(t *testing.T) {
	s := setup(t)
	const max, streams = 4, 6
	tg := startTarget(t, s, modeSSE, e2eLimitFlags("--max-mcp-sessions", strconv.Itoa(max))...)
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)

	live := tg.connect(t)
	keepActive(t, live)
	start := time.Now()
	refused, ended := openStreams(t, tg.url, streams)
	if want := streams - (max - 1); refused != want {
		t.Errorf("%d of %d streams refused, want %d (the live client holds one session)", refused, streams, want)
	}
	timedWorks(t, live, "the live client among idle streams")
	for range max - 1 {
		select {
		case <-ended:
		case <-time.After(e2eIdle + 5*time.Second):
			t.Fatalf("idle streams still open %v after they were opened", time.Since(start))
		}
	}
	t.Logf("%d streams: %d refused, %d closed when idle after %v", streams, refused, max-1, time.Since(start).Round(100*time.Millisecond))
	waitMetric(t, tg, "mcp_run_python_mcp_sessions", startTimeout, func(v float64) bool { return v == 1 })
	timedWorks(t, live, "the live client after the idle streams ended")
	servedWithin(t, tg, "a new client after the idle streams ended")
}
