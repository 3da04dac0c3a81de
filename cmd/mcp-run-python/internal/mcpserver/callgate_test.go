package mcpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

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
		{name: "no call", timeout: mcptest.Timeout, stopWait: mcptest.Timeout, wantOver: true},
		{
			name: "call finishes in time",
			call: func(_ context.Context, closed, _ <-chan struct{}) {
				<-closed // finishes only once the shutdown began
			},
			timeout: mcptest.Timeout, stopWait: mcptest.Timeout, wantOver: true, wantCause: context.Canceled,
		},
		{
			name:    "call cancelled at the timeout",
			call:    func(ctx context.Context, _, _ <-chan struct{}) { <-ctx.Done() },
			timeout: short, stopWait: mcptest.Timeout, wantOver: true, wantCause: ErrShuttingDown,
		},
		{
			name:    "no timeout cancels at once",
			call:    func(ctx context.Context, _, _ <-chan struct{}) { <-ctx.Done() },
			timeout: 0, stopWait: mcptest.Timeout, wantOver: true, wantCause: ErrShuttingDown,
		},
		{
			name: "call ignores the cancellation",
			call: func(_ context.Context, _, testOver <-chan struct{}) {
				<-testOver // stands for a call that never returns
			},
			timeout: short, stopWait: short, wantOver: false, wantCause: ErrShuttingDown,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewCallGate(tt.timeout, tt.stopWait)
			causes := make(chan error, 1)
			testOver := make(chan struct{})
			t.Cleanup(func() { close(testOver) })
			if tt.call != nil {
				ctx, leave, err := g.enter(context.Background())
				if err != nil {
					t.Fatalf("enter: %v", err)
				}
				go func() {
					tt.call(ctx, g.Closed(), testOver)
					// The cause is read after leave for calls that finish:
					// leave ends their context without one.
					leave()
					causes <- context.Cause(ctx)
				}()
			}
			if over := g.Shutdown(zap.NewNop()); over != tt.wantOver {
				t.Errorf("shutdown = %v, want %v", over, tt.wantOver)
			}
			if tt.call != nil && tt.wantOver {
				if cause := <-causes; !errors.Is(cause, tt.wantCause) {
					t.Errorf("call context cause %v, want %v", cause, tt.wantCause)
				}
			}
			if _, _, err := g.enter(context.Background()); !errors.Is(err, ErrShuttingDown) || err.Error() != "the server is shutting down and takes no new calls" {
				t.Errorf("enter after shutdown: %v", err)
			}
		})
	}
}

func TestCallGateKeepsParentContext(t *testing.T) {
	g := NewCallGate(time.Second, time.Second)
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
