package supervisor

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker/workertest"
)

// fakeSession is a session of s on a fake process, watched by its watcher.
// It must be called in a synctest bubble, and ended by the test.
func fakeSession(t *testing.T, s *Supervisor) (*Session, *workertest.Process) {
	t.Helper()
	p := workertest.NewProcess()
	w := worker.New(new(tracker.Tracker), p, io.NopCloser(nil), strings.NewReader(""), zap.NewNop(), func() {})
	ss, err := s.addSession(w)
	if err != nil {
		t.Fatal(err)
	}
	return ss, p
}

// ended reports whether ss has ended, after everything in the bubble has
// had its turn.
func ended(ss *Session) bool {
	synctest.Wait()
	select {
	case <-ss.Done():
		return true
	default:
		return false
	}
}

// inCall runs f while ss's turn is held, as a call holds it.
func inCall(ss *Session, f func()) {
	_ = ss.take(context.Background())
	f()
	<-ss.turn
}

// TestSessionWatchBetweenCalls drives a session's watcher through fake
// readings, in fake time.
func TestSessionWatchBetweenCalls(t *testing.T) {
	const limit = 400 << 20
	tests := []struct {
		name   string
		cfg    Config
		script func(t *testing.T, ss *Session, p *workertest.Process) // returns with the session still live
		// want is what Err says once the session ends after the script
		// ("" for a session that must live on).
		want []string
	}{{
		name: "memory over the limit while idle",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			time.Sleep(time.Second)
			p.SetMemory(limit + 1<<20)
		},
		want: []string{"killed between calls", "used 401 MiB of memory, more than the 400 MiB limit"},
	}, {
		name: "memory over during a call is the call's to stop",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			inCall(ss, func() {
				p.SetMemory(limit * 2)
				time.Sleep(time.Second)
				if ended(ss) {
					t.Fatal("the watcher ended the session while a call ran")
				}
			})
			// Still over once the call is done: ended between calls.
		},
		want: []string{"used 800 MiB of memory"},
	}, {
		name: "a core used while idle",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.SetSpin(1)
			// At 10% of a core, 1 s of CPU time at once.
			time.Sleep(900 * time.Millisecond)
			if ended(ss) {
				t.Fatalf("ended after 0.9 s of CPU time: %v", ss.Err())
			}
		},
		want: []string{"killed between calls", "used 1.", "s of CPU time while no call ran, within the last 1.", "0.1 of a core on average, 1s at once"},
	}, {
		name: "a core used between calls that come often",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.SetSpin(1)
			// Calls neither refill the budget nor end its count.
			for range 20 {
				time.Sleep(300 * time.Millisecond)
				if ended(ss) {
					return
				}
				inCall(ss, func() {})
			}
		},
		want: []string{"killed between calls", "s of CPU time while no call ran, within the last"},
	}, {
		name: "below the share for a long time",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.SetSpin(0.09)
			time.Sleep(10 * time.Minute)
		},
	}, {
		name: "the CPU time of calls is not counted",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			for range 100 {
				// A long call, watched by its own limits, and a quick one
				// between two readings.
				inCall(ss, func() {
					p.SetSpin(1)
					time.Sleep(2 * time.Second)
					p.SetSpin(0)
				})
				time.Sleep(300 * time.Millisecond)
				inCall(ss, func() { p.UseCPU(2 * time.Second) })
				time.Sleep(300 * time.Millisecond)
			}
		},
	}, {
		name: "bursts within the budget",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			for range 60 {
				p.UseCPU(900 * time.Millisecond)
				time.Sleep(10 * time.Second)
			}
		},
	}, {
		name: "the worker ends while idle",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.Exit(errors.New("exit status 3"))
		},
		want: []string{"its worker ended while idle (exit status 3)"},
	}, {
		name: "no bounds",
		cfg:  Config{SessionIdleCPU: -1},
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.SetMemory(1 << 40)
			p.SetSpin(4)
			time.Sleep(time.Minute)
		},
	}, {
		name: "readings that fail enforce nothing and end nothing",
		script: func(t *testing.T, ss *Session, p *workertest.Process) {
			p.FailReads(errors.New("no such process"))
			p.SetMemory(limit * 2)
			time.Sleep(time.Minute)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.SessionIdleCPU == 0 { // every case but "no bounds" has both
				cfg.MemoryLimit, cfg.SessionIdleCPU = limit, 0.1
			}
			s := New(cfg, zap.NewNop())
			synctest.Test(t, func(t *testing.T) {
				ss, p := fakeSession(t, s)
				defer ss.Close()
				tt.script(t, ss, p)
				time.Sleep(time.Second)
				if len(tt.want) == 0 {
					if ended(ss) {
						t.Fatalf("the session ended: %v", ss.Err())
					}
					return
				}
				if !ended(ss) {
					t.Fatal("the session is still live")
				}
				select {
				case <-p.Gone():
				default:
					t.Error("the session ended and its worker lives on")
				}
				err := ss.Err()
				if !errors.Is(err, ErrSessionLost) {
					t.Fatalf("Err() = %v, want ErrSessionLost", err)
				}
				for _, want := range tt.want {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Err() = %q, want %q in it", err, want)
					}
				}
				// The next call says why too.
				_, runErr := ss.Run(context.Background(), Request{Code: "1"})
				if !errors.Is(runErr, ErrSessionLost) || !strings.Contains(runErr.Error(), tt.want[0]) {
					t.Errorf("next call: %v, want ErrSessionLost saying %q", runErr, tt.want[0])
				}
			})
			if n := s.sessions.count(); n != 0 {
				t.Errorf("%d sessions live after the test, want 0", n)
			}
		})
	}
}

// A closed session is not lost: Err stays nil.
func TestSessionClosedIsNotLost(t *testing.T) {
	s := New(Config{MemoryLimit: 1 << 30}, zap.NewNop())
	synctest.Test(t, func(t *testing.T) {
		ss, p := fakeSession(t, s)
		ss.Close()
		if !ended(ss) {
			t.Fatal("Done is open after Close")
		}
		<-p.Gone()
		if err := ss.Err(); err != nil {
			t.Errorf("Err() = %v after Close, want nil", err)
		}
	})
}
