package main_test

// Hostile load on the front end (docs/SECURITY.md has the figures): each
// test reproduces an attack on the real binary, over loopback only and at a
// scale that runs in seconds on two cores, and checks that it meets a clear
// error or a bounded cost while a normal client's initialize and 1+1 are
// served within a second.
//
//	go test ./cmd/mcp-run-python/ -run E2ELimits -count=1 -v

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// keepActive pings c every 300 ms until the test ends, as a client in a
// conversation does, so that the idle timeout does not end its session.
func keepActive(t *testing.T, c *e2eClient) {
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
	t.Cleanup(func() { stop(); <-done })
}

// wantRefusal checks a JSON-RPC error response: its status, code and that
// its message names the flag.
func wantRefusal(t *testing.T, what string, status int, body []byte, wantStatus, wantCode int, flag string) {
	t.Helper()
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != wantStatus || json.Unmarshal(body, &msg) != nil || msg.Error.Code != wantCode || !strings.Contains(msg.Error.Message, flag) {
		t.Errorf("%s: %d %q, want %d and a JSON-RPC error %d naming %s", what, status, body, wantStatus, wantCode, flag)
	}
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestE2ELimitsLargeBody: a 50 MB POST to every MCP endpoint gets 413 after
// at most the request limit has been read, whether its length is declared
// or not; the server's memory barely moves.
func TestE2ELimitsLargeBody(t *testing.T) {
	s := setup(t)
	const size = 50 << 20
	for _, mode := range []string{modeStateful, modeStateless, modeSSE} {
		t.Run(mode, func(t *testing.T) {
			tg := startTarget(t, s, mode, "--workers", "1")
			tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 1`)
			path := "/mcp"
			if mode == modeSSE {
				path = "/messages?sessionId=any"
			}
			before := rssOf(t, tg.cmd.Process.Pid)
			for _, declared := range []bool{false, true} {
				body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"`),
					io.LimitReader(zeros{}, size))
				req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, tg.url+path, body)
				if err != nil {
					t.Fatal(err)
				}
				if declared {
					req.ContentLength = size + 100
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("POST %d MB (length declared: %v): %v", size>>20, declared, err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantRefusal(t, fmt.Sprintf("POST %d MB (length declared: %v)", size>>20, declared), resp.StatusCode, got,
					http.StatusRequestEntityTooLarge, -32600, "--request-limit")
				t.Logf("length declared %v: 413 after %v", declared, time.Since(start).Round(time.Millisecond))
			}
			after := rssOf(t, tg.cmd.Process.Pid)
			t.Logf("server RSS %d MiB before, %d MiB after", before>>20, after>>20)
			if grew := after - before; grew > 48<<20 {
				t.Errorf("the server's RSS grew by %d MiB for a refused body", grew>>20)
			}
			servedWithin(t, tg, "after the large bodies")
		})
	}
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
	cmd := exec.Command(s.bin, append(s.baseArgs(), "--workers", "2", "stdio")...)
	cmd.Env = serverEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("stdio server: %v; stderr:\n%s", err, stderr)
			}
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			t.Errorf("the stdio server did not stop at the end of stdin")
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write to the server: %v", err)
		}
	}
	next := func(within time.Duration) string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended; stderr:\n%s", stderr)
			}
			return line
		case <-time.After(within):
			t.Fatalf("no answer within %v; stderr:\n%s", within, stderr)
		}
		return ""
	}
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1 + 1"}}}`, id)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	next(startTimeout)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(call(2))
	if got := next(callTimeout); !strings.Contains(got, `"id":2`) || !strings.Contains(got, "success") {
		t.Fatalf("1+1 before the long line: %s", got)
	}

	before := rssOf(t, cmd.Process.Pid)
	const size = 20 << 20
	long := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` +
		strings.Repeat("x", size) + `"}}}`
	go func() { _, _ = io.WriteString(stdin, long+"\n") }()
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	got := next(startTimeout)
	if json.Unmarshal([]byte(got), &msg) != nil || msg.ID != 7 || msg.Error.Code != -32600 || !strings.Contains(msg.Error.Message, "--request-limit") {
		t.Fatalf("answer to a %d MB line: %s, want error -32600 for id 7 naming --request-limit", size>>20, got)
	}
	start := time.Now()
	send(call(3))
	if got := next(callTimeout); !strings.Contains(got, `"id":3`) || !strings.Contains(got, "success") {
		t.Fatalf("1+1 after the long line: %s", got)
	}
	if took := time.Since(start); took > serveWithin {
		t.Errorf("1+1 after the long line took %v, want at most %v", took, serveWithin)
	}
	after := rssOf(t, cmd.Process.Pid)
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

