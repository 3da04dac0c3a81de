package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadTimeout: a body that trickles in is dropped at the read timeout,
// and a slow header block too; a response stream that follows a body is not
// cut by it. Each runs in a bubble, whose clock says that the timeout, and
// nothing else, ended the request.
func TestReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	streamed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := requestBody(r); err != nil {
			return
		}
		for i := range 5 { // a stream that outlasts the read timeout
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(timeout / 2) // the stream's pace, on the bubble's clock
		}
	})
	tests := []struct {
		name string
		run  func(t *testing.T, srv *memServer)
	}{
		{"slow body", func(t *testing.T, srv *memServer) {
			conn := srv.dial(t)
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", memAddr)
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a slow body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "--read-timeout") {
				t.Errorf("got %d %q, want 408 naming --read-timeout", resp.StatusCode, body)
			}
			if took := time.Since(start); took != timeout {
				t.Errorf("dropped after %v, want %v", took, timeout)
			}
			// The rest of the body never comes: the server must close the
			// connection rather than wait for it (it used to wait for ever,
			// or as long as a trickle kept coming).
			expectClosed(t, conn, time.Second)
		}},
		{"trickling body", func(t *testing.T, srv *memServer) {
			conn := srv.dial(t)
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", memAddr)
			start := time.Now()
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
			if took := time.Since(start); took != timeout {
				t.Errorf("dropped after %v, want %v", took, timeout)
			}
			expectClosed(t, conn, time.Second)
		}},
		{"slow headers", func(t *testing.T, srv *memServer) {
			conn := srv.dial(t)
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", memAddr)
			start := time.Now()
			if _, err := io.ReadAll(conn); err != nil {
				t.Logf("read: %v", err)
			}
			if took := time.Since(start); took != timeout {
				t.Errorf("closed after %v, want %v", took, timeout)
			}
		}},
		{"stream after the body", func(t *testing.T, srv *memServer) {
			resp, err := srv.http.Post(srv.url+"/mcp", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || strings.Count(string(body), "event") != 5 {
				t.Errorf("stream: %q, %v; want 5 events", body, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.run(t, serveMem(t, handlerFront(Limits{RequestLimit: 1 << 20, ReadTimeout: timeout}, streamed)))
			})
		})
	}
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

// closedByServer reports whether the server has closed conn; in a bubble, once
// synctest.Wait has returned, a connection that is still open has nothing
// to read.
func closedByServer(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(time.Nanosecond))
	_, err := conn.Read(make([]byte, 1))
	return err == io.EOF
}

// TestConnectionLimit: past the cap, the connection that has waited longest
// for its request makes room for the new one; only when every connection
// serves a request is the new one refused.
func TestConnectionLimit(t *testing.T) {
	const max = 3
	tests := []struct {
		name    string
		setup   func(t *testing.T, srv *memServer) []net.Conn // what holds the connections
		status  int
		evicted []bool // which of the setup's connections the server closed
	}{
		{"slow clients make room", func(t *testing.T, srv *memServer) []net.Conn {
			var conns []net.Conn
			for range max {
				c := srv.dial(t)
				fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\n{", memAddr)
				conns = append(conns, c)
			}
			return conns
		}, http.StatusOK, []bool{true, false, false}},
		{"busy connections refuse", func(t *testing.T, srv *memServer) []net.Conn {
			var conns []net.Conn
			for range max {
				c := srv.dial(t)
				fmt.Fprintf(c, "GET /block HTTP/1.1\r\nHost: %s\r\n\r\n", memAddr)
				if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			return conns
		}, http.StatusServiceUnavailable, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/block" {
						w.WriteHeader(http.StatusOK)
						w.(http.Flusher).Flush()
						<-release
					}
					_, _ = io.WriteString(w, "ok")
				})
				fe := handlerFront(Limits{ReadTimeout: time.Minute, MaxConnections: max}, handler)
				srv := serveMem(t, fe)
				defer close(release)
				held := tt.setup(t, srv)
				synctest.Wait()
				if n := fe.front.conns.open(); n != max {
					t.Fatalf("%d connections open, want %d", n, max)
				}

				start := time.Now()
				client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return srv.ln.Dial(ctx) }}}
				resp, err := client.Get(srv.url + "/x")
				if err != nil {
					t.Fatalf("new client: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if took := time.Since(start); took != 0 {
					t.Errorf("the new client waited %v", took)
				}
				if resp.StatusCode != tt.status {
					t.Fatalf("new client: %d %q, want %d", resp.StatusCode, body, tt.status)
				}
				if tt.status != http.StatusOK && !strings.Contains(string(body), "--max-connections") {
					t.Errorf("refusal %q does not name --max-connections", body)
				}
				synctest.Wait()
				for i, c := range held {
					if closed := closedByServer(c); closed != tt.evicted[i] {
						t.Errorf("held connection %d closed: %v, want %v", i, closed, tt.evicted[i])
					}
				}
				if n := fe.front.conns.open(); n > max {
					t.Errorf("%d connections open, over the cap of %d", n, max)
				}
			})
		})
	}
}

