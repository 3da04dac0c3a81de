package supervisor

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"go.uber.org/zap/zaptest"
)

// hangingLauncher launches workers that never connect while hang is set:
// the command becomes a stand-in (see TestHelperProcess) that waits on its
// stdin, with the same pipes.
func hangingLauncher(hang *atomic.Bool) worker.Launcher {
	platform := worker.PlatformLauncher(0)
	return func(cmd *exec.Cmd) (worker.Process, error) {
		if hang.Load() {
			stand := helperCommand("worker")
			cmd.Path, cmd.Args, cmd.Env = stand.Path, stand.Args, stand.Env
		}
		return platform(cmd)
	}
}

func TestWorkersThatNeverConnect(t *testing.T) {
	// The snapshot exists before workers start to hang.
	if err := start(t, Config{Workers: 1}).Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hang atomic.Bool
	hang.Store(true)
	// StartTimeout must fail hanging workers well before the queue times
	// out, yet let a real worker start on a loaded machine: a worker takes
	// about 0.5 s on two idle cores.
	cfg := Config{Deno: testDeno(t), CacheDir: testCache(t), Workers: 1, StartTimeout: 2 * time.Second, QueueTimeout: 6 * time.Second}
	s := New(cfg, zaptest.NewLogger(t))
	s.workers.Launch = hangingLauncher(&hang)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if !listsProcesses {
			return
		}
		if left := denoChildren(t); len(left) > 0 {
			t.Errorf("processes left: %v", left)
		}
	})

	_, err := s.Run(context.Background(), Request{Code: "1"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "did not connect") {
		t.Fatalf("Run with workers that never connect: %v, want ErrUnavailable naming the reason", err)
	}
	if h := s.Health(); h.Ready || !strings.Contains(h.Err, "did not connect") {
		t.Errorf("Health = %+v, want not ready, with the reason", h)
	}

	// Workers can start again: the pool recovers by itself.
	hang.Store(false)
	deadline := time.Now().Add(40 * time.Second)
	for !s.Health().Ready {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not recover: %+v", s.Health())
		}
		time.Sleep(50 * time.Millisecond) // bounded polling of the pool's state
	}
	if h := s.Health(); h.Err != "" {
		t.Errorf("Health after recovery = %+v", h)
	}
	res, err := s.Run(context.Background(), Request{Code: "1+1"})
	if err != nil || string(res.ReturnValue) != "2" {
		t.Errorf("after recovery: %+v, %v", res, err)
	}
}

func TestQueue(t *testing.T) {
	s := start(t, Config{Workers: 1, Queue: 1, Timeout: 3 * time.Second})
	started := make(chan struct{})
	var wg sync.WaitGroup
	var first, second Result
	wg.Go(func() {
		var once sync.Once
		first, _ = s.Run(context.Background(), Request{Code: "print('busy')\nwhile True: pass", OnLine: func(Line) { once.Do(func() { close(started) }) }})
	})
	<-started
	wg.Go(func() {
		var err error
		if second, err = s.Run(context.Background(), Request{Code: "'second'"}); err != nil {
			t.Errorf("the queued call: %v", err)
		}
	})
	for s.Health().Waiting != 1 {
		time.Sleep(10 * time.Millisecond) // bounded: the call above queues at once
	}
	if _, err := s.Run(context.Background(), Request{Code: "'third'"}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a call beyond the queue: %v, want ErrQueueFull", err)
	}
	wg.Wait()
	if !strings.Contains(first.Error, "TimeoutError") {
		t.Errorf("the busy call: %+v", first)
	}
	if string(second.ReturnValue) != `"second"` {
		t.Errorf("the queued call: %+v", second)
	}
	if h := s.Health(); h.Waiting != 0 {
		t.Errorf("Health after the queue drained: %+v", h)
	}
}

func TestWarmAndLiveLimits(t *testing.T) {
	s := start(t, Config{Workers: 3, Warm: 1})
	deadline := time.Now().Add(20 * time.Second)
	for h := s.Health(); h.Warm != 1 || h.Starting != 0; h = s.Health() {
		if time.Now().After(deadline) {
			t.Fatalf("pool never settled: %+v", h)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling of the pool's state
	}
	if n := len(denoChildren(t)); n != 1 {
		t.Errorf("%d deno processes with Warm 1, want 1", n)
	}
	// Three calls at once: beyond the warm one, workers start on demand up
	// to the live limit.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			res, err := s.Run(context.Background(), Request{Code: "import time\nt = time.time()\nwhile time.time() < t + 1: pass\n'done'"})
			if err != nil || string(res.ReturnValue) != `"done"` {
				t.Errorf("call %d: %+v %v", i, res, err)
			}
		})
	}
	peak := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			if peak > 3 {
				t.Errorf("%d deno processes at once, want at most 3", peak)
			}
			return
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, len(denoChildren(t)))
		}
	}
}

