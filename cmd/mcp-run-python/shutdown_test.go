package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// serverModes are the modes that serve MCP.
var serverModes = []Mode{ModeStdio, ModeSSE, ModeStreamableHTTP, ModeStreamableHTTPStateless}

func TestCallGate(t *testing.T) {
	const short = 20 * time.Millisecond
	tests := []struct {
		name string
		// call, when not nil, runs as an admitted call while the gate shuts
		// down; it gets the call's context, the gate's closed channel and a
		// channel closed at the end of the test, and returns when the call
		// leaves.
		call func(ctx context.Context, closed, testOver <-chan struct{})
		// timeout and stopWait of the gate.
		timeout, stopWait time.Duration
		wantOver          bool  // shutdown reports every call over
		wantCause         error // the call context's cause at its end
	}{
		{name: "no call", timeout: testTimeout, stopWait: testTimeout, wantOver: true},
		{
			name: "call finishes in time",
			call: func(_ context.Context, closed, _ <-chan struct{}) {
				<-closed // finishes only once the shutdown began
			},
			timeout: testTimeout, stopWait: testTimeout, wantOver: true, wantCause: context.Canceled,
		},
		{
			name:    "call cancelled at the timeout",
			call:    func(ctx context.Context, _, _ <-chan struct{}) { <-ctx.Done() },
			timeout: short, stopWait: testTimeout, wantOver: true, wantCause: errShuttingDown,
		},
		{
			name:    "no timeout cancels at once",
			call:    func(ctx context.Context, _, _ <-chan struct{}) { <-ctx.Done() },
			timeout: 0, stopWait: testTimeout, wantOver: true, wantCause: errShuttingDown,
		},
		{
			name: "call ignores the cancellation",
			call: func(_ context.Context, _, testOver <-chan struct{}) {
				<-testOver // stands for a call that never returns
			},
			timeout: short, stopWait: short, wantOver: false, wantCause: errShuttingDown,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newCallGate(tt.timeout, tt.stopWait)
			causes := make(chan error, 1)
			testOver := make(chan struct{})
			t.Cleanup(func() { close(testOver) })
			if tt.call != nil {
				ctx, leave, err := g.enter(context.Background())
				if err != nil {
					t.Fatalf("enter: %v", err)
				}
				go func() {
					tt.call(ctx, g.closed(), testOver)
					// The cause is read after leave for calls that finish:
					// leave ends their context without one.
					leave()
					causes <- context.Cause(ctx)
				}()
			}
			if over := g.shutdown(zap.NewNop()); over != tt.wantOver {
				t.Errorf("shutdown = %v, want %v", over, tt.wantOver)
			}
			if tt.call != nil && tt.wantOver {
				if cause := <-causes; !errors.Is(cause, tt.wantCause) {
					t.Errorf("call context cause %v, want %v", cause, tt.wantCause)
				}
			}
			if _, _, err := g.enter(context.Background()); !errors.Is(err, errShuttingDown) || err.Error() != "the server is shutting down and takes no new calls" {
				t.Errorf("enter after shutdown: %v", err)
			}
		})
	}
}

func TestCallGateKeepsParentContext(t *testing.T) {
	g := newCallGate(time.Second, time.Second)
	parent, cancel := context.WithCancelCause(context.Background())
	ctx, leave, err := g.enter(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	cause := errors.New("client went away")
	cancel(cause)
	<-ctx.Done()
	if got := context.Cause(ctx); got != cause {
		t.Errorf("cause %v, want %v", got, cause)
	}
	leave() // twice is harmless
	if n := g.inFlight(); n != 0 {
		t.Errorf("%d calls in flight after leave", n)
	}
}

// TestShutdownLetsRunningCallsFinish stops the program, as SIGTERM does,
// while a call runs: the call finishes and its result reaches the client
// before the program exits with status 0. In stdio mode, where the client
// can still send, a new call is refused meanwhile.
func TestShutdownLetsRunningCallsFinish(t *testing.T) {
	for _, mode := range serverModes {
		t.Run(string(mode), func(t *testing.T) {
			b := newBlocker()
			e := &fakeEngine{fakeRunner: fakeRunner{lines: 2, block: b.block}}
			p := startProgram(t, mode, e, "--shutdown-timeout", "1m", "--log-level", "info")
			c := p.connect(t)
			result := c.callAsync(testContext(t), blockCode)
			b.waitStarted(t)
			p.stop()
			p.stderr.waitFor(t, "shutting down: waiting for running calls")
			if mode == ModeStdio {
				text, isError, err := c.call(testContext(t), map[string]any{codeArgument: "late"})
				if err != nil || !isError || text != "the server is shutting down and takes no new calls" {
					t.Errorf("call during shutdown: err %v, isError %v, %q", err, isError, text)
				}
			}
			close(b.release)
			if err := <-b.released; err != nil {
				t.Errorf("the running call's context ended: %v", err)
			}
			if r := wait(t, result); r.err != nil || r.isError || r.text != expectedXML(blockCode, 2) {
				t.Errorf("running call: err %v, isError %v, %q", r.err, r.isError, r.text)
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
			b := newBlocker()
			e := &fakeEngine{fakeRunner: fakeRunner{block: b.block}}
			p := startProgram(t, mode, e, "--shutdown-timeout", shutdownTimeout.String(), "--grace", "100ms")
			c := p.connect(t)
			result := c.callAsync(testContext(t), blockCode)
			b.waitStarted(t)
			stopped := time.Now()
			p.stop()
			cancelled := b.waitCancelled(t)
			if !errors.Is(cancelled.cause, errShuttingDown) {
				t.Errorf("cancelled with cause %v, want %v", cancelled.cause, errShuttingDown)
			}
			if waited := cancelled.at.Sub(stopped); waited < shutdownTimeout {
				t.Errorf("cancelled %v after the signal, before the shutdown timeout %v", waited, shutdownTimeout)
			}
			if r := wait(t, result); r.err != nil || !r.isError || r.text != "the call was cancelled: the server is shutting down" {
				t.Errorf("running call: err %v, isError %v, %q", r.err, r.isError, r.text)
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
