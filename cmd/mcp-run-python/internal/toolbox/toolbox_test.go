package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// helperEnv selects the role of the test binary run as a tool server.
const helperEnv = "TOOLBOX_TEST_HELPER"

// TestHelperProcess is not a test: it is the stdio tool server that the
// stdio tests run, this test binary with helperEnv set.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "stdio" {
		t.Skip("the stdio tool server of other tests")
	}
	if err := server.ServeStdio(newTestServer(nil, nil)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// testTools are the tools of newTestServer, sorted, as List gives them.
var testTools = []string{"add", "big", "echo", "exit_soon", "fail", "grow", "pid", "slow"}

// newTestServer returns an MCP server whose tools count their calls in
// calls (when not nil); slow returns when its call is cancelled or
// release is closed.
func newTestServer(calls *atomic.Int64, release <-chan struct{}) *server.MCPServer {
	s := server.NewMCPServer("test", "1")
	count := func(h server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls != nil {
				calls.Add(1)
			}
			return h(ctx, req)
		}
	}
	s.AddTool(mcp.NewTool("add", mcp.WithDescription("Add two numbers."),
		mcp.WithNumber("a", mcp.Required()), mcp.WithNumber("b", mcp.Required())),
		count(func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			sum := req.GetFloat("a", 0) + req.GetFloat("b", 0)
			return mcp.NewToolResultStructured(map[string]any{"sum": sum}, fmt.Sprint(sum)), nil
		}))
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())),
		count(func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res := mcp.NewToolResultText(req.GetString("text", ""))
			res.Content = append(res.Content, mcp.NewImageContent("aGk=", "image/png"))
			return res, nil
		}))
	s.AddTool(mcp.NewTool("big", mcp.WithNumber("bytes", mcp.Required())),
		count(func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Repeat("x", req.GetInt("bytes", 0))), nil
		}))
	s.AddTool(mcp.NewTool("fail"), count(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("boom"), nil
	}))
	s.AddTool(mcp.NewTool("slow"), count(func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return mcp.NewToolResultText("done"), nil
	}))
	s.AddTool(mcp.NewTool("pid"), count(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
	}))
	s.AddTool(mcp.NewTool("exit_soon"), count(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if os.Getenv(helperEnv) == "" {
			return mcp.NewToolResultError("not a helper process"), nil
		}
		time.AfterFunc(100*time.Millisecond, func() { os.Exit(3) })
		return mcp.NewToolResultText("bye"), nil
	}))
	s.AddTool(mcp.NewTool("grow", mcp.WithDescription("Adds the tool extra, which the server announces.")),
		count(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("extra"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("extra"), nil
			})
			return mcp.NewToolResultText("grown"), nil
		}))
	return s
}

// httpServer is a Streamable HTTP tool server on a listener of its own,
// which a test can stop and start again on the same address.
type httpServer struct {
	t       *testing.T
	addr    string
	calls   atomic.Int64
	release chan struct{}
	handler http.Handler
	ts      *httptest.Server
}

// newHTTPServer starts a Streamable HTTP tool server.
func newHTTPServer(t *testing.T) *httpServer {
	t.Helper()
	h := &httpServer{t: t, release: make(chan struct{})}
	h.handler = server.NewStreamableHTTPServer(newTestServer(&h.calls, h.release))
	h.start()
	t.Cleanup(func() { close(h.release) }) // runs before the ts.Close of start, which waits for slow
	return h
}

// url is the server's MCP endpoint.
func (h *httpServer) url() string { return "http://" + h.addr + "/mcp" }

// start serves on h.addr, a new address the first time.
func (h *httpServer) start() {
	h.t.Helper()
	addr := h.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		h.t.Fatalf("listen on %s: %v", addr, err)
	}
	h.addr = ln.Addr().String()
	h.ts = httptest.NewUnstartedServer(h.handler)
	h.ts.Listener = ln
	h.ts.Start()
	h.t.Cleanup(h.ts.Close)
}

