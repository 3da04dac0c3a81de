package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// fakeEngine is an engine around a mcptest.FakeRunner.
type fakeEngine struct {
	mcptest.FakeRunner
	mcptest.FakeHealth
	warmupErr error
	result    *supervisor.Result // when set, what Run returns
	// startGate, when not nil, makes Start wait until it is closed.
	startGate chan struct{}

	mu     sync.Mutex
	cfg    supervisor.Config
	codes  []string
	closed bool
	// onNew, when not nil, is called with the configuration when the
	// program makes the engine.
	onNew func(cfg supervisor.Config)
}

func (e *fakeEngine) Start(context.Context) {
	if e.startGate != nil {
		<-e.startGate
	}
}

func (e *fakeEngine) Warmup(_ context.Context, progress func(string)) error {
	progress("step one")
	progress("step two")
	return e.warmupErr
}

// NewSession is refused: sessions need the real supervisor, which the end
// to end tests drive.
func (e *fakeEngine) NewSession(context.Context) (*supervisor.Session, error) {
	return nil, errors.New("the fake engine has no sessions")
}

func (e *fakeEngine) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	e.mu.Lock()
	e.codes = append(e.codes, req.Code)
	e.mu.Unlock()
	if e.result != nil {
		for _, line := range e.result.Output {
			if req.OnLine != nil {
				req.OnLine(supervisor.Line{Stream: supervisor.Stdout, Text: line})
			}
		}
		return *e.result, nil
	}
	return e.FakeRunner.Run(ctx, req)
}

func (e *fakeEngine) Close(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}

// isClosed reports whether Close was called.
func (e *fakeEngine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// factory returns a newEngineFunc that hands out e.
func (e *fakeEngine) factory() newEngineFunc {
	return func(cfg supervisor.Config, _ *zap.Logger) engine {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.cfg = cfg
		if e.onNew != nil {
			e.onNew(cfg)
		}
		return e
	}
}

// testEnv is an environment with deno on PATH and a cache directory, and
// none of the program's variables set.
func testEnv() config.Environment {
	return config.Environment{
		LookupEnv:    func(string) (string, bool) { return "", false },
		LookPath:     func(string) (string, error) { return "/usr/bin/deno", nil },
		UserCacheDir: func() (string, error) { return "/home/u/.cache", nil },
		UserHomeDir:  func() (string, error) { return "/home/u", nil },
	}
}

// runResult is what run printed and returned.
type runResult struct {
	code   int
	stdout string
	stderr string
}

// runProgram runs the program with args and no input.
func runProgram(t *testing.T, args []string, e *fakeEngine) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(mcptest.Context(t), args, streams{in: strings.NewReader(""), out: &lockedBuffer{b: &stdout}, err: &lockedBuffer{b: &stderr}},
		testEnv(), e.factory())
	return runResult{code, stdout.String(), stderr.String()}
}

func TestRunArguments(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		code        int
		stdout      string // exact, when checked
		stderr      string // exact, when set
		stderrHas   string
		stderrLacks string
		stdoutHas   string
		checkExact  bool
	}{
		{name: "no mode", args: nil, code: exitUsage, stderrHas: "mcp-run-python: no mode given\n\nUsage: mcp-run-python", checkExact: true},
		{name: "unknown mode", args: []string{"serve"}, code: exitUsage, stderrHas: `unknown mode "serve"`, checkExact: true},
		// The error and a pointer to --help, not 75 lines of usage that
		// scroll the error out of sight.
		{name: "unknown flag", args: []string{"stdio", "--nope"}, code: exitUsage,
			stderr: "mcp-run-python: unknown flag: --nope\nRun 'mcp-run-python --help' for the flags and modes.\n", checkExact: true},
		{name: "bad value", args: []string{"--timeout", "x", "stdio"}, code: exitUsage, stderrHas: "--timeout", stderrLacks: "Usage:", checkExact: true},
		{name: "version", args: []string{"--version"}, code: exitOK, stdout: "mcp-run-python " + binaryVersion().Version + "\n", checkExact: true},
		{name: "help", args: []string{"--help"}, code: exitOK, stdoutHas: "Usage: mcp-run-python [flags] MODE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runProgram(t, tt.args, &fakeEngine{})
			if got.code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", got.code, tt.code, got.stderr)
			}
			if tt.checkExact && got.stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", got.stdout, tt.stdout)
			}
			if tt.stderr != "" && got.stderr != tt.stderr {
				t.Errorf("stderr %q, want %q", got.stderr, tt.stderr)
			}
			if !strings.Contains(got.stderr, tt.stderrHas) {
				t.Errorf("stderr %q lacks %q", got.stderr, tt.stderrHas)
			}
			if tt.stderrLacks != "" && strings.Contains(got.stderr, tt.stderrLacks) {
				t.Errorf("stderr %q has %q", got.stderr, tt.stderrLacks)
			}
			if !strings.Contains(got.stdout, tt.stdoutHas) {
				t.Errorf("stdout %q lacks %q", got.stdout, tt.stdoutHas)
			}
		})
	}
}

