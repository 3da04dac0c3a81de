package main

import (
	"bufio"
	"context"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// startClock is a fake engine that notes when Start was called.
type startClock struct {
	*fakeEngine
	started chan struct{}
	at      time.Time // when Start was called, once started is closed
}

func newStartClock() *startClock {
	return &startClock{fakeEngine: &fakeEngine{}, started: make(chan struct{})}
}

func (c *startClock) Start(ctx context.Context) {
	c.at = time.Now()
	close(c.started)
	c.fakeEngine.Start(ctx)
}

func (c *startClock) factory() newEngineFunc {
	return func(supervisor.Config, *zap.Logger) engine { return c }
}

// waitStart waits for Start and returns when it was called.
func (c *startClock) waitStart(t *testing.T) time.Time {
	t.Helper()
	select {
	case <-c.started:
		return c.at
	case <-mcptest.Context(t).Done():
		t.Fatal("the engine never started")
		return time.Time{}
	}
}

// firstWrite notes when the first write to w returned.
type firstWrite struct {
	w    io.Writer
	once sync.Once
	at   chan time.Time
}

func (f *firstWrite) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.once.Do(func() { f.at <- time.Now() })
	return n, err
}

// runStdio runs the program in stdio mode on pipes and returns the client's
// ends, and the exit status to come.
func runStdio(t *testing.T, e newEngineFunc, out func(io.Writer) io.Writer) (io.WriteCloser, *bufio.Reader, <-chan int) {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		code := run(context.Background(), []string{"stdio"}, streams{in: serverIn, out: out(serverOut), err: io.Discard}, testEnv(), e)
		_ = serverOut.Close()
		exited <- code
	}()
	t.Cleanup(func() { _ = clientOut.Close() })
	return clientOut, bufio.NewReader(clientIn), exited
}

// TestRunStdioStartsEngineAfterFirstAnswer checks that over stdio the
// engine starts once the answer to initialize is written, not before.
func TestRunStdioStartsEngineAfterFirstAnswer(t *testing.T) {
	c := newStartClock()
	spawned := time.Now()
	answered := &firstWrite{at: make(chan time.Time, 1)}
	in, out, _ := runStdio(t, c.factory(), func(w io.Writer) io.Writer { answered.w = w; return answered })
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, `"id":1,"result"`) {
		t.Fatalf("answer %q, %v", line, err)
	}
	at, first := c.waitStart(t), <-answered.at
	// Unless the answer took longer than the delay, which only a very slow
	// machine's does, the engine waited for it.
	if at.Before(first) && at.Sub(spawned) < stdioStartDelay {
		t.Errorf("the engine started %v before the first answer", first.Sub(at))
	}
}

// TestRunStdioStartsEngineUnasked checks that the engine starts over stdio
// even when no client speaks, after stdioStartDelay.
func TestRunStdioStartsEngineUnasked(t *testing.T) {
	c := newStartClock()
	spawned := time.Now()
	in, _, exited := runStdio(t, c.factory(), func(w io.Writer) io.Writer { return w })
	if waited := c.waitStart(t).Sub(spawned); waited < stdioStartDelay {
		t.Errorf("with no answer written, the engine started %v after the program, before %v", waited, stdioStartDelay)
	}
	_ = in.Close()
	if code := <-exited; code != exitOK {
		t.Errorf("exit %d", code)
	}
}

// TestRunStdioEndsWithoutStart checks that a server whose stdin ends at
// once stops at once: it does not wait for an engine that never started.
func TestRunStdioEndsWithoutStart(t *testing.T) {
	c := newStartClock()
	start := time.Now()
	code := run(mcptest.Context(t), []string{"stdio"}, streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, testEnv(), c.factory())
	if took := time.Since(start); code != exitOK || took > engineCloseTimeout/2 {
		t.Errorf("exit %d after %v", code, took)
	}
	if !c.isClosed() {
		t.Error("the engine was not closed")
	}
}

// TestPauseGC checks that the collector stays off until the first resume,
// which restores the percentage it found; a second resume changes nothing.
func TestPauseGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	resume := pauseGC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("paused, the collector is at %d%%", got)
	}
	resume()
	if got := debug.SetGCPercent(80); got != 50 {
		t.Errorf("resumed, the collector is at %d%%, want 50%%", got)
	}
	resume()
	if got := debug.SetGCPercent(80); got != 80 {
		t.Errorf("a second resume set the collector to %d%%", got)
	}
}
