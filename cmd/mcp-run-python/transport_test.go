package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// transportCase is one way of serving MCP under test.
type transportCase struct {
	name  string
	serve func(t *testing.T, r runner) connectFunc
	eras  []era
	// legacyLevels reports whether legacy clients keep the level they set
	// with logging/setLevel (not in stateless mode, as upstream).
	legacyLevels bool
	// shared reports whether several clients can use one server.
	shared bool
}

// transportCases lists every transport, and the standalone GET stream.
func transportCases() []transportCase {
	both := []era{legacy, modern}
	return []transportCase{
		{
			name:         "stdio",
			serve:        func(t *testing.T, r runner) connectFunc { return stdioServer(t, r, 2) },
			eras:         both,
			legacyLevels: true,
		},
		{
			name: "sse",
			serve: func(t *testing.T, r runner) connectFunc {
				c, _ := httpServer(t, ModeSSE, r)
				return c
			},
			eras: both, legacyLevels: true, shared: true,
		},
		{
			name: "streamable_http",
			serve: func(t *testing.T, r runner) connectFunc {
				c, _ := httpServer(t, ModeStreamableHTTP, r)
				return c
			},
			eras: both, legacyLevels: true, shared: true,
		},
		{
			// The client also holds the standalone GET stream, which mcp-go
			// feeds from the same session channel as the POST responses.
			name: "streamable_http_with_get_stream",
			serve: func(t *testing.T, r runner) connectFunc {
				c, _ := httpServer(t, ModeStreamableHTTP, r, transport.WithContinuousListening())
				return c
			},
			eras: []era{legacy}, legacyLevels: true, shared: true,
		},
		{
			name: "streamable_http_stateless",
			serve: func(t *testing.T, r runner) connectFunc {
				c, _ := httpServer(t, ModeStreamableHTTPStateless, r)
				return c
			},
			eras: both, legacyLevels: false, shared: true,
		},
	}
}

// wantLevel is the level a client of era e on tc gets after setting level.
func (tc transportCase) wantLevel(e era, level mcp.LoggingLevel) mcp.LoggingLevel {
	if e == legacy && !tc.legacyLevels {
		return ""
	}
	return level
}

