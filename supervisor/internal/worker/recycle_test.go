package worker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker/workertest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/proc"
)

func TestCountThreads(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  census
	}{
		{"a worker at rest", []string{"deno", "deno", "V8 DefaultWorke", "V8 DefaultWorke", "tokio-runtime-w", "worker-1"}, census{runners: 1, others: 4}},
		{"a runner left behind", []string{"deno", "worker-1", "worker-2"}, census{runners: 2, others: 1}},
		{"a Worker the code made", []string{"deno", "worker-2", "worker-3", "tokio-runtime-w", "tokio-runtime-w"}, census{runners: 2, others: 1}},
		{"no runner", []string{"deno", "V8 DefaultWorke"}, census{runners: 0, others: 2}},
		{"nothing", nil, census{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countThreads(tt.names); got != tt.want {
				t.Errorf("countThreads(%q) = %+v, want %+v", tt.names, got, tt.want)
			}
		})
	}
}

// TestAwaitCensus counts the test's own threads, none of which is a
// runner's.
func TestAwaitCensus(t *testing.T) {
	if !proc.HasThreads {
		t.Skip("no thread census on this platform")
	}
	synctest.Test(t, func(t *testing.T) {
		pid := os.Getpid()
		got, err := awaitCensus(context.Background(), pid, census{runners: 0, others: -1}, time.Second)
		if err != nil || got.runners != 0 || got.others < 1 {
			t.Errorf("awaitCensus of a process as wanted = %+v, %v", got, err)
		}
		if _, err := awaitCensus(context.Background(), pid, census{runners: 0, others: got.others + 5}, time.Second); err != nil {
			t.Errorf("awaitCensus of a process under its most threads = %v", err)
		}
		start := time.Now()
		if _, err := awaitCensus(context.Background(), pid, census{runners: 0, others: 0}, time.Second); !errors.Is(err, errLeftover) {
			t.Errorf("awaitCensus of a process over its most threads = %v, want errLeftover", err)
		}
		start = time.Now()
		_, err = awaitCensus(context.Background(), pid, census{runners: 1, others: -1}, time.Second)
		if !errors.Is(err, errLeftover) || time.Since(start) != time.Second {
			t.Errorf("awaitCensus of a process that never comes back = %v after %v; want errLeftover after 1s", err, time.Since(start))
		}
		if _, err := awaitCensus(context.Background(), -1, census{}, time.Second); err == nil || errors.Is(err, errLeftover) {
			t.Errorf("awaitCensus of no process = %v, want an error reading it", err)
		}
	})
}

// TestRecycleRetires: a worker whose process must not serve again is
// refused before anything is sent to it.
func TestRecycleRetires(t *testing.T) {
	current := &runtimefiles.Files{Key: "0123456789abcdef"}
	s := &Starter{Current: func(rt *runtimefiles.Files, _ string) bool { return rt == current }}
	tests := []struct {
		name string
		set  func(w *Worker)
		want string
	}{
		{"ended", func(w *Worker) { close(w.exited) }, "has ended"},
		{"stopped", func(w *Worker) { w.Spent = true }, "stopped or failed"},
		{"served its calls", func(w *Worker) { w.calls = maxCallsPerProcess - 1 }, "served 100 calls"},
		{"grew", func(w *Worker) { w.calls, w.baseline, w.made = 2, 200<<20, 200<<20+maxGrowth+1 }, "grew"},
		{"its runtime replaced", func(w *Worker) { w.rt = &runtimefiles.Files{Key: "fedcba9876543210"} }, "runtime was replaced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &Worker{Proc: workertest.NewProcess(), exited: make(chan struct{}), rt: current}
			tt.set(w)
			err := s.Recycle(context.Background(), w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("recycle = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	// Growth within the bound is no reason: the check after it decides.
	w := &Worker{Proc: workertest.NewProcess(), exited: make(chan struct{}), rt: &runtimefiles.Files{Key: "fedcba9876543210"}}
	w.calls, w.baseline, w.made = 2, 200<<20, 200<<20+maxGrowth
	if err := s.Recycle(context.Background(), w); err == nil || !strings.Contains(err.Error(), "runtime was replaced") {
		t.Errorf("recycle of a worker within its growth = %v, want its runtime as the reason", err)
	}
}
