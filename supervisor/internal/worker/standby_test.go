package worker

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker/workertest"
)

// TestAwaitWorking: a restore that keeps using CPU is waited for however
// long it takes a loaded machine; one whose process does nothing (stopped)
// is given up after one period, and so is one whose CPU cannot be read.
func TestAwaitWorking(t *testing.T) {
	const every = 4 * time.Second
	tests := []struct {
		name     string
		spin     float64       // cores the process uses while restoring
		readErr  error         // CPU time unreadable
		restore  time.Duration // when the restore ends
		wantErr  bool
		wantTime time.Duration // when awaitWorking returns
	}{
		{"quick restore", 1, nil, 100 * time.Millisecond, false, 100 * time.Millisecond},
		{"slow restore on a loaded machine", 0.05, nil, 15 * time.Second, false, 15 * time.Second},
		{"stopped process", 0, nil, time.Hour, true, every},
		{"unreadable CPU time", 1, errors.New("no such process"), time.Hour, true, every},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := workertest.NewProcess()
				p.SetSpin(tt.spin)
				p.FailReads(tt.readErr)
				done := make(chan struct{})
				time.AfterFunc(tt.restore, func() { close(done) })
				start := time.Now()
				err := awaitWorking(context.Background(), done, p, every)
				if (err != nil) != tt.wantErr {
					t.Fatalf("awaitWorking = %v, want error: %v", err, tt.wantErr)
				}
				if took := time.Since(start); took != tt.wantTime {
					t.Errorf("returned after %v, want %v", took, tt.wantTime)
				}
			})
		})
	}
}

// TestAwaitWorkingEndsWithItsContext: a call whose time runs out stops
// waiting, with its context's cause.
func TestAwaitWorkingEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := workertest.NewProcess()
		p.SetSpin(1)
		cause := errors.New("the call's time ran out")
		ctx, cancel := context.WithTimeoutCause(context.Background(), 10*time.Second, cause)
		defer cancel()
		if err := awaitWorking(ctx, make(chan struct{}), p, 4*time.Second); !errors.Is(err, cause) {
			t.Fatalf("awaitWorking = %v, want %v", err, cause)
		}
	})
}
