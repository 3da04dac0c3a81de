package supervisor

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// --timeout is the limit of the whole call: a slow download and slow code
// share it, and the result says in which phase it ran out.
func TestOneTimeLimitForTheWholeCall(t *testing.T) {
	const timeout, grace = 4 * time.Second, time.Second
	script := func(name string) string {
		return "# /// script\n# dependencies = ['" + name + "']\n# ///\nimport " + name + "\nprint('running')\nwhile True:\n    pass\n"
	}
	tests := []struct {
		name    string
		delay   time.Duration // of the wheel's download
		status  Status
		message string
	}{
		{"the download takes it all", 6 * time.Second, StatusInstallError,
			"TimeoutError: the call did not finish within 4s: its time ran out while resolving and downloading packages"},
		{"the download takes part and the code the rest", 2500 * time.Millisecond, StatusRunError,
			"TimeoutError: the code did not finish within 4s and was interrupted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := &pt.Repo{}
			// A name of its own per run: the package cache must not have it.
			name := "slowpkg" + strings.ToLower(rand.Text()[:12])
			repo.Add(pt.Wheel{Name: name, Version: "1.0"})
			srv, _ := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, tt.delay)
			s := start(t, Config{Workers: 1, Timeout: timeout, Grace: grace, IndexURL: srv.URL + "/simple/"})
			begin := time.Now()
			res, err := s.Run(context.Background(), Request{Code: script(name)})
			took := time.Since(begin)
			t.Logf("%s in %v: %q", res.Status, took.Round(time.Millisecond), res.Error)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || !strings.Contains(res.Error, tt.message) {
				t.Errorf("got %s %q, want %s with %q", res.Status, res.Error, tt.status, tt.message)
			}
			if took > timeout+grace+time.Second {
				t.Errorf("the call took %v, more than its limit and grace", took)
			}
		})
	}
}

// TestDeadline: on the bubble's clock, a call's limit runs from its start,
// moves by the time the call waited for a worker, and its context ends at
// the limit to the nanosecond; without --timeout nothing ends.
func TestDeadline(t *testing.T) {
	const timeout, waited = 4 * time.Second, 3 * time.Second
	tests := []struct {
		name    string
		timeout time.Duration
		wait    time.Duration // the time the call waited for a worker
		ends    time.Duration // after the start; 0: never
	}{
		{"limit", timeout, 0, timeout},
		{"limit moved by the wait", timeout, waited, timeout + waited},
		{"no limit", 0, waited, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				d := Config{Timeout: tt.timeout}.newDeadline(start)
				d.extend(tt.wait)
				ctx, cancel := d.context(context.Background())
				defer cancel()
				if tt.ends == 0 {
					time.Sleep(24 * time.Hour)
					synctest.Wait()
					if left, ok := d.left(); ok || d.passed() || ctx.Err() != nil {
						t.Errorf("without a limit: left %v %v, passed %v, context %v", left, ok, d.passed(), ctx.Err())
					}
					return
				}
				time.Sleep(tt.ends - time.Nanosecond)
				synctest.Wait()
				if left, ok := d.left(); !ok || left != time.Nanosecond || d.passed() || ctx.Err() != nil {
					t.Errorf("a nanosecond before the limit: left %v %v, passed %v, context %v", left, ok, d.passed(), ctx.Err())
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if left, ok := d.left(); !ok || left != 0 || !d.passed() || ctx.Err() != context.DeadlineExceeded {
					t.Errorf("at the limit: left %v %v, passed %v, context %v", left, ok, d.passed(), ctx.Err())
				}
				if took := time.Since(start); took != tt.ends {
					t.Errorf("the limit came %v after the start, want %v", took, tt.ends)
				}
			})
		})
	}
}

// TestRunClock: on the bubble's clock, a run's limit stands still while
// its code waits for answers and its worker computes nothing, once for
// rounds that wait at once, and fires at the limit moved by the wait; the
// CPU time the worker uses during a wait is charged, and stops the run at
// its limit during the wait. The progress clock stands still while a round
// waits.
func TestRunClock(t *testing.T) {
	const timeout = 4 * time.Second
	type wait struct{ from, to time.Duration } // since the start
	tests := []struct {
		name  string
		waits []wait
		cores float64       // the worker's CPU time: this share of a core since the start
		fires time.Duration // since the start
	}{
		{"no wait", nil, 0, timeout},
		{"one wait", []wait{{time.Second, 3 * time.Second}}, 0, timeout + 2*time.Second},
		{"two waits at once count once", []wait{{time.Second, 3 * time.Second}, {2 * time.Second, 5 * time.Second}}, 0, timeout + 4*time.Second},
		{"one after the other", []wait{{time.Second, 2 * time.Second}, {3 * time.Second, 6 * time.Second}}, 0, timeout + 4*time.Second},
		{"a wait past the limit", []wait{{3 * time.Second, 10 * time.Second}}, 0, timeout + 7*time.Second},
		{"half a core through a wait", []wait{{time.Second, 3 * time.Second}}, 0.5, timeout + time.Second},
		{"a core through a long wait", []wait{{time.Second, time.Hour}}, 1, timeout},
		{"half a core through a long wait", []wait{{time.Second, time.Hour}}, 0.5, time.Second + 2*(timeout-time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Timeout: timeout}
				progress, log := newTestProgress()
				start := time.Now()
				var fired atomic.Int64 // since the start
				cpu := func() (time.Duration, error) { return time.Duration(tt.cores * float64(time.Since(start))), nil }
				clock := cfg.newDeadline(start).start(progress, func() { fired.Store(int64(time.Since(start))) }, cpu)
				var waits sync.WaitGroup
				defer waits.Wait()
				defer clock.stop()
				for _, w := range tt.waits {
					waits.Go(func() {
						time.Sleep(w.from)
						resume := clock.pause()
						time.Sleep(w.to - w.from)
						resume()
						resume() // once only
					})
				}
				time.Sleep(tt.fires - time.Nanosecond)
				synctest.Wait()
				progress.report(ProgressEvent{Phase: PhaseRunning})
				if at := time.Duration(fired.Load()); at != 0 {
					t.Errorf("fired at %v, want %v", at, tt.fires)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if at := time.Duration(fired.Load()); at != tt.fires {
					t.Errorf("fired at %v, want %v", at, tt.fires)
				}
				if evs := log.events(); tt.cores == 0 && (len(evs) != 1 || evs[0].Spent != timeout-time.Nanosecond) {
					t.Errorf("progress %+v: want %v spent a nanosecond before the limit", evs, timeout-time.Nanosecond)
				}
			})
		})
	}
}

// A stopped clock fires no more, even when a wait ends after the run.
func TestRunClockStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Timeout: time.Second}
		var fired atomic.Bool
		clock := cfg.newDeadline(time.Now()).start(nil, func() { fired.Store(true) }, nil)
		resume := clock.pause()
		clock.stop()
		resume()
		time.Sleep(time.Hour)
		synctest.Wait()
		if fired.Load() {
			t.Error("a stopped clock fired")
		}
	})
}