// Code over CodeLimit bytes is refused before it reaches a worker, with a
// message the model can act on.
func TestCodeLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		code  string
		want  string // the error; "" when the code is not refused
	}{
		{"at the limit", 10, "0123456789", ""},
		{"one byte over", 10, "0123456789x", "the code is too large: 11 bytes, over the limit of 10 bytes (10 B); send shorter code"},
		{"bytes, not characters", 10, "éééééé", "the code is too large: 12 bytes, over the limit of 10 bytes (10 B); send shorter code"},
		{"multi-byte at the limit", 10, "ééééé", ""},
		{"no limit", 0, strings.Repeat("#", 1<<20+1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No cache directory: code that passes the check fails to get
			// a runtime, which tells it apart from a refusal.
			s := New(Config{CodeLimit: tt.limit, Deno: "/nonexistent/deno", CacheDir: t.TempDir()}, zaptest.NewLogger(t))
			defer s.Close(context.Background())
			_, err := s.Run(context.Background(), Request{Code: tt.code})
			if tt.want == "" {
				if errors.Is(err, ErrCodeTooLarge) {
					t.Errorf("refused code within the limit: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCodeTooLarge) || err.Error() != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCancelInterruptsTheCode(t *testing.T) {
	s := start(t, Config{Workers: 1})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = s.Run(ctx, Request{Code: "print('x')\nwhile True: pass", OnLine: func(Line) { close(started) }})
	}()
	<-started
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled call did not end")
	}
	if !errors.Is(err, context.Canceled) || len(res.Output) != 1 {
		t.Errorf("cancelled call: %+v, %v; want context.Canceled and the output so far", res, err)
	}
}

func TestIdleWorkersKilledFromOutsideAreReplaced(t *testing.T) {
	s := start(t, Config{Workers: 2})
	waitWarm := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for h := s.Health(); h.Warm != n; h = s.Health() {
			if time.Now().After(deadline) {
				t.Fatalf("pool never had %d warm workers: %+v", n, h)
			}
			time.Sleep(20 * time.Millisecond) // bounded polling of the pool's state
		}
	}
	waitWarm(2)
	before := denoChildren(t)
	for _, pid := range before {
		killPid(t, pid)
	}
	// Until the pool has seen the deaths it still counts the dead workers
	// as warm, so wait for the processes first: both killed ones reaped and
	// two new ones started, which the pool does only once it has seen them.
	old := func(pid int) bool { return slices.Contains(before, pid) }
	deadline := time.Now().Add(20 * time.Second)
	for after := denoChildren(t); len(after) != 2 || slices.ContainsFunc(after, old); after = denoChildren(t) {
		if time.Now().After(deadline) {
			t.Fatalf("workers before %v, after %v: want two new ones and no zombies", before, after)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling for the reaping and the restarts
	}
	waitWarm(2)
	if res, _ := run(t, s, "'fine'"); res.Status != StatusSuccess {
		t.Errorf("a call after the kills: %+v", res)
	}
}

// An interrupt can reach a worker before its run frame does: the time limit
// runs from when the call starts, and a loaded machine may deliver the run
// late. The interrupt must then stop the run, not the idle interpreter.
func TestAnInterruptAheadOfTheRunStopsTheRun(t *testing.T) {
	s, w := warmWorker(t)
	ctx := context.Background()
	if err := w.Conn.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the idle worker evaluates a few times meanwhile
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, _, err = s.call(ctx, w, bridge.RunRequest{Code: "while True: pass"}, runOpts{limit: &deadline{}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run ignored the interrupt sent ahead of it")
	}
	if err != nil || res.Status != StatusRunError || !strings.HasSuffix(res.Error, "KeyboardInterrupt\n") {
		t.Errorf("run after an early interrupt: %+v, %v; want a KeyboardInterrupt", res, err)
	}
}