// stop stops serving; start serves again on the same address.
func (h *httpServer) stop() {
	h.ts.CloseClientConnections()
	h.ts.Close()
}

// freeAddr returns a local address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// testOptions are Options that retry quickly.
func testOptions() Options {
	return Options{ConnectTimeout: 5 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}
}

// newToolbox starts the toolbox of servers, closed at the end of the test,
// and returns it with its log.
func newToolbox(t *testing.T, servers []ServerConfig, allow string, opts Options) (*Toolbox, *observer.ObservedLogs) {
	t.Helper()
	a, err := ParseAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	tb := New(context.Background(), Config{Servers: servers}, a, zap.New(core), opts)
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			for _, e := range logs.All() {
				t.Logf("log: %s %s %v", e.Level, e.Message, e.ContextMap())
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tb.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return tb, logs
}

// names returns the server.tool names of specs.
func names(specs []supervisor.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Server+"."+s.Name)
	}
	return out
}

// qualified returns server.tool for each tool.
func qualified(server string, tools ...string) []string {
	var out []string
	for _, tool := range tools {
		out = append(out, server+"."+tool)
	}
	return out
}

// eventually polls cond until it holds, failing t after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call calls a tool with a 10 s bound.
func call(tb *Toolbox, server, tool, args string) (supervisor.ToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tb.Call(ctx, server, tool, json.RawMessage(args))
}

// mustCall calls a tool, failing t on an error.
func mustCall(t *testing.T, tb *Toolbox, server, tool, args string) supervisor.ToolResult {
	t.Helper()
	res, err := call(tb, server, tool, args)
	if err != nil {
		t.Fatalf("Call %s.%s: %v", server, tool, err)
	}
	return res
}

func TestHTTP(t *testing.T) {
	h := newHTTPServer(t)
	tb, _ := newToolbox(t, []ServerConfig{{Name: "web", Transport: StreamableHTTP, URL: h.url()}}, "", Options{ResultLimit: 1000})

	list := tb.List()
	if got, want := names(list), qualified("web", testTools...); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if list[0].Description != "Add two numbers." || !strings.Contains(string(list[0].InputSchema), `"required":["a","b"]`) {
		t.Errorf("List[0] = %+v", list[0])
	}

	tests := []struct {
		name, tool, args string
		want             supervisor.ToolResult
	}{
		{"structured", "add", `{"a": 1, "b": 2}`, supervisor.ToolResult{Structured: json.RawMessage(`{"sum":3}`), Text: "3"}},
		{"text and an image", "echo", `{"text": "hi"}`, supervisor.ToolResult{Text: "hi\n[image/png content]"}},
		{"tool error", "fail", `{}`, supervisor.ToolResult{Text: "boom", IsError: true}},
		{"no arguments", "pid", ``, supervisor.ToolResult{Text: fmt.Sprint(os.Getpid())}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustCall(t, tb, "web", tt.tool, tt.args)
			if string(got.Structured) != string(tt.want.Structured) || got.Text != tt.want.Text || got.IsError != tt.want.IsError {
				t.Errorf("Call = %+v (structured %s), want %+v", got, got.Structured, tt.want)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		refused := []struct {
			name, server, tool, args string
			want                     []string
		}{
			{"string for a number", "web", "add", `{"a": "x", "b": 2}`, []string{"invalid arguments for web.add: at '/a': got string, want number"}},
			{"missing argument", "web", "add", `{"a": 1}`, []string{"invalid arguments for web.add: missing property 'b'"}},
			{"two problems", "web", "add", `{"a": "x"}`, []string{"invalid arguments for web.add: ", "missing property 'b'", "at '/a'"}},
			{"not an object", "web", "add", `[1, 2]`, []string{"invalid arguments for web.add: want a JSON object, got array"}},
			{"not JSON", "web", "add", `{"a": 1`, []string{"invalid arguments for web.add"}},
			{"unknown tool", "web", "nope", `{}`, []string{"the tool server web has no tool nope"}},
			{"unknown server", "calc", "add", `{}`, []string{`no tool server is named "calc"`}},
		}
		for _, tt := range refused {
			before := h.calls.Load()
			_, err := call(tb, tt.server, tt.tool, tt.args)
			wantError(t, err, tt.want...)
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q is not one line", tt.name, err)
			}
			if n := h.calls.Load() - before; n != 0 {
				t.Errorf("%s: the server was called %d times", tt.name, n)
			}
		}
	})

	t.Run("result limit", func(t *testing.T) {
		_, err := call(tb, "web", "echo", fmt.Sprintf(`{"text": %q}`, strings.Repeat("x", 2000)))
		wantError(t, err, "the result of web.echo is 2.0 KiB, more than the tool result limit of 1000 B (--tool-result-limit)")
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := tb.Call(ctx, "web", "slow", json.RawMessage(`{}`))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Call of a cancelled slow tool: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Call returned %v after its context ended", d)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				res, err := call(tb, "web", "add", fmt.Sprintf(`{"a": %d, "b": 1}`, i))
				if want := fmt.Sprintf(`{"sum":%d}`, i+1); err != nil || string(res.Structured) != want {
					t.Errorf("Call add %d: %s, %v; want %s", i, res.Structured, err, want)
				}
			})
		}
		wg.Wait()
	})
}