// TestNotificationsPrecedeResult makes 100 calls, 8 at a time, each printing
// 20 lines, and checks that when a call's result arrives every one of its
// notifications has already arrived, in order.
func TestNotificationsPrecedeResult(t *testing.T) {
	const calls, lines, parallel = 100, 20, 8
	for _, tc := range transportCases() {
		for _, e := range tc.eras {
			if tc.wantLevel(e, mcp.LoggingLevelDebug) == "" {
				continue // such clients get no notifications; see TestLogLevels
			}
			t.Run(tc.name+"/"+string(e), func(t *testing.T) {
				c := tc.serve(t, &fakeRunner{lines: lines})(t, e)
				c.setLevel(t, mcp.LoggingLevelDebug)
				ctx := testContext(t)
				next := make(chan int)
				var wg sync.WaitGroup
				for range parallel {
					wg.Go(func() {
						for i := range next {
							code := fmt.Sprintf("call-%03d", i)
							text, isError, err := c.call(ctx, map[string]any{codeArgument: code})
							// Snapshot at once: anything arriving later is late.
							got := c.log.forCode(code)
							if err != nil || isError {
								t.Errorf("call %s: error %v, isError %v, %q", code, err, isError, text)
								continue
							}
							if want := expectedXML(code, lines); text != want {
								t.Errorf("call %s: result %q, want %q", code, text, want)
							}
							if want := expectedLog(code, lines, mcp.LoggingLevelDebug); !slices.Equal(got, want) {
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
				if n := len(c.log.all()); n != calls*lines {
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
	for _, tc := range transportCases() {
		for _, e := range tc.eras {
			for _, level := range levels {
				name := string(level)
				if name == "" {
					name = "unset"
				}
				t.Run(tc.name+"/"+string(e)+"/"+name, func(t *testing.T) {
					c := tc.serve(t, &fakeRunner{lines: lines})(t, e)
					if level != "" {
						c.setLevel(t, level)
					}
					ctx := testContext(t)
					if _, _, err := c.call(ctx, map[string]any{codeArgument: "lvl"}); err != nil {
						t.Fatalf("call: %v", err)
					}
					want := expectedLog("lvl", lines, tc.wantLevel(e, level))
					if got := c.log.forCode("lvl"); !slices.Equal(got, want) {
						t.Errorf("before the result: got %v, want %v", got, want)
					}
					// Round trip once more: nothing may trail the result.
					if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
						t.Fatalf("list tools: %v", err)
					}
					if got := c.log.all(); !slices.Equal(got, want) {
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
	for _, tc := range transportCases() {
		if !tc.shared {
			continue
		}
		for _, e := range tc.eras {
			t.Run(tc.name+"/"+string(e), func(t *testing.T) {
				connect := tc.serve(t, &fakeRunner{lines: lines})
				clients := []struct {
					prefix string
					level  mcp.LoggingLevel
					c      *testClient
				}{
					{"a", mcp.LoggingLevelInfo, connect(t, e)},
					{"b", mcp.LoggingLevelWarning, connect(t, e)},
					{"c", "", connect(t, e)},
				}
				for _, cl := range clients {
					if cl.level != "" {
						cl.c.setLevel(t, cl.level)
					}
				}
				ctx := testContext(t)
				var wg sync.WaitGroup
				for _, cl := range clients {
					wg.Go(func() {
						for i := range calls {
							code := fmt.Sprintf("%s-%02d", cl.prefix, i)
							if _, _, err := cl.c.call(ctx, map[string]any{codeArgument: code}); err != nil {
								t.Errorf("client %s call %s: %v", cl.prefix, code, err)
							}
						}
					})
				}
				wg.Wait()
				for _, cl := range clients {
					var want []logEntry
					for i := range calls {
						want = append(want, expectedLog(fmt.Sprintf("%s-%02d", cl.prefix, i), lines, tc.wantLevel(e, cl.level))...)
					}
					// Each client makes its calls one after the other, so its
					// notifications arrive in call order.
					if got := cl.c.log.all(); !slices.Equal(got, want) {
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
	_, url := httpServer(t, ModeStreamableHTTPStateless, &fakeRunner{})
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), method, url+streamablePath, nil)
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
	r := &fakeRunner{lines: 1, block: func(ctx context.Context, _ string) error {
		started <- struct{}{}
		<-release
		return ctx.Err() // cancelled before release means a cancel got through
	}}
	connect, url := httpServer(t, ModeStreamableHTTPStateless, r)
	c := connect(t, legacy)
	ctx := testContext(t)

	type outcome struct {
		text    string
		isError bool
		err     error
	}
	result := make(chan outcome, 1)
	go func() {
		text, isError, err := c.call(ctx, map[string]any{codeArgument: "victim"})
		result <- outcome{text, isError, err}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("call did not start")
	}
	for id := range 20 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"x"}}`, id)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+streamablePath, strings.NewReader(body))
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
	if out.err != nil || out.isError || out.text != expectedXML("victim", 1) {
		t.Errorf("call was disturbed: err %v, isError %v, %q", out.err, out.isError, out.text)
	}
}

func TestUnaddressableCancel(t *testing.T) {
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`
	modernCancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	modernHeader := http.Header{mcp.HeaderProtocolVersion: {"2026-07-28"}}
	legacyHeader := http.Header{mcp.HeaderProtocolVersion: {"2025-06-18"}}
	tests := []struct {
		name      string
		stateless bool
		header    http.Header
		body      string
		want      bool
	}{
		{"stateless cancel", true, legacyHeader, cancel, true},
		{"stateful legacy cancel goes to its session", false, legacyHeader, cancel, false},
		{"stateful cancel by header version", false, modernHeader, cancel, true},
		{"stateful cancel by _meta version", false, http.Header{}, modernCancel, true},
		{"other notification", true, http.Header{}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{"request", true, http.Header{}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"not JSON", true, http.Header{}, `nope`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unaddressableCancel(tt.stateless, tt.header, []byte(tt.body)); got != tt.want {
				t.Errorf("unaddressableCancel = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSSEClientGoneCancelsCall checks that a call is cancelled when its SSE
// client disconnects: mcp-go runs SSE calls on a context detached from the
// connection.
func TestSSEClientGoneCancelsCall(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	r := &fakeRunner{block: func(ctx context.Context, _ string) error {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	}}
	connect, _ := httpServer(t, ModeSSE, r)
	c := connect(t, legacy)
	ctx := testContext(t)
	go func() { _, _, _ = c.call(ctx, map[string]any{codeArgument: "abandoned"}) }()
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
		if cause != errSessionEnded {
			t.Errorf("cancelled with cause %v, want %v", cause, errSessionEnded)
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
	r := &fakeRunner{lines: 1, block: func(ctx context.Context, _ string) error {
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
	c := stdioServer(t, r, 2)(t, legacy)
	ctx := testContext(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code := fmt.Sprintf("c%d", i)
			if text, isError, err := c.call(ctx, map[string]any{codeArgument: code}); err != nil || isError {
				t.Errorf("call %s: %v %v %q", code, err, isError, text)
			}
		})
	}
	wg.Wait()
}

// TestResponseMatching checks that the SSE shutdown matches the response
// events mcp-go writes to the requests they answer, and nothing else.
func TestResponseMatching(t *testing.T) {
	requests := []struct {
		name string
		body string
		key  string // "" when not a request
	}{
		{"numeric id", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, "n:7"},
		{"float spelling", `{"jsonrpc":"2.0","id":7.0,"method":"tools/call"}`, "n:7"},
		{"string id", `{"jsonrpc":"2.0","id":"7","method":"tools/list"}`, "s:7"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, ""},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, ""},
		{"response from the client", `{"jsonrpc":"2.0","id":7,"result":{}}`, ""},
		{"batch", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, ""},
		{"not JSON", `{`, ""},
	}
	for _, tt := range requests {
		t.Run("request/"+tt.name, func(t *testing.T) {
			key, ok := requestKey([]byte(tt.body))
			if key != tt.key || ok != (tt.key != "") {
				t.Errorf("requestKey = %q %v, want %q", key, ok, tt.key)
			}
		})
	}
	events := []struct {
		name  string
		event string
		key   string // "" when not a response
	}{
		{"result", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n", "n:7"},
		{"error", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32600,\"message\":\"x\"}}\n\n", "s:a"},
		{"log notification", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n", ""},
		{"ping from the server", "event: message\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n", ""},
		{"endpoint", "event: endpoint\ndata: /messages?sessionId=abc\r\n\r\n", ""},
	}
	for _, tt := range events {
		t.Run("event/"+tt.name, func(t *testing.T) {
			key, ok := responseKey([]byte(tt.event))
			if key != tt.key || ok != (tt.key != "") {
				t.Errorf("responseKey = %q %v, want %q", key, ok, tt.key)
			}
		})
	}
}

func TestPendingResponses(t *testing.T) {
	p := newPendingResponses()
	p.add("s1", "n:1")
	p.add("s1", "n:1") // the same request twice counts once
	p.add("s1", "n:2")
	p.add("s2", "n:1")
	waited := make(chan error, 1)
	go func() { waited <- p.wait(testContext(t)) }()
	p.done("s1", "n:1")
	p.done("s1", "n:9") // unknown: ignored
	p.done("s1", "n:2")
	if !p.has("s2") || p.has("s1") {
		t.Errorf("has: s1 %v, s2 %v; want only s2", p.has("s1"), p.has("s2"))
	}
	select {
	case err := <-waited:
		t.Fatalf("wait returned %v with a response pending", err)
	default:
	}
	p.dropGroup("s2")
	if err := <-waited; err != nil {
		t.Errorf("wait: %v", err)
	}
	p.add("s3", "n:1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 response(s) not delivered") {
		t.Errorf("wait with a response pending and an ended context = %v", err)
	}
}

// TestSlogLoggerReachesZap checks that mcp-go's slog records reach the zap
// core: under the logger's name, at the mapped level, with a group's keys
// inside the group and no stack trace.
func TestSlogLoggerReachesZap(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := slogLogger(zap.New(core).Named("mcp-run-python"))

	log.Debug("below the level")
	log.With("session", "s1").WithGroup("request").Error("failed to write", "err", "broken pipe", slog.Int("n", 2))
	log.Warn("odd", slog.Group("peer", "addr", "127.0.0.1"))
	log.WithGroup("empty").Info("no attributes")

	type entry struct {
		Level   zapcore.Level
		Name    string
		Message string
		Context map[string]any
		Stack   string
	}
	var got []entry
	for _, e := range logs.AllUntimed() {
		got = append(got, entry{e.Level, e.LoggerName, e.Message, e.ContextMap(), e.Stack})
	}
	want := []entry{
		{zapcore.ErrorLevel, "mcp-run-python", "failed to write", map[string]any{
			"session": "s1",
			"request": map[string]any{"err": "broken pipe", "n": int64(2)},
		}, ""},
		{zapcore.WarnLevel, "mcp-run-python", "odd", map[string]any{
			"peer": map[string]any{"addr": "127.0.0.1"},
		}, ""},
		{zapcore.InfoLevel, "mcp-run-python", "no attributes", map[string]any{}, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("zap entries\n got %#v\nwant %#v", got, want)
	}
}