// TestE2ELimitsSlowConnections: connections that send their requests a
// byte at a time, and open again when dropped. 100 of them, under the cap
// of 150, are dropped at the read timeout; 400 more are held under the cap
// by closing the longest waiting for newer ones. A normal client is served
// within a second throughout.
func TestE2ELimitsSlowConnections(t *testing.T) {
	s := setup(t)
	const max, few, many, readTimeout = 150, 100, 400, 2 * time.Second
	tg := startTarget(t, s, modeStateful, "--workers", "2", "--max-connections", strconv.Itoa(max), "--read-timeout", readTimeout.String())
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)
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

	attack(few)
	waitMetric(t, tg, "mcp_run_python_http_connections", startTimeout, func(v float64) bool { return v >= few })
	servedWithin(t, tg, fmt.Sprintf("among %d slow connections", few))
	took := waitMetric(t, tg, `mcp_run_python_http_rejected_total{reason="read_timeout"}`, readTimeout+5*time.Second,
		func(v float64) bool { return v > 0 })
	servedWithin(t, tg, fmt.Sprintf("among %d slow connections, after the read timeout", few))

	attack(many)
	waitMetric(t, tg, "mcp_run_python_http_connections", startTimeout, func(v float64) bool { return v >= max-1 })
	for i := range 3 {
		time.Sleep(700 * time.Millisecond) // let the attack go on between the checks
		servedWithin(t, tg, fmt.Sprintf("check %d among %d slow connections", i+1, few+many))
	}
	open := metric(t, tg, "mcp_run_python_http_connections")
	evicted := metric(t, tg, `mcp_run_python_http_rejected_total{reason="connection_evicted"}`)
	timedOut := metric(t, tg, `mcp_run_python_http_rejected_total{reason="read_timeout"}`)
	after := rssOf(t, tg.cmd.Process.Pid)
	t.Logf("%d slow connections opened; the first bodies timed out %v after they filled the server; at the end %v open (cap %d), "+
		"%v closed for newer ones, %v bodies timed out; server RSS %d MiB before, %d MiB after",
		opened.Load(), took.Round(100*time.Millisecond), open, max, evicted, timedOut, before>>20, after>>20)
	if open > max {
		t.Errorf("%v connections open, over the cap of %d", open, max)
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
				wantRefusal(t, "a stream past the cap", resp.StatusCode, body, http.StatusServiceUnavailable, -32000, "--max-mcp-sessions")
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

// TestE2ELimitsIdleSSEStreams: 150 idle SSE streams against a cap of 100
// sessions: the streams past the cap get 503, a live client keeps being
// served, and the idle ones are closed after --mcp-session-idle.
func TestE2ELimitsIdleSSEStreams(t *testing.T) {
	s := setup(t)
	const max, streams, idle = 100, 150, 2 * time.Second
	tg := startTarget(t, s, modeSSE, "--workers", "2", "--max-mcp-sessions", strconv.Itoa(max), "--mcp-session-idle", idle.String())
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)
	live := tg.connect(t)
	keepActive(t, live)
	before := rssOf(t, tg.cmd.Process.Pid)

	start := time.Now()
	refused, ended := openStreams(t, tg.url, streams)
	if want := streams - (max - 1); refused != want {
		t.Errorf("%d of %d streams refused, want %d (the live client holds one session)", refused, streams, want)
	}
	if n := metric(t, tg, "mcp_run_python_mcp_sessions"); n != max {
		t.Errorf("%v sessions, want the cap, %d", n, max)
	}
	timedWorks(t, live, "the live client among idle streams")
	for range max - 1 {
		select {
		case <-ended:
		case <-time.After(idle + 5*time.Second):
			t.Fatalf("idle streams still open %v after they were opened", time.Since(start))
		}
	}
	closedAfter := time.Since(start)
	waitMetric(t, tg, "mcp_run_python_mcp_sessions", startTimeout, func(v float64) bool { return v == 1 })
	after := rssOf(t, tg.cmd.Process.Pid)
	t.Logf("%d streams: %d refused, %d closed when idle after %v; server RSS %d MiB before, %d MiB after",
		streams, refused, max-1, closedAfter.Round(100*time.Millisecond), before>>20, after>>20)
	timedWorks(t, live, "the live client after the idle streams ended")
	servedWithin(t, tg, "a new client after the idle streams ended")
}