func TestAllowedTools(t *testing.T) {
	h := newHTTPServer(t)
	tb, _ := newToolbox(t, []ServerConfig{{Name: "web", Transport: StreamableHTTP, URL: h.url()}}, "web.add,web.echo", testOptions())
	if got, want := names(tb.List()), qualified("web", "add", "echo"); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	_, err := call(tb, "web", "fail", `{}`)
	wantError(t, err, "the tool web.fail is not allowed (--tools-allow)")
	if h.calls.Load() != 0 {
		t.Error("the server was called")
	}
	mustCall(t, tb, "web", "add", `{"a": 1, "b": 2}`)
}

func TestSSE(t *testing.T) {
	ts := httptest.NewUnstartedServer(nil)
	ts.Config.Handler = server.NewSSEServer(newTestServer(nil, nil), server.WithBaseURL("http://"+ts.Listener.Addr().String()))
	ts.Start()
	t.Cleanup(ts.Close)
	tb, _ := newToolbox(t, []ServerConfig{{Name: "old", Transport: SSE, URL: ts.URL + "/sse"}}, "", testOptions())
	if got, want := names(tb.List()), qualified("old", testTools...); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if res := mustCall(t, tb, "old", "add", `{"a": 1, "b": 2}`); string(res.Structured) != `{"sum":3}` {
		t.Errorf("Call add = %s", res.Structured)
	}
}

func TestServerDownAtStart(t *testing.T) {
	h := newHTTPServer(t)
	addr := freeAddr(t)
	opts := testOptions()
	opts.ConnectTimeout = 2 * time.Second
	start := time.Now()
	tb, _ := newToolbox(t, []ServerConfig{
		{Name: "up", Transport: StreamableHTTP, URL: h.url()},
		{Name: "down", Transport: StreamableHTTP, URL: "http://" + addr + "/mcp"},
	}, "", opts)
	if d := time.Since(start); d > opts.ConnectTimeout+time.Second {
		t.Errorf("Start took %v", d)
	}
	// The server that is down is listed with the reason, which code
	// mode's calls of its tools raise.
	list := tb.List()
	if got, want := names(list), append(qualified("up", testTools...), "down."); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if down := list[len(list)-1].Down; !strings.HasPrefix(down, "tool server down is not connected: ") || !strings.HasSuffix(down, "; retrying") {
		t.Errorf("down's entry says %q, want why it is down", down)
	}
	_, err := call(tb, "down", "add", `{"a": 1, "b": 2}`)
	wantError(t, err, "tool server down is not connected: ", "; retrying")

	// The server comes up where the toolbox looks for it.
	late := &httpServer{t: t, addr: addr, release: make(chan struct{})}
	late.handler = server.NewStreamableHTTPServer(newTestServer(&late.calls, late.release))
	late.start()
	eventually(t, "the late server's tools are listed", func() bool { return len(tb.List()) == 2*len(testTools) })
	if res := mustCall(t, tb, "down", "add", `{"a": 1, "b": 2}`); string(res.Structured) != `{"sum":3}` {
		t.Errorf("Call add = %s", res.Structured)
	}
}

func TestServerHangsAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var conns []net.Conn // held open, never answered
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	opts := testOptions()
	opts.ConnectTimeout = 300 * time.Millisecond
	start := time.Now()
	tb, _ := newToolbox(t, []ServerConfig{{Name: "mute", Transport: StreamableHTTP, URL: "http://" + ln.Addr().String()}}, "", opts)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Start took %v, more than its timeout of %v", d, opts.ConnectTimeout)
	}
	// No tools, and the server with why it is down.
	if list := tb.List(); len(list) != 1 || list[0].Server != "mute" || list[0].Name != "" || !strings.HasPrefix(list[0].Down, "tool server mute is not connected: ") {
		t.Errorf("List = %#v, want mute's entry with why it is down", list)
	}
	eventually(t, "the first attempt failed", func() bool {
		_, err := call(tb, "mute", "add", `{}`)
		return err != nil && strings.Contains(err.Error(), "no answer within 300ms")
	})
}

func TestReconnect(t *testing.T) {
	h := newHTTPServer(t)
	tb, _ := newToolbox(t, []ServerConfig{{Name: "web", Transport: StreamableHTTP, URL: h.url()}}, "", testOptions())
	mustCall(t, tb, "web", "pid", `{}`)

	h.stop()
	_, err := call(tb, "web", "pid", `{}`)
	wantError(t, err, "tool server web is not connected: ", "; retrying")
	if got := names(tb.List()); len(got) != len(testTools) {
		t.Errorf("List of a server that went down = %q, want its last list", got)
	}
	_, err = call(tb, "web", "add", `{"a": "x", "b": 1}`)
	wantError(t, err, "invalid arguments for web.add") // checked even while down

	h.start()
	eventually(t, "the server is called again", func() bool {
		_, err := call(tb, "web", "pid", `{}`)
		return err == nil
	})
}

// stdioServer is the configuration of the helper process.
func stdioServer(name string) ServerConfig {
	return ServerConfig{
		Name: name, Transport: Stdio, Command: os.Args[0],
		Args: []string{"-test.run=^TestHelperProcess$"},
		Env:  map[string]string{helperEnv: "stdio"},
	}
}

func TestStdio(t *testing.T) {
	tb, logs := newToolbox(t, []ServerConfig{stdioServer("local")}, "", testOptions())
	if got, want := names(tb.List()), qualified("local", testTools...); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if res := mustCall(t, tb, "local", "add", `{"a": 1.5, "b": 2}`); string(res.Structured) != `{"sum":3.5}` {
		t.Errorf("Call add = %s", res.Structured)
	}
	_, err := call(tb, "local", "add", `{"a": 1}`)
	wantError(t, err, "invalid arguments for local.add: missing property 'b'")

	pid := mustCall(t, tb, "local", "pid", `{}`).Text
	if pid == fmt.Sprint(os.Getpid()) {
		t.Fatal("the stdio server runs in the test process")
	}
	connected := func() int { return logs.FilterMessage("tool server connected").Len() }
	if n := connected(); n != 1 {
		t.Fatalf("connected %d times", n)
	}

	// The server adds a tool and says so.
	mustCall(t, tb, "local", "grow", `{}`)
	eventually(t, "the new tool is listed", func() bool { return slices.Contains(names(tb.List()), "local.extra") })
	if res := mustCall(t, tb, "local", "extra", `{}`); res.Text != "extra" {
		t.Errorf("Call extra = %+v", res)
	}

	// The process exits by itself: the toolbox notices without a call
	// failing, and starts another.
	mustCall(t, tb, "local", "exit_soon", `{}`)
	eventually(t, "the server is started again", func() bool { return connected() == 2 })
	if again := mustCall(t, tb, "local", "pid", `{}`).Text; again == pid {
		t.Errorf("pid %s after a restart, as before", again)
	}
}

