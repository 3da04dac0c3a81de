package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"go.uber.org/zap"
)

// testTimeout bounds every wait in these tests, so that a lost message fails
// the test instead of hanging it.
const testTimeout = 30 * time.Second

// testContext returns a context that ends with the test or after testTimeout.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// fakeRunner is a runner that prints lines lines for each call and returns
// the code as a str. Line i of code is "<code> line <i>", on stderr when
// i%3 == 2 and on stdout otherwise.
type fakeRunner struct {
	lines   int
	version string
	runErr  error
	// block, when not nil, is called with the code at the start of every
	// Run; an error ends the Run.
	block func(ctx context.Context, code string) error
}

// Run implements runner.
func (f *fakeRunner) Run(ctx context.Context, code string, onLine func(supervisor.Line)) (supervisor.Result, error) {
	if f.block != nil {
		if err := f.block(ctx, code); err != nil {
			return supervisor.Result{}, err
		}
	}
	if f.runErr != nil {
		return supervisor.Result{}, f.runErr
	}
	res := supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: str(code), ReturnString: true}
	for i := range f.lines {
		line := fakeLine(code, i)
		if onLine != nil {
			onLine(line)
		}
		res.Output = append(res.Output, line.Text)
		runtime.Gosched() // let other calls interleave
	}
	return res, nil
}

// PythonVersion implements runner.
func (f *fakeRunner) PythonVersion() string {
	if f.version == "" {
		return "3.14"
	}
	return f.version
}

// fakeLine is line i printed by a call of code.
func fakeLine(code string, i int) supervisor.Line {
	stream := supervisor.Stdout
	if i%3 == 2 {
		stream = supervisor.Stderr
	}
	return supervisor.Line{Stream: stream, Text: fmt.Sprintf("%s line %d", code, i)}
}

// expectedLog returns the notifications a call of code with n lines must
// send at level (none when level is "").
func expectedLog(code string, n int, level mcp.LoggingLevel) []logEntry {
	var want []logEntry
	if level == "" {
		return want
	}
	for i := range n {
		line := fakeLine(code, i)
		if l := lineLevel(line); l.ShouldSendTo(level) {
			want = append(want, logEntry{Level: string(l), Data: line.Text})
		}
	}
	return want
}

// expectedXML is the XML result of a fakeRunner call.
func expectedXML(code string, n int) string {
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

// logEntry is a received notifications/message.
type logEntry struct {
	Level string
	Data  string
}

// collector records the log notifications a client receives, in order.
type collector struct {
	t  *testing.T
	mu sync.Mutex
	// entries are all notifications/message received.
	entries []logEntry
}

// handle is the client's notification handler. The client transports call it
// from their reading goroutine, in the order messages arrive, before a later
// response is handed to the caller.
func (c *collector) handle(n mcp.JSONRPCNotification) {
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
	c.entries = append(c.entries, logEntry{Level: level, Data: data})
}

// forCode returns the notifications received so far for calls of code.
func (c *collector) forCode(code string) []logEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var got []logEntry
	for _, e := range c.entries {
		if strings.HasPrefix(e.Data, code+" line ") {
			got = append(got, e)
		}
	}
	return got
}

// all returns every notification received so far.
func (c *collector) all() []logEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]logEntry(nil), c.entries...)
}

// era is the protocol generation a test client speaks.
type era string

const (
	legacy era = "legacy" // initialize handshake, logging/setLevel
	modern era = "modern" // 2026-07-28: no handshake, level in _meta
)

// testClient is a connected, initialized client and what it received.
type testClient struct {
	*client.Client
	log *collector
}

// connectFunc connects a new client to a server under test.
type connectFunc func(t *testing.T, e era) *testClient

// newTestClient starts c, registers the collector and initializes.
func newTestClient(t *testing.T, tr transport.Interface, e era) *testClient {
	t.Helper()
	var opts []client.ClientOption
	if e == legacy {
		opts = append(opts, client.WithLegacyProtocolOnly())
	}
	c := client.NewClient(tr, opts...)
	tc := &testClient{Client: c, log: &collector{t: t}}
	c.OnNotification(tc.log.handle)
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if isModern := mcp.IsModernProtocol(c.ProtocolVersion()); isModern != (e == modern) {
		t.Fatalf("negotiated protocol %s, want a %s one", c.ProtocolVersion(), e)
	}
	if res.ServerInfo.Name != serverName {
		t.Fatalf("server name %q", res.ServerInfo.Name)
	}
	return tc
}

// setLevel sets the client's log level.
func (c *testClient) setLevel(t *testing.T, level mcp.LoggingLevel) {
	t.Helper()
	if err := c.SetLevel(testContext(t), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: level}}); err != nil {
		t.Fatalf("set level %s: %v", level, err)
	}
}

