package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

// TestCloseRacesFirstCalls closes a supervisor 0-50 ms after its first
// call and session began, while they prepare the runtime, and once while
// the call runs its code, with -race: no data race, Close returns nil once
// the calls have returned and leaves no run directory, bridge listener,
// goroutine or deno process; and every call after Close is refused with
// errClosed, starting nothing.
func TestCloseRacesFirstCalls(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the run directory goes (runDirBase)
	type when struct {
		name    string
		code    string
		running bool // Close once the code runs, else after offset
		offset  time.Duration
	}
	var cases []when
	for _, ms := range []time.Duration{0, 1, 5, 10, 20, 35, 50} {
		cases = append(cases, when{name: fmt.Sprint(ms * time.Millisecond), code: "1 + 1", offset: ms * time.Millisecond})
	}
	cases = append(cases, when{name: "running", code: "print('running')\nwhile True: pass", running: true})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := New(Config{Deno: testDeno(t), CacheDir: testCache(t), Workers: 1, Timeout: 30 * time.Second}, zaptest.NewLogger(t))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			running := make(chan struct{})
			var once sync.Once
			ran := make(chan error, 1)
			go func() {
				_, err := s.Run(ctx, Request{Code: tt.code, OnLine: func(Line) { once.Do(func() { close(running) }) }})
				ran <- err
			}()
			opened := make(chan error, 1)
			go func() {
				ss, err := s.NewSession(ctx)
				if err == nil {
					ss.Close()
				}
				opened <- err
			}()
			if tt.running {
				select {
				case <-running:
				case <-ctx.Done():
					t.Fatal("the code did not start")
				}
			} else {
				time.Sleep(tt.offset) // the race under test: Close this long after the first calls
			}
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if tt.running {
				// Admitted before Close, so waited for by it: its worker
				// is reaped, not retired after Close.
				select {
				case err := <-ran:
					t.Logf("the running call: %v", err)
				default:
					t.Error("the running call had not returned when Close did")
					<-ran
				}
				<-opened
			} else {
				// Each got a result, a session or an error, whatever came first.
				t.Logf("the first call: %v; the first session: %v", <-ran, <-opened)
			}

			if _, err := s.Run(ctx, Request{Code: "1 + 1"}); !errors.Is(err, errClosed) {
				t.Errorf("Run after Close: %v, want %v", err, errClosed)
			}
			if _, err := s.NewSession(ctx); !errors.Is(err, errClosed) {
				t.Errorf("NewSession after Close: %v, want %v", err, errClosed)
			}
			if err := s.Warmup(ctx, func(string) {}); !errors.Is(err, errClosed) {
				t.Errorf("Warmup after Close: %v, want %v", err, errClosed)
			}
			s.Start(ctx)

			left, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range left {
				t.Errorf("left after Close: %s", e.Name())
			}
			if listsProcesses {
				if pids := denoChildren(t); len(pids) > 0 {
					t.Errorf("deno processes left after Close: %v", pids)
				}
			}
		})
	}
}

// TestWarmupHoldsTheRuntime: a real supervisor holds the entries of the
// runtime it prepared, from the moment it is ready.
func TestWarmupHoldsTheRuntime(t *testing.T) {
	s := start(t, Config{Workers: 1})
	rt := s.runtime.Files()
	d, err := cachedir.Open(s.cfg.CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, p := range []string{rt.Entry, rt.Pyodide, rt.Snapshot} {
		e, err := d.Entry(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want[e.Name] = true
	}
	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if want[e.Name] {
			if !e.InUse {
				t.Errorf("%s is not held", e.Name)
			}
			delete(want, e.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}