// rejected returns the front end's count of refusals for reason.
func rejected(t *testing.T, fe *HTTPFrontEnd, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(fe.front.rejected)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no refusals counted for %q", reason)
	return 0
}

// slowClient holds a connection to srv that sends its request slowly, a
// byte every half second (the body's when body is set, else the header
// block's), and opens another half a second after the server drops it,
// until ctx ends. It counts the connections it opened.
func slowClient(ctx context.Context, srv *memServer, body bool, opened *atomic.Int64) {
	head := "POST /mcp HTTP/1.1\r\nHost: " + memAddr.String() + "\r\nContent-Type: application/json\r\n"
	if body {
		head += "Content-Length: 1000000\r\n\r\n{"
	}
	for ctx.Err() == nil {
		conn, err := srv.ln.Dial(ctx)
		if err == nil {
			opened.Add(1)
			stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
			_, err = io.WriteString(conn, head)
			for err == nil {
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(500 * time.Millisecond): // the attack's pace
					_, err = conn.Write([]byte("x"))
				}
			}
			stop()
			_ = conn.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // pause before the next connection
		}
	}
}

// servedAtOnce connects a new client to srv, initializes and runs 1+1;
// the test fails unless that took no time on the bubble's clock: no limit
// made it wait.
func servedAtOnce(t *testing.T, srv *memServer, during string) {
	t.Helper()
	start := time.Now()
	// Connections of its own: an idle keep-alive connection of an earlier
	// client is, rightly, among the first the server closes for newer ones.
	c := &mcpHTTPClient{srv: srv, http: srv.client(t)}
	c.initialize(t)
	if status, body := c.call(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1 + 1"}}}`); status != http.StatusOK || !strings.Contains(body, `"id":2,"result"`) {
		t.Errorf("%s: 1+1: %d %q", during, status, body)
	}
	c.http.CloseIdleConnections()
	if took := time.Since(start); took != 0 {
		t.Errorf("%s: a normal client's initialize and 1+1 took %v, want no time", during, took)
	}
}

// TestSlowConnectionFlood, the unit twin of TestE2ELimitsStreamableHTTP's
// slow connections: connections that send their requests a byte at a time,
// and open again when dropped. Those under the cap are dropped at the read
// timeout; more are held under the cap by closing the longest waiting for
// newer ones. A normal client is served at once throughout.
func TestSlowConnectionFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, few, many, readTimeout = 15, 10, 40, 2 * time.Second
		l := DefaultLimits(0)
		l.MaxConnections, l.ReadTimeout = max, readTimeout
		srv, fe := streamableFront(t, l)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var opened atomic.Int64
		attack := func(n int) {
			for i := range n {
				wg.Go(func() { slowClient(ctx, srv, i%2 == 0, &opened) })
			}
		}
		t.Cleanup(func() { stop(); wg.Wait() })

		attack(few)
		synctest.Wait()
		if n := fe.front.conns.open(); n != few {
			t.Fatalf("%d connections open, want %d", n, few)
		}
		servedAtOnce(t, srv, fmt.Sprintf("among %d slow connections", few))
		time.Sleep(readTimeout)
		synctest.Wait()
		if n := rejected(t, fe, "read_timeout"); n != few/2 {
			t.Errorf("%v bodies timed out after %v, want the %d slow bodies", n, readTimeout, few/2)
		}
		servedAtOnce(t, srv, fmt.Sprintf("among %d slow connections, after the read timeout", few))

		attack(many)
		synctest.Wait()
		for i := range 3 {
			// At the cap, less those that the read timeout has just closed.
			if n := fe.front.conns.open(); n > max || n < max/2 {
				t.Errorf("check %d: %d connections open, want about the cap, %d", i+1, n, max)
			}
			servedAtOnce(t, srv, fmt.Sprintf("check %d among %d slow connections", i+1, few+many))
			time.Sleep(700 * time.Millisecond) // let the attack go on between the checks
			synctest.Wait()
		}
		evicted := rejected(t, fe, "connection_evicted")
		t.Logf("%d slow connections opened; %v closed for newer ones, %v bodies timed out",
			opened.Load(), evicted, rejected(t, fe, "read_timeout"))
		if evicted == 0 {
			t.Errorf("no connection closed for a newer one: the attack did not reach the cap")
		}
		if n := fe.front.conns.open(); n > max {
			t.Errorf("%d connections open, over the cap of %d", n, max)
		}
	})
}