// call calls run_python_code with code and returns the result's text.
func (c *testClient) call(ctx context.Context, arguments any) (string, bool, error) {
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: arguments}})
	if err != nil {
		return "", false, err
	}
	if len(res.Content) != 1 {
		return "", res.IsError, fmt.Errorf("%d content blocks, want 1", len(res.Content))
	}
	text, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		return "", res.IsError, fmt.Errorf("content is %T, want text", res.Content[0])
	}
	return text.Text, res.IsError, nil
}

// testOptions returns serverOptions around r, in XML mode.
func testOptions(t *testing.T, r runner) serverOptions {
	t.Helper()
	return serverOptions{
		Version: "1.2.3-test", Runner: r, ReturnMode: ReturnXML, Log: zap.NewNop(),
		Calls: newCallGate(testTimeout, testTimeout),
	}
}

// stdioServer serves r over in-memory pipes and returns a connect function.
// The stdio transport has one client; connect may be called once.
func stdioServer(t *testing.T, r runner, workers int) connectFunc {
	t.Helper()
	return stdioServerWith(t, testOptions(t, r), workers)
}

// stdioServerWith is stdioServer with the options o.
func stdioServerWith(t *testing.T, o serverOptions, workers int) connectFunc {
	t.Helper()
	return func(t *testing.T, e era) *testClient {
		t.Helper()
		clientIn, serverOut := io.Pipe()
		serverIn, clientOut := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serveStdio(ctx, o, workers, serverIn, serverOut) }()
		t.Cleanup(func() {
			// End the server's input, and fail its writes rather than let
			// them wait for a client that stopped reading.
			cancel()
			_ = clientOut.Close()
			_ = clientIn.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serveStdio: %v", err)
				}
			case <-time.After(testTimeout):
				t.Errorf("serveStdio did not stop")
			}
		})
		return newTestClient(t, transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))), e)
	}
}

// httpServer serves mode with r on an httptest server and returns a connect
// function and the server's URL.
func httpServer(t *testing.T, mode Mode, r runner, opts ...transport.StreamableHTTPCOption) (connectFunc, string) {
	t.Helper()
	fe, err := newHTTPFrontEnd(mode, testOptions(t, r))
	if err != nil {
		t.Fatalf("front end: %v", err)
	}
	ts := httptest.NewServer(fe.handler)
	t.Cleanup(func() {
		fe.closeSessions(context.Background())
		ts.Close()
	})
	return func(t *testing.T, e era) *testClient {
		t.Helper()
		var tr transport.Interface
		if mode == ModeSSE {
			tr, err = transport.NewSSE(ts.URL + sseStreamPath)
		} else {
			tr, err = transport.NewStreamableHTTP(ts.URL+streamablePath, opts...)
		}
		if err != nil {
			t.Fatalf("client transport: %v", err)
		}
		return newTestClient(t, tr, e)
	}, ts.URL
}

// blockCode is the code that a blocker holds.
const blockCode = "block"

// blocked is what a blocker saw of a held call's end.
type blocked struct {
	cause error     // context.Cause of the call's context when it was cancelled
	at    time.Time // when
}

// blocker is a fakeRunner.block that holds calls of blockCode until their
// context ends or release is closed, and records which came first. Other
// code runs at once.
type blocker struct {
	started   chan struct{} // a held call started
	cancelled chan blocked  // a held call's context ended
	released  chan error    // a released call's context error (nil: intact)
	release   chan struct{}
}

// newBlocker returns a blocker with room for 16 calls.
func newBlocker() *blocker {
	return &blocker{
		started:   make(chan struct{}, 16),
		cancelled: make(chan blocked, 16),
		released:  make(chan error, 16),
		release:   make(chan struct{}),
	}
}

// block implements fakeRunner.block.
func (b *blocker) block(ctx context.Context, code string) error {
	if code != blockCode {
		return nil
	}
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.cancelled <- blocked{cause: context.Cause(ctx), at: time.Now()}
		return fmt.Errorf("run: %w", ctx.Err())
	case <-b.release:
		b.released <- ctx.Err()
		return nil
	}
}

// waitStarted waits for a held call to start.
func (b *blocker) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-testContext(t).Done():
		t.Fatal("the call did not start")
	}
}

// waitCancelled waits for a held call's context to end.
func (b *blocker) waitCancelled(t *testing.T) blocked {
	t.Helper()
	select {
	case c := <-b.cancelled:
		return c
	case err := <-b.released:
		t.Fatalf("the call was released (context error %v), not cancelled", err)
	case <-testContext(t).Done():
		t.Fatal("the call's context was not cancelled")
	}
	return blocked{}
}

// callResult is the outcome of a call made in the background.
type callResult struct {
	text    string
	isError bool
	err     error
}

// callAsync calls run_python_code with code in the background.
func (c *testClient) callAsync(ctx context.Context, code string) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		text, isError, err := c.call(ctx, map[string]any{codeArgument: code})
		done <- callResult{text, isError, err}
	}()
	return done
}

// wait returns the outcome of a call made with callAsync.
func wait(t *testing.T, result <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-result:
		return r
	case <-testContext(t).Done():
		t.Fatal("no result")
		return callResult{}
	}
}
