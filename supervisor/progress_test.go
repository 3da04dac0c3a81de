package supervisor

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// progressLog records a call's progress events.
type progressLog struct {
	mu  sync.Mutex
	evs []ProgressEvent
}

func (l *progressLog) add(ev ProgressEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

func (l *progressLog) events() []ProgressEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// newTestProgress returns the progress of a call that starts now, with a
// one-minute time limit, and its log.
func newTestProgress() (*callProgress, *progressLog) {
	l := &progressLog{}
	return &callProgress{on: l.add, limit: time.Minute, start: time.Now()}, l
}

func TestCallProgressTicksWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := newTestProgress()
		var wg tracker.Tracker
		time.Sleep(300 * time.Millisecond) // resolving
		stop := c.running(&wg)
		time.Sleep(3500 * time.Millisecond)
		stop()
		time.Sleep(5 * time.Second)
		var spent []time.Duration
		for _, ev := range l.events() {
			if ev.Phase != PhaseRunning || ev.Limit != time.Minute {
				t.Errorf("event %+v, want running with the limit", ev)
			}
			spent = append(spent, ev.Spent)
		}
		want := []time.Duration{300 * time.Millisecond, 1300 * time.Millisecond, 2300 * time.Millisecond, 3300 * time.Millisecond}
		if !slices.Equal(spent, want) {
			t.Errorf("spent %v, want %v: one at the start, then one a second, none after stop", spent, want)
		}
		<-wg.Shut()
	})
}

// While its code waits for answers, a running call's ticks say what it
// waits for, until the last round waiting is answered.
func TestCallProgressTicksWhileAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := newTestProgress()
		var wg tracker.Tracker
		stop := c.running(&wg)
		time.Sleep(1500 * time.Millisecond)
		first := c.waiting(ProgressEvent{Asking: AskingModel, Questions: 1, Asked: 1})
		time.Sleep(time.Second)
		second := c.waiting(ProgressEvent{Asking: AskingPerson, Questions: 1, Asked: 2})
		first()
		first()
		time.Sleep(time.Second)
		second()
		time.Sleep(time.Second)
		stop()
		var got []string
		for _, ev := range l.events() {
			got = append(got, string(ev.Phase)+" "+ev.Asking)
		}
		want := []string{"running ", "running ", "asking the model", "asking the model", "asking the person", "asking the person", "running "}
		if !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
		<-wg.Shut()
	})
}

func TestCallProgressClockStopsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := newTestProgress()
		time.Sleep(time.Second)
		done := c.wait()
		time.Sleep(10 * time.Second)
		c.queued(1)
		done()
		time.Sleep(time.Second)
		c.Resolving([]string{"numpy"})
		evs := l.events()
		if len(evs) != 2 || evs[0].Spent != time.Second || evs[0].Place != 1 || evs[1].Spent != 2*time.Second {
			t.Errorf("events %+v, want queued at 1s and resolving at 2s: the wait does not count", evs)
		}
	})
}

func TestCallProgressOfNobody(t *testing.T) {
	var c *callProgress
	c.queued(1)
	c.Installing(nil)
	c.wait()()
	c.running(&tracker.Tracker{})()
	if c.preparing() != nil || c.Transfer() != nil {
		t.Error("a call without OnProgress has listeners")
	}
	var installs install.Progress = c // as the pipeline hands it to the installs
	installs.Resolving([]string{"numpy"})
}

func TestDistribution(t *testing.T) {
	for file, want := range map[string]string{
		"numpy-2.2.5-cp313-cp313-pyodide_2025_0_wasm32.whl": "numpy",
		"typing_extensions-4.12.2-py3-none-any.whl":         "typing_extensions",
		"openssl-1.1.1n.zip":                                "openssl",
		"plain":                                             "plain",
	} {
		if got := distribution(file); got != want {
			t.Errorf("distribution(%q) = %q, want %q", file, got, want)
		}
	}
}

func TestCallProgressKeepsTheServersPathsPrivate(t *testing.T) {
	c, l := newTestProgress()
	c.private = "/srv/cache"
	hear := c.preparing()
	for _, step := range []string{"deno 2.9.6", "making the Pyodide memory snapshot", "runtime ready in /srv/cache"} {
		hear(step)
	}
	var steps []string
	for _, ev := range l.events() {
		steps = append(steps, ev.Step)
	}
	if want := []string{"deno 2.9.6", "making the Pyodide memory snapshot"}; !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q", steps, want)
	}
}

// phasesOf returns the phases of evs, each run of one phase once.
func phasesOf(evs []ProgressEvent) []ProgressPhase {
	var out []ProgressPhase
	for _, ev := range evs {
		if len(out) == 0 || out[len(out)-1] != ev.Phase {
			out = append(out, ev.Phase)
		}
	}
	return out
}

// A call reports its steps as it goes through them.
func TestPipelineReportsProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		code string
		want []ProgressPhase
	}{
		{"no imports", "1", []ProgressPhase{PhaseRunning}},
		{"imports a package", "import tinypkg\n", []ProgressPhase{PhaseResolving, PhaseDownloading, PhaseInstalling, PhaseRunning}},
		{"a script", "# /// script\n# dependencies = [\"tinypkg\"]\n# ///\nimport tinypkg\n", []ProgressPhase{PhaseResolving, PhaseDownloading, PhaseInstalling, PhaseRunning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := memSupervisor(t, Config{Timeout: time.Minute}, testRepo())
			var l progressLog
			if _, err := s.serve(context.Background(), Request{Code: tc.code, OnProgress: l.add}, &memPool{t: t, srv: srv}); err != nil {
				t.Fatal(err)
			}
			evs := l.events()
			if got := phasesOf(evs); !slices.Equal(got, tc.want) {
				t.Errorf("phases %v, want %v", got, tc.want)
			}
			for i, ev := range evs {
				if ev.Limit != time.Minute || (i > 0 && ev.Spent < evs[i-1].Spent) {
					t.Errorf("event %d %+v: want the limit, and time that does not go back", i, ev)
				}
				switch ev.Phase {
				case PhaseResolving, PhaseInstalling:
					if !slices.Contains(ev.Packages, "tinypkg") {
						t.Errorf("event %+v: want tinypkg", ev)
					}
				case PhaseDownloading:
					if ev.File != tinyWheel || ev.Size <= 0 {
						t.Errorf("event %+v: want %s with its size", ev, tinyWheel)
					}
				}
			}
		})
	}
}
