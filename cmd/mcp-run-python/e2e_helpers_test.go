package main_test

// Helpers of the end-to-end tests (e2e_test.go): they build the real binary,
// start it in each of its server modes and drive it with mcp-go's client.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/supervisor/denotest"
)

var (
	update     = flag.Bool("update", false, "rewrite the golden files under testdata/e2e and testdata/toolsnaps")
	orderCalls = flag.Int("e2e.order-calls", 24, "calls per transport of the logging order test (each call boots a fresh worker: about 0.6 CPU-seconds)")
)

// quietLog drops the client transports' own log (such as "listening to
// server forever"), which would only clutter the test output.
var quietLog = slog.New(slog.DiscardHandler)

const (
	// e2eProtocol is the protocol version every test client pins: a 2025
	// one, with the initialize handshake and logging/setLevel.
	e2eProtocol = "2025-06-18"
	// modernProtocol is used where a 2025 client cannot show anything: in
	// stateless mode only per-request log levels reach the server.
	modernProtocol = "2026-07-28"
	// goldenDir holds the expected results too long to keep inline.
	goldenDir = "../../testdata/e2e"

	// Bounds on waits, so that a lost message fails a test instead of
	// hanging it. They are generous: two cores run four servers at once.
	callTimeout   = 2 * time.Minute
	startTimeout  = 30 * time.Second
	stopTimeout   = 20 * time.Second
	warmupTimeout = 5 * time.Minute

	// What the server announces (DESIGN 1.2).
	wantServerName   = "MCP Run Python"
	wantInstructions = `Call the "run_python_code" tool with the Python code to run.`
	toolName         = "run_python_code"
)

// Server modes under test; every case runs over each.
const (
	modeStdio     = "stdio"
	modeSSE       = "sse"
	modeStateful  = "streamable_http"
	modeStateless = "streamable_http_stateless"
)

var allModes = []string{modeStdio, modeSSE, modeStateful, modeStateless}

// e2eSetup is what every end-to-end test needs; it is prepared once per run.
type e2eSetup struct {
	bin      string // the binary built from this package
	deno     string
	cacheDir string // shared by all servers, so Pyodide is installed once
	tempRoot string // removed by TestMain
}

var (
	setupOnce   sync.Once
	sharedSetup *e2eSetup
	setupErr    error
	tempRoot    string // for TestMain's cleanup
)

func TestMain(m *testing.M) {
	if os.Getenv(toolServerRole) != "" {
		serveToolServer()
	}
	code := m.Run()
	printFigures()
	if tempRoot != "" {
		_ = os.RemoveAll(tempRoot)
	}
	os.Exit(code)
}

// setup builds the binary, finds deno and warms the shared cache up, once.
// Any failure fails the test: the end-to-end tests are never skipped.
func setup(t *testing.T) *e2eSetup {
	t.Helper()
	if testing.Short() {
		t.Skip("end to end, with deno and Pyodide: not with -short")
	}
	setupOnce.Do(func() { sharedSetup, setupErr = prepare() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return sharedSetup
}

func prepare() (*e2eSetup, error) {
	deno, err := denotest.Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mcp-run-python-e2e-")
	if err != nil {
		return nil, err
	}
	tempRoot = dir
	bin := filepath.Join(dir, "mcp-run-python")
	if runtime.GOOS == "windows" {
		bin += ".exe" // go build -o writes the name given; exec finds only a .exe
	}
	s := &e2eSetup{bin: bin, deno: deno, tempRoot: dir}

	start := time.Now()
	build := exec.Command("go", "build", "-o", s.bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	buildTime := time.Since(start)

	if s.cacheDir, err = denotest.CacheDir(); err != nil {
		return nil, err
	}

	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), warmupTimeout)
	defer cancel()
	warmup := exec.CommandContext(ctx, s.bin, append(s.baseArgs(), "warmup")...)
	warmup.Env = serverEnv()
	var stderr bytes.Buffer
	warmup.Stdout = &stderr
	warmup.Stderr = &stderr
	if err := warmup.Run(); err != nil {
		return nil, fmt.Errorf("%s warmup failed: %v\n%s", s.bin, err, stderr.String())
	}
	fmt.Fprintf(os.Stderr, "e2e: built the binary in %v, warmup in %v (cache %s, deno %s)\n",
		buildTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), s.cacheDir, s.deno)
	return s, nil
}