func TestRunWarmup(t *testing.T) {
	failed := supervisor.Result{Status: supervisor.StatusRunError, Error: "Traceback..."}
	tests := []struct {
		name      string
		engine    *fakeEngine
		code      int
		stderrHas []string
	}{
		{"success", &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 1}}, exitOK,
			[]string{"step one\nstep two\n", "<status>success</status>", "warmup successful"}},
		{"warmup fails", &fakeEngine{warmupErr: errors.New("no deno")}, exitFailure,
			[]string{"warmup failed: no deno"}},
		{"check cannot run", &fakeEngine{FakeRunner: mcptest.FakeRunner{RunErr: errors.New("boom")}}, exitFailure,
			[]string{"warmup check failed: boom"}},
		{"check fails", &fakeEngine{result: &failed}, exitFailure,
			[]string{"<status>run-error</status>", "warmup check failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runProgram(t, []string{"warmup"}, tt.engine)
			if got.code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", got.code, tt.code, got.stderr)
			}
			if got.stdout != "" {
				t.Errorf("warmup wrote to stdout: %q", got.stdout)
			}
			for _, want := range tt.stderrHas {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr %q lacks %q", got.stderr, want)
				}
			}
			if !tt.engine.closed {
				t.Errorf("engine not closed")
			}
		})
	}
}

func TestRunExample(t *testing.T) {
	ok := supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"mean temperature: 22.36"},
		ReturnValue: json.RawMessage("{\n  \"median\": 22.4\n}")}
	bad := supervisor.Result{Status: supervisor.StatusRunError, Output: []string{"partial"}, Error: "ImportError"}
	for _, tt := range []struct {
		name string
		res  supervisor.Result
		code int
	}{
		{"success", ok, exitOK},
		{"failure", bad, exitFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{result: &tt.res}
			got := runProgram(t, []string{"example"}, e)
			if got.code != tt.code {
				t.Errorf("exit %d, want %d", got.code, tt.code)
			}
			if want := "Tool return value:\n" + render.XML(tt.res) + "\n"; got.stdout != want {
				t.Errorf("stdout %q, want %q", got.stdout, want)
			}
			if want := "info: " + tt.res.Output[0] + "\n"; !strings.Contains(got.stderr, want) {
				t.Errorf("stderr %q lacks the printed line %q", got.stderr, want)
			}
			if len(e.codes) != 1 || e.codes[0] != exampleCode {
				t.Errorf("ran %q, want the example script", e.codes)
			}
		})
	}
}

// TestRunStdioAnswersAtOnce runs the program in stdio mode with an engine
// whose Start does not return: initialize and a call are still answered, and
// stdout carries nothing but JSON-RPC messages.
func TestRunStdioAnswersAtOnce(t *testing.T) {
	e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 3}, startGate: make(chan struct{})}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	var wire bytes.Buffer // everything the program wrote to stdout
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		code := run(context.Background(), []string{"stdio", "--workers", "3"},
			streams{in: serverIn, out: io.MultiWriter(serverOut, &lockedBuffer{b: &wire}), err: &lockedBuffer{b: &stderr}},
			testEnv(), e.factory())
		_ = serverOut.Close()
		exited <- code
	}()
	c := mcptest.NewClient(t, clienttransport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))), mcptest.Legacy)
	c.SetLogLevel(t, mcp.LoggingLevelInfo)
	text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "hi"})
	if err != nil || isError || text != mcptest.ExpectedXML("hi", 3) {
		t.Fatalf("call: err %v, isError %v, %q", err, isError, text)
	}
	close(e.startGate)
	_ = clientOut.Close() // end of stdin: the program stops
	select {
	case code := <-exited:
		if code != exitOK {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	case <-mcptest.Context(t).Done():
		t.Fatal("program did not stop at the end of stdin")
	}
	if e.cfg.Workers != 3 || !e.closed {
		t.Errorf("engine config %+v, closed %v", e.cfg, e.closed)
	}
	scanner := bufio.NewScanner(&wire)
	for scanner.Scan() {
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("stdout line is not a JSON-RPC message: %q", scanner.Text())
		}
	}
}

// TestRunHTTPStopsOnSignal serves each HTTP mode on a free port, makes a
// call, and stops when the context ends, as on SIGINT or SIGTERM.
func TestRunHTTPStopsOnSignal(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeStreamableHTTP, config.ModeStreamableHTTPStateless, config.ModeSSE} {
		t.Run(string(mode), func(t *testing.T) {
			e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 2}}
			p := startProgram(t, mode, e)
			c := p.connect(t)
			if text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "net"}); err != nil || isError || text != mcptest.ExpectedXML("net", 2) {
				t.Fatalf("call: err %v, isError %v, %q", err, isError, text)
			}
			p.stop()
			if code := p.wait(t); code != exitOK {
				t.Errorf("exit %d", code)
			}
			if !e.isClosed() {
				t.Errorf("engine not closed")
			}
		})
	}
}

