// Package mcptest helps test the MCP front end: a fake runner, MCP clients
// that record the log notifications they get, and a call that the test
// holds. Only tests import it; it imports none of the front end's packages,
// so that each of them can use it in its own tests.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// The MCP surface the tests drive, as DESIGN 1.2 has it: written out here
// rather than taken from the server, so that the tests check it.
const (
	ServerName   = "MCP Run Python"
	ToolName     = "run_python_code"
	CodeArgument = "python_code"
)

// Timeout bounds every wait in the tests, so that a lost message fails the
// test instead of hanging it.
const Timeout = 30 * time.Second

// Context returns a context that ends with the test or after Timeout.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// FakeRunner is a runner that prints Lines lines for each call and returns
// the code as a str. Line i of code is "<code> line <i>", on stderr when
// i%3 == 2 and on stdout otherwise.
type FakeRunner struct {
	Lines   int
	Version string // "" for 3.14
	RunErr  error
	// Block, when not nil, is called with the code at the start of every
	// Run; an error ends the Run.
	Block func(ctx context.Context, code string) error
}

// Run runs code as the type's comment says.
func (f *FakeRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	code, onLine := req.Code, req.OnLine
	if f.Block != nil {
		if err := f.Block(ctx, code); err != nil {
			return supervisor.Result{}, err
		}
	}
	if f.RunErr != nil {
		return supervisor.Result{}, f.RunErr
	}
	value, err := json.Marshal(code) // a Python str, as the worker sends it
	if err != nil {
		return supervisor.Result{}, fmt.Errorf("encode the return value: %w", err)
	}
	res := supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: value, ReturnString: true}
	for i := range f.Lines {
		line := fakeLine(code, i)
		if onLine != nil {
			onLine(line)
		}
		res.Output = append(res.Output, line.Text)
		runtime.Gosched() // let other calls interleave
	}
	return res, nil
}

// PythonVersion returns f.Version, or 3.14.
func (f *FakeRunner) PythonVersion() string {
	if f.Version == "" {
		return "3.14"
	}
	return f.Version
}

// fakeLine is line i printed by a call of code.
func fakeLine(code string, i int) supervisor.Line {
	stream := supervisor.Stdout
	if i%3 == 2 {
		stream = supervisor.Stderr
	}
	return supervisor.Line{Stream: stream, Text: fmt.Sprintf("%s line %d", code, i)}
}

// ExpectedLog returns the notifications a FakeRunner call of code with n
// lines must send at level (none when level is ""): stdout lines are info,
// stderr lines warning (DESIGN 1.5).
func ExpectedLog(code string, n int, level mcp.LoggingLevel) []LogEntry {
	var want []LogEntry
	if level == "" {
		return want
	}
	for i := range n {
		line := fakeLine(code, i)
		l := mcp.LoggingLevelInfo
		if line.Stream == supervisor.Stderr {
			l = mcp.LoggingLevelWarning
		}
		if l.ShouldSendTo(level) {
			want = append(want, LogEntry{Level: string(l), Data: line.Text})
		}
	}
	return want
}

// ExpectedXML is the XML result of a FakeRunner call of code with n lines.
func ExpectedXML(code string, n int) string {
	var out []string
	for i := range n {
		out = append(out, fakeLine(code, i).Text)
	}
	s := "<status>success</status>\n"
	if n > 0 {
		s += "<output>\n" + strings.Join(out, "\n") + "\n</output>\n"
	}
	return s + "<return_value>\n" + code + "\n</return_value>"
}

// LogEntry is a received notifications/message.
type LogEntry struct {
	Level string
	Data  string
}

// Collector records the log notifications a client receives, in order.
type Collector struct {
	t  testing.TB
	mu sync.Mutex
	// entries are all notifications/message received.
	entries []LogEntry
}

// handle is the client's notification handler. The client transports call it
// from their reading goroutine, in the order messages arrive, before a later
// response is handed to the caller.
func (c *Collector) handle(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationMessage) {
		return
	}
	fields := n.Params.AdditionalFields
	if _, ok := fields["logger"]; ok {
		c.t.Errorf("notification has a logger field; upstream sends {level, data} only: %v", fields)
	}
	level, _ := fields["level"].(string)
	data, _ := fields["data"].(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, LogEntry{Level: level, Data: data})
}