// baseArgs are the flags every server gets: where deno and the cache are.
func (s *e2eSetup) baseArgs() []string {
	return []string{"--deno", s.deno, "--cache-dir", s.cacheDir}
}

// serverEnv is the test's environment without MCP_RUN_PYTHON_* variables, so
// that only the flags the tests pass configure the servers.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_RUN_PYTHON_") {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer collects a process's stderr for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// launch says how to start a server process.
type launch struct {
	args []string // flags, before the mode
	env  []string // nil: serverEnv()
	dir  string   // working directory; "" for the test's
	// stdio only: the server's stderr, instead of a pipe the client drains.
	stderr *os.File
}

// target is one server under test: an HTTP server process, or for stdio a
// recipe, since every stdio client starts its own process.
type target struct {
	setup  *e2eSetup
	mode   string
	launch launch

	// HTTP modes only.
	url     string            // http://127.0.0.1:PORT
	headers map[string]string // sent with every request of its clients (see as)
	client  *http.Client      // of its clients; nil for the default
	cmd     *exec.Cmd
	stderr  *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // how it exited, once done is closed
}

// startTarget starts a server in mode with the extra flags; the test's
// cleanup stops it and checks that it exits with status 0.
func startTarget(t testing.TB, s *e2eSetup, mode string, extra ...string) *target {
	t.Helper()
	return startTargetWith(t, s, mode, launch{args: append(s.baseArgs(), extra...)})
}

