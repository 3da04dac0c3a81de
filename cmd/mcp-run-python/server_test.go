package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// rawStdio serves r over pipes and exchanges raw JSON-RPC lines with it.
type rawStdio struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

// newRawStdio starts a stdio server around r.
func newRawStdio(t *testing.T, r runner) *rawStdio {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveStdio(ctx, testOptions(t, r), 2, serverIn, serverOut) }()
	t.Cleanup(func() {
		cancel()
		_ = clientOut.Close()
		_ = clientIn.Close()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Errorf("serveStdio did not stop")
		}
	})
	return &rawStdio{t: t, in: clientOut, out: bufio.NewReader(clientIn)}
}

// send writes one message.
func (s *rawStdio) send(msg string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// recv reads one message line, without its newline.
func (s *rawStdio) recv() string {
	s.t.Helper()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := s.out.ReadString('\n')
		got <- result{line, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			s.t.Fatalf("recv: %v", r.err)
		}
		return strings.TrimSuffix(r.line, "\n")
	case <-time.After(testTimeout):
		s.t.Fatal("recv: timed out")
		return ""
	}
}

// TestInitialize checks the MCP surface of DESIGN 1.2 on the wire: server
// info, instructions and capabilities. TestToolsnaps checks the tool.
func TestInitialize(t *testing.T) {
	s := newRawStdio(t, &fakeRunner{})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	var init struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string                     `json:"protocolVersion"`
			ServerInfo      map[string]any             `json:"serverInfo"`
			Instructions    string                     `json:"instructions"`
			Capabilities    map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(s.recv()), &init); err != nil {
		t.Fatalf("decode initialize result: %v", err)
	}
	if init.ID != 1 || init.Result.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize answered id %d with protocol %q", init.ID, init.Result.ProtocolVersion)
	}
	if name, version := init.Result.ServerInfo["name"], init.Result.ServerInfo["version"]; name != "MCP Run Python" || version != "1.2.3-test" {
		t.Errorf("serverInfo = %v", init.Result.ServerInfo)
	}
	if want := `Call the "run_python_code" tool with the Python code to run.`; init.Result.Instructions != want {
		t.Errorf("instructions = %q, want %q", init.Result.Instructions, want)
	}
	for _, capability := range []string{"tools", "logging"} {
		if _, ok := init.Result.Capabilities[capability]; !ok {
			t.Errorf("capability %q missing from %v", capability, init.Result.Capabilities)
		}
	}
}

// TestBadArguments checks that a call without python_code, or with one of
// the wrong type, gets a tool error and that the server keeps serving.
func TestBadArguments(t *testing.T) {
	c := stdioServer(t, &fakeRunner{lines: 1}, 2)(t, legacy)
	ctx := testContext(t)
	tests := []struct {
		name      string
		arguments any
		mention   string
	}{
		{"no arguments", nil, `missing required argument "python_code"`},
		{"other argument", map[string]any{"code": "1"}, `missing required argument "python_code"`},
		{"number", map[string]any{codeArgument: 5}, `invalid argument "python_code": expected a string, got number`},
		{"null", map[string]any{codeArgument: nil}, "expected a string, got null"},
		{"list", map[string]any{codeArgument: []string{"print(1)"}}, "expected a string, got array"},
		{"object", map[string]any{codeArgument: map[string]any{}}, "expected a string, got object"},
		{"arguments not an object", "print(1)", "invalid arguments: expected an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, isError, err := c.call(ctx, tt.arguments)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !isError || !strings.Contains(text, tt.mention) {
				t.Errorf("got isError %v %q, want a tool error mentioning %q", isError, text, tt.mention)
			}
		})
	}
	text, isError, err := c.call(ctx, map[string]any{codeArgument: "after", "extra": true})
	if err != nil || isError || text != expectedXML("after", 1) {
		t.Errorf("good call after bad ones: err %v, isError %v, %q", err, isError, text)
	}
}

// TestRunErrorIsToolError checks that a call the runner cannot run gets a
// tool error with the runner's message.
func TestRunErrorIsToolError(t *testing.T) {
	c := stdioServer(t, &fakeRunner{runErr: errors.New("no worker could be started: deno not found")}, 2)(t, legacy)
	text, isError, err := c.call(testContext(t), map[string]any{codeArgument: "1"})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if !isError || text != "no worker could be started: deno not found" {
		t.Errorf("got isError %v %q", isError, text)
	}
}

// errorRunner fails the calls of the codes in errs and runs the others as
// fakeRunner does; it records the codes it was given.
type errorRunner struct {
	fakeRunner
	errs map[string]error

	mu    sync.Mutex
	codes []string
}