// ForCode returns the notifications received so far for calls of code.
func (c *Collector) ForCode(code string) []LogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var got []LogEntry
	for _, e := range c.entries {
		if strings.HasPrefix(e.Data, code+" line ") {
			got = append(got, e)
		}
	}
	return got
}

// All returns every notification received so far.
func (c *Collector) All() []LogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LogEntry(nil), c.entries...)
}

// Era is the protocol generation a test client speaks.
type Era string

// The eras of the MCP protocol the server serves.
const (
	Legacy Era = "legacy" // initialize handshake, logging/setLevel
	Modern Era = "modern" // 2026-07-28: no handshake, level in _meta
)

// Client is a connected, initialized client and what it received.
type Client struct {
	*client.Client
	Log *Collector
}

// ConnectFunc connects a new client to a server under test.
type ConnectFunc func(t *testing.T, e Era) *Client

// NewClient starts a client on tr with opts (such as its sampling and
// elicitation handlers), registers the collector and initializes.
func NewClient(t testing.TB, tr transport.Interface, e Era, opts ...client.ClientOption) *Client {
	t.Helper()
	if e == Legacy {
		opts = append(opts, client.WithLegacyProtocolOnly())
	}
	c := client.NewClient(tr, opts...)
	tc := &Client{Client: c, Log: &Collector{t: t}}
	c.OnNotification(tc.Log.handle)
	ctx := Context(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if isModern := mcp.IsModernProtocol(c.ProtocolVersion()); isModern != (e == Modern) {
		t.Fatalf("negotiated protocol %s, want a %s one", c.ProtocolVersion(), e)
	}
	if res.ServerInfo.Name != ServerName {
		t.Fatalf("server name %q", res.ServerInfo.Name)
	}
	return tc
}

// SetLogLevel sets the client's log level, failing the test if it cannot.
func (c *Client) SetLogLevel(t *testing.T, level mcp.LoggingLevel) {
	t.Helper()
	if err := c.Client.SetLevel(Context(t), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: level}}); err != nil {
		t.Fatalf("set level %s: %v", level, err)
	}
}

// Call calls run_python_code with arguments and returns the result's text.
func (c *Client) Call(ctx context.Context, arguments any) (string, bool, error) {
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: ToolName, Arguments: arguments}})
	if err != nil {
		return "", false, err
	}
	text, err := Text(res)
	return text, res.IsError, err
}

// Text returns the text of a run_python_code result: its one content block.
func Text(res *mcp.CallToolResult) (string, error) {
	if len(res.Content) != 1 {
		return "", fmt.Errorf("%d content blocks, want 1", len(res.Content))
	}
	text, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("content is %T, want text", res.Content[0])
	}
	return text.Text, nil
}

// CallResult is the outcome of a call made in the background.
type CallResult struct {
	Text    string
	IsError bool
	Err     error
}

// CallAsync calls run_python_code with code in the background.
func (c *Client) CallAsync(ctx context.Context, code string) <-chan CallResult {
	done := make(chan CallResult, 1)
	go func() {
		text, isError, err := c.Call(ctx, map[string]any{CodeArgument: code})
		done <- CallResult{text, isError, err}
	}()
	return done
}

// Wait returns the outcome of a call made with CallAsync.
func Wait(t *testing.T, result <-chan CallResult) CallResult {
	t.Helper()
	select {
	case r := <-result:
		return r
	case <-Context(t).Done():
		t.Fatal("no result")
		return CallResult{}
	}
}

// FakeHealth is a pool's state as a test sets it, reported as the
// supervisor's Health reports it; safe while a server reads it.
type FakeHealth struct {
	mu sync.Mutex
	h  supervisor.Health
}

// Health returns the state last set.
func (f *FakeHealth) Health() supervisor.Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h
}

// SetHealth sets what Health returns.
func (f *FakeHealth) SetHealth(h supervisor.Health) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h = h
}