func TestNotStarted(t *testing.T) {
	tb := New(context.Background(), Config{Servers: []ServerConfig{stdioServer("local")}}, Allow{}, nil, Options{})
	_, err := call(tb, "local", "add", `{}`)
	wantError(t, err, "tool server local is not connected: not connected yet; retrying")
	if err := tb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A result past the read limit that --tool-result-limit sets is refused as
// it is read, over every transport, and the server is called again after.
func TestResultPastTheReadLimit(t *testing.T) {
	h := newHTTPServer(t)
	sse := httptest.NewUnstartedServer(nil)
	sse.Config.Handler = server.NewSSEServer(newTestServer(nil, nil), server.WithBaseURL("http://"+sse.Listener.Addr().String()))
	sse.Start()
	t.Cleanup(sse.Close)
	opts := testOptions()
	opts.ResultLimit = 1000
	tb, _ := newToolbox(t, []ServerConfig{
		{Name: "web", Transport: StreamableHTTP, URL: h.url()},
		{Name: "old", Transport: SSE, URL: sse.URL + "/sse"},
		stdioServer("local"),
	}, "", opts)
	big := fmt.Sprintf(`{"bytes": %d}`, 4*messageLimit(opts.ResultLimit))
	for _, name := range []string{"web", "old", "local"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := call(tb, name, "big", big)
			wantError(t, err, "the answer of "+name+".big was more than 1.0 MiB, the read limit that --tool-result-limit sets")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the call failed after %v: it waited for an answer that could not come", d)
			}
			if name == "web" {
				// One response of the session was refused, not the session.
				if res := mustCall(t, tb, name, "add", `{"a": 1, "b": 2}`); string(res.Structured) != `{"sum":3}` {
					t.Errorf("Call add = %s", res.Structured)
				}
			}
			eventually(t, "the server answers again", func() bool {
				res, err := call(tb, name, "add", `{"a": 1, "b": 2}`)
				return err == nil && string(res.Structured) == `{"sum":3}`
			})
			// Within the read limit, past the result limit: read, then refused.
			_, err = call(tb, name, "big", `{"bytes": 2000}`)
			wantError(t, err, "more than the tool result limit of 1000 B")
		})
	}
}

func TestBoundedReader(t *testing.T) {
	tests := []struct {
		name     string
		boundary boundary
		in       string
		wantErr  bool
	}{
		{"lines within", eachLine, "12345\n12345\n123", false},
		{"a line past", eachLine, "12345\n1234567890\n", true},
		{"events within, lines joined", eachEvent, "data: 1\n\ndata: 2\r\n\r\ndata: 3\n", false},
		{"an event of short lines past", eachEvent, "d: 1\nd: 2\nd: 3\n\n", true},
		{"a body within", wholeStream, "1\n2\n3\n4", false},
		{"a body of short lines past", wholeStream, "1\n2\n3\n4\n5\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &readGuard{limit: 9}
			got, err := io.ReadAll(g.reader(iotest.OneByteReader(strings.NewReader(tt.in)), tt.boundary))
			if (err != nil) != tt.wantErr || tt.wantErr && !errors.Is(err, errMessageTooBig) {
				t.Fatalf("read %q: %v, want an error: %v", got, err, tt.wantErr)
			}
			if !tt.wantErr && string(got) != tt.in {
				t.Errorf("read %q, want %q", got, tt.in)
			}
			if trips := g.trips.Load(); trips != map[bool]int64{false: 0, true: 1}[tt.wantErr] {
				t.Errorf("%d trips", trips)
			}
		})
	}
}