func (r *errorRunner) Run(ctx context.Context, code string, onLine func(supervisor.Line)) (supervisor.Result, error) {
	r.mu.Lock()
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	if err := r.errs[code]; err != nil {
		return supervisor.Result{}, err
	}
	return r.fakeRunner.Run(ctx, code, onLine)
}

// ran returns the codes run so far.
func (r *errorRunner) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.codes...)
}

// TestPoolErrorsAreToolErrors checks that calls the pool cannot take get a
// tool error that says to try again, and that the server keeps serving.
func TestPoolErrorsAreToolErrors(t *testing.T) {
	r := &errorRunner{fakeRunner: fakeRunner{lines: 1}, errs: map[string]error{
		"full":    fmt.Errorf("get a worker: %w", supervisor.ErrQueueFull),
		"waited":  fmt.Errorf("get a worker: %w", supervisor.ErrQueueTimeout),
		"no deno": errors.New("prepare the runtime: deno not found"),
	}}
	c := stdioServer(t, r, 2)(t, legacy)
	ctx := testContext(t)
	tests := []struct {
		code string
		want string
	}{
		{"full", "the server is busy: get a worker: all workers are busy and the queue of waiting calls is full; try again later"},
		{"waited", "the server is busy: get a worker: no worker became free within the queue timeout; try again later"},
		{"no deno", "prepare the runtime: deno not found"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			text, isError, err := c.call(ctx, map[string]any{codeArgument: tt.code})
			if err != nil || !isError || text != tt.want {
				t.Errorf("got err %v, isError %v, %q; want the tool error %q", err, isError, text, tt.want)
			}
			text, isError, err = c.call(ctx, map[string]any{codeArgument: "next"})
			if err != nil || isError || text != expectedXML("next", 1) {
				t.Errorf("call after the error: err %v, isError %v, %q", err, isError, text)
			}
		})
	}
}

// jsonModeRunner returns a fixed result.
type jsonModeRunner struct {
	fakeRunner
	res supervisor.Result
}

func (r *jsonModeRunner) Run(context.Context, string, func(supervisor.Line)) (supervisor.Result, error) {
	return r.res, nil
}