// startTargetWith is startTarget with full control over the launch.
func startTargetWith(t testing.TB, s *e2eSetup, mode string, l launch) *target {
	t.Helper()
	tg := &target{setup: s, mode: mode, launch: l}
	if mode == modeStdio {
		return tg
	}
	port := freePort(t)
	args := append(append([]string{}, l.args...), "--host", "127.0.0.1", "--port", strconv.Itoa(port), mode)
	tg.cmd = exec.Command(s.bin, args...)
	tg.cmd.Env = l.env
	if tg.cmd.Env == nil {
		tg.cmd.Env = serverEnv()
	}
	tg.cmd.Dir = l.dir
	ownProcessGroup(tg.cmd)
	tg.stderr = &syncBuffer{}
	tg.cmd.Stderr = tg.stderr
	if err := tg.cmd.Start(); err != nil {
		t.Fatalf("start %s server: %v", mode, err)
	}
	tg.done = make(chan struct{})
	go func() {
		tg.waitErr = tg.cmd.Wait()
		close(tg.done)
	}()
	t.Cleanup(func() {
		select {
		case <-tg.done:
		default:
			_ = stopServer(tg.cmd.Process)
		}
		select {
		case <-tg.done:
			if tg.waitErr != nil {
				t.Errorf("%s server: after SIGTERM: %v, want exit status 0; stderr:\n%s", mode, tg.waitErr, tg.stderr)
			}
		case <-time.After(stopTimeout):
			_ = tg.cmd.Process.Kill()
			t.Errorf("%s server did not stop within %v of SIGTERM; stderr:\n%s", mode, stopTimeout, tg.stderr)
		}
	})
	tg.url = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitForPort(t, tg)
	return tg
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitForPort polls until the server accepts connections.
func waitForPort(t testing.TB, tg *target) {
	t.Helper()
	addr := strings.TrimPrefix(tg.url, "http://")
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		select {
		case <-tg.done:
			t.Fatalf("%s server exited before listening: %v; stderr:\n%s", tg.mode, tg.waitErr, tg.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s server does not accept connections on %s after %v; stderr:\n%s", tg.mode, addr, startTimeout, tg.stderr)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling for the port
	}
}

// logMessage is one notifications/message a client received.
type logMessage struct {
	Level mcp.LoggingLevel
	Data  string
}

// e2eClient is a connected, initialized client of a target.
type e2eClient struct {
	*client.Client
	target *target
	pid    int // of the server process
	// stderr is the server's stderr; for the HTTP modes, the target's.
	stderr *syncBuffer
	init   *mcp.InitializeResult
	// initTime is from starting the transport (for stdio: the process) to
	// the initialize result.
	initTime time.Duration

	mu     sync.Mutex
	logs   []logMessage
	others []string // methods of other notifications
	onLog  func(logMessage)
}

// connect starts a client of tg (for stdio, a new server process) and
// initializes it with protocol e2eProtocol. The test's cleanup closes it; for
// stdio it checks that the server exits with status 0.
func (tg *target) connect(t testing.TB) *e2eClient {
	t.Helper()
	return tg.connectProtocol(t, e2eProtocol)
}

// connectProtocol is connect with the given protocol version, and the
// client's options opts (its sampling and elicitation handlers); with
// modernProtocol there is no handshake and the log level travels in each
// request's _meta.
func (tg *target) connectProtocol(t testing.TB, protocol string, opts ...client.ClientOption) *e2eClient {
	t.Helper()
	c := &e2eClient{target: tg}
	var tr transport.Interface
	var stdioCmd *exec.Cmd
	var stdioStderr *syncBuffer
	switch tg.mode {
	case modeStdio:
		stdioStderr = &syncBuffer{}
		args := append(append([]string{}, tg.launch.args...), modeStdio)
		tr = transport.NewStdioWithOptions(tg.setup.bin, nil, args,
			transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
				cmd := exec.CommandContext(ctx, command, args...)
				cmd.Env = tg.launch.env
				if cmd.Env == nil {
					cmd.Env = serverEnv()
				}
				cmd.Dir = tg.launch.dir
				ownProcessGroup(cmd)
				if tg.launch.stderr != nil {
					cmd.Stderr = tg.launch.stderr
				}
				stdioCmd = cmd
				return cmd, nil
			}),
			transport.WithCommandStderrWriter(stdioStderr),
			transport.WithCommandLogger(quietLog),
		)
	case modeSSE:
		opts := []transport.ClientOption{transport.WithSSELogger(quietLog), transport.WithResponseTimeout(callTimeout), transport.WithHeaders(tg.headers)}
		if tg.client != nil {
			opts = append(opts, transport.WithHTTPClient(tg.client))
		}
		sse, err := transport.NewSSE(tg.url+"/sse", opts...)
		if err != nil {
			t.Fatalf("sse transport: %v", err)
		}
		tr = sse
	case modeStateful:
		// With the standalone GET stream open, as clients that want
		// server-initiated messages hold it.
		h, err := transport.NewStreamableHTTP(tg.url+"/mcp", append(tg.streamableOptions(), transport.WithContinuousListening())...)
		if err != nil {
			t.Fatalf("streamable http transport: %v", err)
		}
		tr = h
	case modeStateless:
		h, err := transport.NewStreamableHTTP(tg.url+"/mcp", tg.streamableOptions()...)
		if err != nil {
			t.Fatalf("streamable http transport: %v", err)
		}
		tr = h
	default:
		t.Fatalf("unknown mode %q", tg.mode)
	}

	c.Client = client.NewClient(tr, append([]client.ClientOption{client.WithProtocolVersion(protocol)}, opts...)...)
	c.OnNotification(c.handleNotification)
	start := time.Now()
	// The stdio transport kills its process when this context ends: it must
	// outlive the test's calls.
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start %s client: %v", tg.mode, err)
	}
	if tg.mode == modeStdio {
		c.pid, c.stderr = stdioCmd.Process.Pid, stdioStderr
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close stdio client: %v", err)
			}
			if st := stdioCmd.ProcessState; st == nil || st.ExitCode() != 0 {
				t.Errorf("stdio server ended with %v, want exit status 0; stderr:\n%s", st, stdioStderr)
			}
		})
	} else {
		c.pid, c.stderr = tg.cmd.Process.Pid, tg.stderr
		t.Cleanup(func() { _ = c.Close() })
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocol
	req.Params.ClientInfo = mcp.Implementation{Name: "mcp-run-python-e2e", Version: "1.0.0"}
	res, err := c.Initialize(ctx, req)
	c.initTime = time.Since(start)
	if err != nil {
		stderr := ""
		if stdioStderr != nil {
			stderr = stdioStderr.String()
		} else {
			stderr = tg.stderr.String()
		}
		t.Fatalf("%s initialize: %v; server stderr:\n%s", tg.mode, err, stderr)
	}
	c.init = res
	if got := c.ProtocolVersion(); got != protocol {
		t.Fatalf("%s: negotiated protocol %q, want %q", tg.mode, got, protocol)
	}
	return c
}

