package transport_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
)

// TestNotificationsPrecedeResult makes 100 calls, 8 at a time, each printing
// 20 lines, and checks that when a call's result arrives every one of its
// notifications has already arrived, in order.
func TestNotificationsPrecedeResult(t *testing.T) {
	const calls, lines, parallel = 100, 20, 8
	for _, tc := range transporttest.Cases() {
		for _, e := range tc.Eras {
			if tc.WantLevel(e, mcp.LoggingLevelDebug) == "" {
				continue // such clients get no notifications; see TestLogLevels
			}
			t.Run(tc.Name+"/"+string(e), func(t *testing.T) {
				c := tc.Serve(t, &mcptest.FakeRunner{Lines: lines})(t, e)
				c.SetLogLevel(t, mcp.LoggingLevelDebug)
				ctx := mcptest.Context(t)
				next := make(chan int)
				var wg sync.WaitGroup
				for range parallel {
					wg.Go(func() {
						for i := range next {
							code := fmt.Sprintf("call-%03d", i)
							text, isError, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: code})
							// Snapshot at once: anything arriving later is late.
							got := c.Log.ForCode(code)
							if err != nil || isError {
								t.Errorf("call %s: error %v, isError %v, %q", code, err, isError, text)
								continue
							}
							if want := mcptest.ExpectedXML(code, lines); text != want {
								t.Errorf("call %s: result %q, want %q", code, text, want)
							}
							if want := mcptest.ExpectedLog(code, lines, mcp.LoggingLevelDebug); !slices.Equal(got, want) {
								t.Errorf("call %s: %d of %d notifications before the result:\n got %v\nwant %v",
									code, len(got), len(want), got, want)
							}
						}
					})
				}
				for i := range calls {
					next <- i
				}
				close(next)
				wg.Wait()
				if n := len(c.Log.All()); n != calls*lines {
					t.Errorf("received %d notifications in all, want %d", n, calls*lines)
				}
			})
		}
	}
}

// TestLogLevels checks which lines each level lets through: stdout lines are
// info, stderr lines warning, and nothing is sent before a level is set.
func TestLogLevels(t *testing.T) {
	const lines = 6
	levels := []mcp.LoggingLevel{
		"", // never set
		mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelNotice, mcp.LoggingLevelWarning,
		mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert, mcp.LoggingLevelEmergency,
	}
	for _, tc := range transporttest.Cases() {
		for _, e := range tc.Eras {
			for _, level := range levels {
				name := string(level)
				if name == "" {
					name = "unset"
				}
				t.Run(tc.Name+"/"+string(e)+"/"+name, func(t *testing.T) {
					c := tc.Serve(t, &mcptest.FakeRunner{Lines: lines})(t, e)
					if level != "" {
						c.SetLogLevel(t, level)
					}
					ctx := mcptest.Context(t)
					if _, _, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: "lvl"}); err != nil {
						t.Fatalf("call: %v", err)
					}
					want := mcptest.ExpectedLog("lvl", lines, tc.WantLevel(e, level))
					if got := c.Log.ForCode("lvl"); !slices.Equal(got, want) {
						t.Errorf("before the result: got %v, want %v", got, want)
					}
					// Round trip once more: nothing may trail the result.
					if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
						t.Fatalf("list tools: %v", err)
					}
					if got := c.Log.All(); !slices.Equal(got, want) {
						t.Errorf("in all: got %v, want %v", got, want)
					}
				})
			}
		}
	}
}

// TestClientsAreIsolated runs two clients with different levels on one
// server at the same time: each gets its own calls' notifications at its own
// level, and nothing of the other's.
func TestClientsAreIsolated(t *testing.T) {
	const calls, lines = 30, 9
	for _, tc := range transporttest.Cases() {
		if !tc.Shared {
			continue
		}
		for _, e := range tc.Eras {
			t.Run(tc.Name+"/"+string(e), func(t *testing.T) {
				connect := tc.Serve(t, &mcptest.FakeRunner{Lines: lines})
				clients := []struct {
					prefix string
					level  mcp.LoggingLevel
					c      *mcptest.Client
				}{
					{"a", mcp.LoggingLevelInfo, connect(t, e)},
					{"b", mcp.LoggingLevelWarning, connect(t, e)},
					{"c", "", connect(t, e)},
				}
				for _, cl := range clients {
					if cl.level != "" {
						cl.c.SetLogLevel(t, cl.level)
					}
				}
				ctx := mcptest.Context(t)
				var wg sync.WaitGroup
				for _, cl := range clients {
					wg.Go(func() {
						for i := range calls {
							code := fmt.Sprintf("%s-%02d", cl.prefix, i)
							if _, _, err := cl.c.Call(ctx, map[string]any{mcptest.CodeArgument: code}); err != nil {
								t.Errorf("client %s call %s: %v", cl.prefix, code, err)
							}
						}
					})
				}
				wg.Wait()
				for _, cl := range clients {
					var want []mcptest.LogEntry
					for i := range calls {
						want = append(want, mcptest.ExpectedLog(fmt.Sprintf("%s-%02d", cl.prefix, i), lines, tc.WantLevel(e, cl.level))...)
					}
					// Each client makes its calls one after the other, so its
					// notifications arrive in call order.
					if got := cl.c.Log.All(); !slices.Equal(got, want) {
						t.Errorf("client %s (level %q): got %d notifications %v\nwant %d %v",
							cl.prefix, cl.level, len(got), got, len(want), want)
					}
				}
			})
		}
	}
}