// TestReturnModeJSON checks that --return-mode json reaches the tool result.
func TestReturnModeJSON(t *testing.T) {
	tests := []struct {
		name    string
		res     supervisor.Result
		want    string
		isError bool
	}{
		{"success", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"<b>"}, ReturnValue: raw("{\n  \"x\": 1.0\n}")},
			`{"status":"success","output":["<b>"],"return_value":{"x":1}}`, false},
		{"invalid return value", supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: raw("{")},
			"render return value: invalid JSON", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, &jsonModeRunner{res: tt.res})
			o.ReturnMode = ReturnJSON
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			clientIn, serverOut := io.Pipe()
			serverIn, clientOut := io.Pipe()
			t.Cleanup(func() { _ = clientOut.Close(); _ = clientIn.Close() })
			go func() { _ = serveStdio(ctx, o, 2, serverIn, serverOut) }()
			s := &rawStdio{t: t, in: clientOut, out: bufio.NewReader(clientIn)}
			s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
			s.recv()
			s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"x"}}}`)
			var resp struct {
				Result struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(s.recv()), &resp); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(resp.Result.Content) != 1 || resp.Result.Content[0].Type != "text" {
				t.Fatalf("content %+v", resp.Result.Content)
			}
			// A tool error is checked by its start; the rest is encoding/json's.
			got := resp.Result.Content[0].Text
			if (tt.isError && !strings.HasPrefix(got, tt.want)) || (!tt.isError && got != tt.want) || resp.Result.IsError != tt.isError {
				t.Errorf("got isError %v %q, want isError %v %q", resp.Result.IsError, got, tt.isError, tt.want)
			}
		})
	}
}

func TestPythonCode(t *testing.T) {
	code, err := pythonCode(map[string]any{codeArgument: "print(1)", "other": 1})
	if err != nil || code != "print(1)" {
		t.Errorf("pythonCode = %q, %v", code, err)
	}
	if code, err := pythonCode(map[string]any{codeArgument: ""}); err != nil || code != "" {
		t.Errorf("empty code must be accepted, got %q, %v", code, err)
	}
}

func TestLogNotificationBytes(t *testing.T) {
	got := string(logNotification("warning", "a \"<b>\" & \u2028 \x01"))
	want := "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"warning\",\"data\":\"a \\\"<b>\\\" & \u2028 \\u0001\"}}"
	if got != want {
		t.Errorf("logNotification = %s, want %s", got, want)
	}
}

func TestLineLevel(t *testing.T) {
	for stream, want := range map[supervisor.Stream]mcp.LoggingLevel{
		supervisor.Stdout:   mcp.LoggingLevelInfo,
		supervisor.Stderr:   mcp.LoggingLevelWarning,
		supervisor.Progress: mcp.LoggingLevelDebug,
		supervisor.Failure:  mcp.LoggingLevelError,
	} {
		if got := lineLevel(supervisor.Line{Stream: stream, Text: "x"}); got != want {
			t.Errorf("lineLevel(%s) = %s, want %s", stream, got, want)
		}
	}
}

// queueFullSender fails with mcp-go's queue-full error a number of times.
type queueFullSender struct {
	full int
	sent []any
}

func (s *queueFullSender) SendEventToSession(_ string, event any) error {
	if s.full > 0 {
		s.full--
		return errors.New("event queue full")
	}
	s.sent = append(s.sent, event)
	return nil
}

func TestSSENotifierWaitsForRoom(t *testing.T) {
	s := &queueFullSender{full: 3}
	n := sseNotifier{events: s, sessionID: "x"}
	if err := n.notify(testContext(t), []byte(`{"a":1}`)); err != nil {
		t.Fatalf("notify: %v", err)
	}
	if len(s.sent) != 1 || s.full != 0 {
		t.Errorf("sent %v after %d refusals left", s.sent, s.full)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (sseNotifier{events: &queueFullSender{full: 1 << 30}}).notify(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("notify on a full queue after cancel = %v, want context.Canceled", err)
	}
	if err := (sseNotifier{events: failingSender{}}).notify(testContext(t), []byte(`{}`)); err == nil {
		t.Errorf("notify to a gone session must fail")
	}
}

// failingSender reports a session that is gone.
type failingSender struct{}

func (failingSender) SendEventToSession(string, any) error { return errors.New("session not found: x") }

// TestSSEQueueFullMessage pins the text of mcp-go's error for a full SSE
// event queue, which sseNotifier waits on: a client that stops reading
// fills the socket buffers and then the queue.
func TestSSEQueueFullMessage(t *testing.T) {
	fe := newSSEFrontEnd(testOptions(t, &fakeRunner{}))
	ts := httptest.NewServer(fe.handler)
	t.Cleanup(func() {
		fe.closeSessions(context.Background())
		ts.Close()
	})
	ctx := testContext(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+sseStreamPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	var sessionID string
	for sessionID == "" {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("read endpoint event: %v", err)
		}
		if _, after, ok := strings.Cut(line, "sessionId="); ok {
			sessionID = strings.TrimSpace(after)
		}
	}
	// From here on the client reads nothing.
	handler, ok := fe.handler.(*sseHandler)
	if !ok {
		t.Fatalf("SSE handler is %T, not an *sseHandler", fe.handler)
	}
	var sender eventSender = handler.sse
	event := json.RawMessage(`"` + strings.Repeat("x", 256<<10) + `"`)
	for i := range 4000 {
		err := sender.SendEventToSession(sessionID, event)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "queue full") {
			t.Fatalf("event %d: error %q does not say the queue is full", i, err)
		}
		return
	}
	t.Fatal("the event queue never filled")
}

// TestInProcessClientGetsNotifications covers fallbackNotifier: a transport
// that installs no notifier (mcp-go's in-process one) still gets the
// notifications, through mcp-go's channel.
func TestInProcessClientGetsNotifications(t *testing.T) {
	const lines = 4
	mcpServer := newMCPServer(testOptions(t, &fakeRunner{lines: lines}), newLevelStore(true), &server.Hooks{})
	want := expectedLog("inproc", lines, mcp.LoggingLevelDebug)
	got := make(chan logEntry, len(want))
	c := client.NewClient(transport.NewInProcessTransport(mcpServer), client.WithLegacyProtocolOnly())
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationMessage) {
			level, _ := n.Params.AdditionalFields["level"].(string)
			data, _ := n.Params.AdditionalFields["data"].(string)
			got <- logEntry{Level: level, Data: data}
		}
	})
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatalf("set level: %v", err)
	}
	if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{codeArgument: "inproc"}}}); err != nil {
		t.Fatalf("call: %v", err)
	}
	// This path does not order notifications before the result: wait.
	for i, w := range want {
		select {
		case e := <-got:
			if e != w {
				t.Errorf("notification %d = %v, want %v", i, e, w)
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d notifications", i, len(want))
		}
	}
}