// streamableOptions are the options of tg's Streamable HTTP clients.
func (tg *target) streamableOptions() []transport.StreamableHTTPCOption {
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(quietLog), transport.WithHTTPHeaders(tg.headers)}
	if tg.client != nil {
		opts = append(opts, transport.WithHTTPBasicClient(tg.client))
	}
	return opts
}

// as returns tg for the clients that send token as their bearer token.
func (tg *target) as(token string) *target {
	cp := *tg
	cp.headers = map[string]string{"Authorization": "Bearer " + token}
	return &cp
}

// handleNotification records log messages; every log message's params must be
// exactly {level, data} with a string data (DESIGN 1.5).
func (c *e2eClient) handleNotification(n mcp.JSONRPCNotification) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Method != string(mcp.MethodNotificationMessage) {
		c.others = append(c.others, n.Method)
		return
	}
	level, _ := n.Params.AdditionalFields["level"].(string)
	data, ok := n.Params.AdditionalFields["data"].(string)
	if !ok || len(n.Params.AdditionalFields) != 2 || len(n.Params.Meta) != 0 {
		// Recorded as a message nobody expects, so the test fails.
		raw, _ := json.Marshal(n.Params)
		data = "UNEXPECTED PARAMS " + string(raw)
	}
	m := logMessage{Level: mcp.LoggingLevel(level), Data: data}
	c.logs = append(c.logs, m)
	if c.onLog != nil {
		c.onLog(m)
	}
}

// logged returns the log messages received so far.
func (c *e2eClient) logged() []logMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]logMessage(nil), c.logs...)
}

// setLevel sends logging/setLevel.
func (c *e2eClient) setLevel(t *testing.T, level mcp.LoggingLevel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: level}}); err != nil {
		t.Fatalf("logging/setLevel %s: %v", level, err)
	}
}

// callTool calls run_python_code with arguments and returns the result, which
// must have exactly one text content block, and that block's text.
func (c *e2eClient) callTool(t *testing.T, arguments any) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: arguments}})
	if err != nil {
		t.Fatalf("tools/call %v: %v", arguments, err)
	}
	return res, resultText(t, res)
}

// resultText returns the text of a result's one text content block.
func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	text, ok := onlyText(res)
	if !ok {
		t.Fatalf("result content is %#v, want one text block", res.Content)
	}
	return text
}

// onlyText returns the text of a result's content when that is exactly one
// text block.
func onlyText(res *mcp.CallToolResult) (string, bool) {
	if len(res.Content) != 1 {
		return "", false
	}
	text, ok := res.Content[0].(mcp.TextContent)
	return text.Text, ok
}

// run runs code and returns the result's text; the result must not be a
// tool error.
func (c *e2eClient) run(t *testing.T, code string) string {
	t.Helper()
	res, text := c.callTool(t, map[string]any{"python_code": code})
	if res.IsError {
		t.Fatalf("running %q gave a tool error: %s", code, text)
	}
	return text
}

// expectRun runs code and compares the result's text with want.
func (c *e2eClient) expectRun(t *testing.T, code, want string) {
	t.Helper()
	if got := c.run(t, code); got != want {
		t.Errorf("result of %q:\n got: %q\nwant: %q\n--- got ---\n%s\n--- want ---\n%s", code, got, want, got, want)
	}
}

