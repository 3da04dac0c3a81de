package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// serverModes are the modes that serve MCP.
var serverModes = []config.Mode{config.ModeStdio, config.ModeSSE, config.ModeStreamableHTTP, config.ModeStreamableHTTPStateless}

// TestShutdownLetsRunningCallsFinish stops the program, as SIGTERM does,
// while a call runs: the call finishes and its result reaches the client
// before the program exits with status 0. In stdio mode, where the client
// can still send, a new call is refused meanwhile.
func TestShutdownLetsRunningCallsFinish(t *testing.T) {
	for _, mode := range serverModes {
		t.Run(string(mode), func(t *testing.T) {
			b := mcptest.NewBlocker()
			e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 2, Block: b.Block}}
			p := startProgram(t, mode, e, "--shutdown-timeout", "1m", "--log-level", "info")
			c := p.connect(t)
			result := c.CallAsync(mcptest.Context(t), mcptest.BlockCode)
			b.WaitStarted(t)
			p.stop()
			p.stderr.waitFor(t, "shutting down: waiting for running calls")
			if mode == config.ModeStdio {
				text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "late"})
				if err != nil || !isError || text != "the server is shutting down and takes no new calls" {
					t.Errorf("call during shutdown: err %v, isError %v, %q", err, isError, text)
				}
			}
			close(b.Release)
			if err := <-b.Released; err != nil {
				t.Errorf("the running call's context ended: %v", err)
			}
			if r := mcptest.Wait(t, result); r.Err != nil || r.IsError || r.Text != mcptest.ExpectedXML(mcptest.BlockCode, 2) {
				t.Errorf("running call: err %v, isError %v, %q", r.Err, r.IsError, r.Text)
			}
			if code := p.wait(t); code != exitOK {
				t.Errorf("exit %d; stderr:\n%s", code, p.stderr)
			}
			if !e.isClosed() {
				t.Errorf("engine not closed")
			}
		})
	}
}

// TestShutdownCancelsCallsAtTimeout stops the program while a call runs
// that only ends when cancelled: at --shutdown-timeout its context is
// cancelled, its client gets a tool error that says why, and the program
// exits with status 0 soon after.
func TestShutdownCancelsCallsAtTimeout(t *testing.T) {
	const shutdownTimeout = 200 * time.Millisecond
	for _, mode := range serverModes {
		t.Run(string(mode), func(t *testing.T) {
			b := mcptest.NewBlocker()
			e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Block: b.Block}}
			p := startProgram(t, mode, e, "--shutdown-timeout", shutdownTimeout.String(), "--grace", "100ms")
			c := p.connect(t)
			result := c.CallAsync(mcptest.Context(t), mcptest.BlockCode)
			b.WaitStarted(t)
			stopped := time.Now()
			p.stop()
			cancelled := b.WaitCancelled(t)
			if !errors.Is(cancelled.Cause, mcpserver.ErrShuttingDown) {
				t.Errorf("cancelled with cause %v, want %v", cancelled.Cause, mcpserver.ErrShuttingDown)
			}
			if waited := cancelled.At.Sub(stopped); waited < shutdownTimeout {
				t.Errorf("cancelled %v after the signal, before the shutdown timeout %v", waited, shutdownTimeout)
			}
			if r := mcptest.Wait(t, result); r.Err != nil || !r.IsError || r.Text != "the call was cancelled: the server is shutting down" {
				t.Errorf("running call: err %v, isError %v, %q", r.Err, r.IsError, r.Text)
			}
			if code := p.wait(t); code != exitOK {
				t.Errorf("exit %d; stderr:\n%s", code, p.stderr)
			}
			// Generous, but bounded: cancelled calls return at once here.
			if took := time.Since(stopped); took > shutdownTimeout+2*time.Second {
				t.Errorf("exit %v after the signal", took)
			}
			if !e.isClosed() {
				t.Errorf("engine not closed")
			}
			if !strings.Contains(p.stderr.String(), "cancelling the calls still running at the shutdown timeout") {
				t.Errorf("stderr does not say that calls were cancelled:\n%s", p.stderr)
			}
		})
	}
}