// TestRunAnnouncesTheHostGiven: the address announced is the one asked for
// with the port taken, not the listener's own form of it (--host 0.0.0.0
// listens on [::] as well and was announced as http://[::]:PORT).
func TestRunAnnouncesTheHostGiven(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "127.0.0.1"} {
		t.Run(host, func(t *testing.T) {
			p := startProgram(t, config.ModeStreamableHTTP, &fakeEngine{}, "--host", host)
			if !strings.HasPrefix(p.url, "http://"+host+":") || strings.HasSuffix(p.url, ":0") {
				t.Errorf("announced %s, want http://%s:PORT", p.url, host)
			}
		})
	}
}

// program is the program running in a server mode under test.
type program struct {
	mode   config.Mode
	stop   context.CancelFunc // what SIGINT or SIGTERM do
	stderr *lineLog
	url    string // HTTP modes: the base URL, http://host:port

	exited   chan int
	waitOnce sync.Once
	code     int

	// stdio: the client's ends of the pipes.
	clientIn  io.ReadCloser
	clientOut io.WriteCloser
}

// startProgram runs the program in mode with a fake engine and flags; HTTP
// modes listen on a free port. The test's cleanup stops it.
func startProgram(t *testing.T, mode config.Mode, e *fakeEngine, flags ...string) *program {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := &program{mode: mode, stop: stop, stderr: newLineLog(), exited: make(chan int, 1)}
	stderrR, stderrW := io.Pipe()
	go p.stderr.read(stderrR)
	std := streams{in: strings.NewReader(""), out: io.Discard, err: stderrW}
	var serverOut *io.PipeWriter
	if mode == config.ModeStdio {
		var serverIn io.Reader
		p.clientIn, serverOut = io.Pipe()
		serverIn, p.clientOut = io.Pipe()
		std.in, std.out = serverIn, serverOut
	}
	args := append(append([]string{}, flags...), "--port", "0", string(mode))
	go func() {
		code := run(ctx, args, std, testEnv(), e.factory())
		if serverOut != nil {
			_ = serverOut.Close()
		}
		_ = stderrW.Close()
		p.exited <- code
	}()
	t.Cleanup(func() {
		stop()
		if p.clientOut != nil {
			_ = p.clientOut.Close()
		}
		p.wait(t)
	})
	if mode != config.ModeStdio {
		line := p.stderr.waitFor(t, " at http://")
		_, after, _ := strings.Cut(line, " at http://")
		host, _, _ := strings.Cut(after, "/")
		p.url = "http://" + host
	}
	return p
}

// connect returns a client of the program; in stdio mode only one.
func (p *program) connect(t *testing.T) *mcptest.Client {
	t.Helper()
	var tr clienttransport.Interface
	var err error
	switch p.mode {
	case config.ModeStdio:
		tr = clienttransport.NewIO(p.clientIn, p.clientOut, io.NopCloser(strings.NewReader("")))
	case config.ModeSSE:
		tr, err = clienttransport.NewSSE(p.url + transport.SSE.Path())
	default:
		tr, err = clienttransport.NewStreamableHTTP(p.url + transport.StreamableHTTP.Path())
	}
	if err != nil {
		t.Fatalf("client transport: %v", err)
	}
	return mcptest.NewClient(t, tr, mcptest.Legacy)
}

// wait waits for the program to exit and returns its exit status.
func (p *program) wait(t *testing.T) int {
	t.Helper()
	p.waitOnce.Do(func() {
		select {
		case p.code = <-p.exited:
		case <-time.After(mcptest.Timeout):
			p.code = -1
			t.Errorf("the program did not exit; stderr:\n%s", p.stderr)
		}
	})
	return p.code
}

// lineLog keeps the lines a program writes to stderr.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced when a line arrives
	ended   bool
}

// newLineLog returns an empty log.
func newLineLog() *lineLog {
	return &lineLog{changed: make(chan struct{})}
}

// read reads lines from r until it ends.
func (l *lineLog) read(r io.Reader) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, scanner.Text())
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
	l.mu.Lock()
	l.ended = true
	close(l.changed)
	l.mu.Unlock()
}

// waitFor returns the first line that contains s, waiting for it.
func (l *lineLog) waitFor(t *testing.T, s string) string {
	t.Helper()
	ctx := mcptest.Context(t)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return line
			}
		}
		changed, ended := l.changed, l.ended
		l.mu.Unlock()
		if ended {
			t.Fatalf("stderr ended without a line containing %q:\n%s", s, l)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no line containing %q on stderr:\n%s", s, l)
		}
	}
}

// String returns the lines so far.
func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