// TestStatelessRejectsSessionMethods checks that GET and DELETE get 405 in
// stateless mode, as upstream answered, so no client can open the GET stream
// that mcp-go would make a session shared by all.
func TestStatelessRejectsSessionMethods(t *testing.T) {
	_, url := transporttest.HTTP(t, transport.StreamableHTTPStateless, &mcptest.FakeRunner{})
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			req, err := http.NewRequestWithContext(mcptest.Context(t), method, url+transport.StreamableHTTP.Path(), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Method not allowed."},"id":null}`
			if resp.StatusCode != http.StatusMethodNotAllowed || string(body) != want {
				t.Errorf("%s: status %d body %q, want 405 %q", method, resp.StatusCode, body, want)
			}
		})
	}
}

// TestStatelessCancelCannotReachOtherClients sends notifications/cancelled
// for every plausible request ID while a stateless client's call runs; mcp-go
// alone would match them against that call, all requests sharing session "".
func TestStatelessCancelCannotReachOtherClients(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	r := &mcptest.FakeRunner{Lines: 1, Block: func(ctx context.Context, _ string) error {
		started <- struct{}{}
		<-release
		return ctx.Err() // cancelled before release means a cancel got through
	}}
	connect, url := transporttest.HTTP(t, transport.StreamableHTTPStateless, r)
	c := connect(t, mcptest.Legacy)
	ctx := mcptest.Context(t)

	type outcome struct {
		text    string
		isError bool
		err     error
	}
	result := make(chan outcome, 1)
	go func() {
		text, isError, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: "victim"})
		result <- outcome{text, isError, err}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("call did not start")
	}
	for id := range 20 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"x"}}`, id)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+transport.StreamableHTTP.Path(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("post cancel: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("cancel for id %d: status %d, want 202", id, resp.StatusCode)
		}
	}
	close(release)
	out := <-result
	if out.err != nil || out.isError || out.text != mcptest.ExpectedXML("victim", 1) {
		t.Errorf("call was disturbed: err %v, isError %v, %q", out.err, out.isError, out.text)
	}
}

// TestSSEClientGoneCancelsCall checks that a call is cancelled when its SSE
// client disconnects: mcp-go runs SSE calls on a context detached from the
// connection.
func TestSSEClientGoneCancelsCall(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	r := &mcptest.FakeRunner{Block: func(ctx context.Context, _ string) error {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	}}
	connect, _ := transporttest.HTTP(t, transport.SSE, r)
	c := connect(t, mcptest.Legacy)
	ctx := mcptest.Context(t)
	go func() { _, _, _ = c.Call(ctx, map[string]any{mcptest.CodeArgument: "abandoned"}) }()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("call did not start")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close client: %v", err)
	}
	select {
	case cause := <-cancelled:
		if cause != mcpserver.ErrSessionEnded {
			t.Errorf("cancelled with cause %v, want %v", cause, mcpserver.ErrSessionEnded)
		}
	case <-ctx.Done():
		t.Fatal("call not cancelled after its client left")
	}
}

// TestStdioRunsManyCallsAtOnce needs 12 calls inside Run at the same time,
// more than mcp-go's default of 5 stdio tool workers.
func TestStdioRunsManyCallsAtOnce(t *testing.T) {
	const n = 12
	var mu sync.Mutex
	inside := 0
	all := make(chan struct{})
	r := &mcptest.FakeRunner{Lines: 1, Block: func(ctx context.Context, _ string) error {
		mu.Lock()
		if inside++; inside == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	c := transporttest.Stdio(t, r, 2)(t, mcptest.Legacy)
	ctx := mcptest.Context(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code := fmt.Sprintf("c%d", i)
			if text, isError, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: code}); err != nil || isError {
				t.Errorf("call %s: %v %v %q", code, err, isError, text)
			}
		})
	}
	wg.Wait()
}