// expectWorks checks that the server still serves calls.
func (c *e2eClient) expectWorks(t *testing.T) {
	t.Helper()
	c.expectRun(t, "1 + 1", "<status>success</status>\n<return_value>\n2\n</return_value>")
}

// rawRequest sends a request through the client's transport and returns the
// result's raw bytes, as the server sent them.
func (c *e2eClient) rawRequest(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId("e2e-raw-" + method),
		Method:  method,
		Params:  params,
	})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if res.Error != nil {
		t.Fatalf("%s: error %d %s", method, res.Error.Code, res.Error.Message)
	}
	return res.Result
}

var goldenMu sync.Mutex

// goldenWritten remembers what -update wrote in this run, so that two
// transports that disagree are caught.
var goldenWritten = map[string]string{}

// golden compares got with testdata/e2e/NAME, or with -update writes it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		goldenMu.Lock()
		defer goldenMu.Unlock()
		if prev, ok := goldenWritten[name]; ok {
			if prev != got {
				t.Errorf("golden %s: transports disagree:\n got: %q\nearlier: %q", name, got, prev)
			}
			return
		}
		goldenWritten[name] = got
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("result differs from %s:\n got: %q\nwant: %q\n--- got ---\n%s\n--- want ---\n%s", path, got, want, got, want)
	}
}

// denoChild is a deno process started by a server, with its CPU time so far.
type denoChild struct {
	pid   int
	ticks int64 // utime + stime, in clock ticks
}

// cpuSample is how long busyWorker watches CPU time.
const cpuSample = 100 * time.Millisecond

// sampleCPU returns each deno child of pid with the clock ticks it used
// during one cpuSample.
func sampleCPU(t *testing.T, pid int) map[int]int64 {
	t.Helper()
	before := map[int]int64{}
	for _, c := range denoChildren(t, pid) {
		before[c.pid] = c.ticks
	}
	time.Sleep(cpuSample) // a measurement interval, not synchronisation
	used := map[int]int64{}
	for _, c := range denoChildren(t, pid) {
		if b, ok := before[c.pid]; ok {
			used[c.pid] = c.ticks - b
		}
	}
	return used
}

// waitIdleWorkers polls until server pid has n deno children that all sit
// idle (warm, waiting for a call) for three samples in a row, and returns
// their pids.
func waitIdleWorkers(t *testing.T, pid, n int) []int {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	quiet := 0
	var used map[int]int64
	for quiet < 3 {
		used = sampleCPU(t, pid)
		idle := len(used) == n
		for _, ticks := range used {
			if ticks > 1 {
				idle = false
			}
		}
		if idle {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d: deno workers not idle after %v: ticks per %v: %v", pid, startTimeout, cpuSample, used)
		}
	}
	return slices.Collect(maps.Keys(used))
}

// busyWorker polls until exactly one deno child of pid burns CPU in two
// samples in a row, and returns it. Idle workers use no CPU at all; the
// threshold, a fifth of a core, leaves room for a loaded machine. With
// among, only those pids count: a replacement worker booting on a loaded
// machine can burn more CPU than a starved busy one.
func busyWorker(t *testing.T, pid int, done <-chan struct{}, among ...int) int {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	last := 0
	for {
		select {
		case <-done:
			t.Fatalf("the call ended before its worker was seen busy")
		default:
		}
		used := sampleCPU(t, pid)
		var busy []int
		for p, ticks := range used {
			if len(among) > 0 && !slices.Contains(among, p) {
				continue
			}
			if ticks*int64(time.Second/cpuSample) >= 20 { // of 100 ticks a second
				busy = append(busy, p)
			}
		}
		if len(busy) == 1 && busy[0] == last {
			return last
		}
		last = 0
		if len(busy) == 1 {
			last = busy[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d: no busy deno worker after %v: ticks per %v: %v", pid, startTimeout, cpuSample, used)
		}
	}
}