// TestE2ELimitsMCPSessions: 80 sessions opened and left against a cap of 50:
// initialize past the cap gets 503 with its ID, a live session is never
// evicted, and the idle ones end after --mcp-session-idle.
func TestE2ELimitsMCPSessions(t *testing.T) {
	s := setup(t)
	const max, attempts, idle = 50, 80, 2 * time.Second
	tg := startTarget(t, s, modeStateful, "--workers", "2", "--max-mcp-sessions", strconv.Itoa(max), "--mcp-session-idle", idle.String())
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)
	live := tg.connect(t)
	keepActive(t, live)

	var mu sync.Mutex
	var sessions []string
	refused := 0
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`, 1000+i)
			req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, tg.url+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("initialize: %v", err)
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == http.StatusOK {
				sessions = append(sessions, resp.Header.Get("Mcp-Session-Id"))
				return
			}
			refused++
			wantRefusal(t, "initialize past the cap", resp.StatusCode, got, http.StatusServiceUnavailable, -32000, "--max-mcp-sessions")
			if !strings.Contains(string(got), fmt.Sprintf(`"id":%d`, 1000+i)) || resp.Header.Get("Retry-After") == "" {
				t.Errorf("refusal without the request's ID or Retry-After: %q", got)
			}
		})
	}
	wg.Wait()
	if want := attempts - (max - 1); refused != want {
		t.Errorf("%d of %d initialize refused, want %d (the live client holds one session)", refused, attempts, want)
	}
	if n := metric(t, tg, "mcp_run_python_mcp_sessions"); n != max {
		t.Errorf("%v sessions, want the cap, %d", n, max)
	}
	timedWorks(t, live, "the live client at the session cap")
	took := waitMetric(t, tg, "mcp_run_python_mcp_sessions", idle+5*time.Second, func(v float64) bool { return v == 1 })
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
	servedWithin(t, tg, "a new client after the idle sessions ended")
}

// TestE2ELimitsOriginAndHost: every endpoint refuses a foreign web page
// (Origin) and a rebound name (Host) with 403, and serves local pages and
// those of --allow-origin.
func TestE2ELimitsOriginAndHost(t *testing.T) {
	s := setup(t)
	const allowed = "https://app.example"
	for _, mode := range []string{modeStateful, modeSSE} {
		t.Run(mode, func(t *testing.T) {
			tg := startTarget(t, s, mode, "--workers", "1", "--allow-origin", allowed)
			type request struct{ method, path string }
			requests := []request{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}}
			if mode == modeSSE {
				requests = append(requests, request{"GET", "/sse"}, request{"POST", "/messages?sessionId=any"})
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
					ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
					req, _ := http.NewRequestWithContext(ctx, r.method, tg.url+r.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
					req.Header.Set("Content-Type", "application/json")
					if tt.origin != "" {
						req.Header.Set("Origin", tt.origin)
					}
					if tt.host != "" {
						req.Host = tt.host
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						cancel()
						t.Fatalf("%s %s %s: %v", tt.name, r.method, r.path, err)
					}
					if forbidden := resp.StatusCode == http.StatusForbidden; forbidden != tt.forbidden {
						t.Errorf("%s: %s %s: %d, want forbidden: %v", tt.name, r.method, r.path, resp.StatusCode, tt.forbidden)
					}
					if tt.forbidden {
						body, _ := io.ReadAll(resp.Body)
						wantRefusal(t, tt.name+" "+r.path, resp.StatusCode, body, http.StatusForbidden, -32000, "Forbidden")
					}
					resp.Body.Close() // streams too: cancel ends them
					cancel()
				}
			}
			// A browser asks before a cross-origin POST; the allowed page
			// gets the CORS answer it needs.
			path := "/mcp"
			if mode == modeSSE {
				path = "/messages"
			}
			req, _ := http.NewRequest(http.MethodOptions, tg.url+path, nil)
			req.Header.Set("Origin", allowed)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode >= 300 || got != allowed {
				t.Errorf("preflight from %s: %d, Access-Control-Allow-Origin %q", allowed, resp.StatusCode, got)
			}
		})
	}
}
