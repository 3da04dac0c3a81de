package supervisor

import (
	"strings"
	"sync"
	"time"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// ProgressPhase names what a call is doing while its client waits.
type ProgressPhase string

// The phases of a call, in the order a call meets them; the package phases
// may come again, once per round of installs (see install.Installer.FromImports).
const (
	// PhasePreparing: the call waits for the runtime (the server's first
	// calls) or for its interpreter to be restored from the snapshot.
	PhasePreparing ProgressPhase = "preparing"
	// PhaseQueued: the call waits for a free worker.
	PhaseQueued ProgressPhase = "queued"
	// PhaseResolving: the call's requirements are being resolved.
	PhaseResolving ProgressPhase = "resolving"
	// PhaseDownloading: a package file is being downloaded.
	PhaseDownloading ProgressPhase = "downloading"
	// PhaseInstalling: package files are being installed in the interpreter.
	PhaseInstalling ProgressPhase = "installing"
	// PhaseRunning: the code runs.
	PhaseRunning ProgressPhase = "running"
	// PhaseAsking: the code waits for the answers to its questions (see
	// Ask); its time limit stands still meanwhile.
	PhaseAsking ProgressPhase = "asking"
)

// Whom the code of a call waits for (ProgressEvent.Asking).
const (
	AskingModel  = "the model"
	AskingPerson = "the person"
)

// ProgressEvent is one report of a call's progress (Request.OnProgress).
type ProgressEvent struct {
	Phase ProgressPhase
	// Spent is the time the call has counted against its time limit so
	// far: all of its time but the waits for a free worker.
	Spent time.Duration
	// Limit is the call's time limit (--timeout); 0 for none.
	Limit time.Duration
	// Step says what the runtime's preparation is doing (PhasePreparing).
	Step string
	// Place is the call's place in the queue, 1 for the next to be
	// served (PhaseQueued).
	Place int
	// File is the file being downloaded, Bytes how much of it has come and
	// Size its size, 0 when unknown (PhaseDownloading).
	File        string
	Bytes, Size int64
	// Packages are the requirements being resolved (PhaseResolving) or the
	// packages being installed (PhaseInstalling).
	Packages []string
	// Asking is whom the code waits for, AskingModel or AskingPerson;
	// Questions are those of the round waiting, Asked those the call has
	// asked so far, the round's included, and AskLimit the most it may
	// ask, 0 for no limit (PhaseAsking).
	Asking                     string
	Questions, Asked, AskLimit int
}

// progressTick is how often a running call reports the time it spent.
const progressTick = time.Second

// callProgress reports one call's progress to its Request.OnProgress. Its
// methods do nothing on a nil *callProgress: a call without OnProgress has
// none, and the code that reports need not ask.
//
// It reaches the steps that report (the pool's queue, the installs) one
// way: handed to them, as the pipeline's progress (an install.Progress to
// the installs).
type callProgress struct {
	on    func(ProgressEvent)
	limit time.Duration
	// private is the server's cache directory: a step of the runtime's
	// preparation that names it is the operator's business, not a
	// client's.
	private string
	start   time.Time

	// mu orders the reports: downloads report from goroutines of their
	// own, and OnProgress is promised one event at a time.
	mu     sync.Mutex
	paused time.Time     // when the current wait (for a worker, or answers) began; zero when none
	waited time.Duration // the waits that ended
	// asking is what the running code waits for, reported on the ticks
	// instead of PhaseRunning while asks is not 0: the rounds waiting.
	asking ProgressEvent
	asks   int
}

// newCallProgress returns the progress of a call of req that started at
// start, or nil if req wants none.
func (c Config) newCallProgress(req Request, start time.Time) *callProgress {
	if req.OnProgress == nil {
		return nil
	}
	return &callProgress{on: req.OnProgress, limit: max(c.Timeout, 0), private: c.CacheDir, start: start}
}

// report sends ev with the time spent so far.
func (c *callProgress) report(ev ProgressEvent) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ev.Spent, ev.Limit = c.spentLocked(time.Now()), c.limit
	c.on(ev)
}

// spentLocked is the time spent at now, without the waits for a worker.
// c.mu must be held.
func (c *callProgress) spentLocked(now time.Time) time.Duration {
	if !c.paused.IsZero() {
		now = c.paused
	}
	return max(now.Sub(c.start)-c.waited, 0)
}

// wait stops the clock while the call waits for a worker, or for answers,
// as its time limit stops (see deadline); the returned function starts it
// again.
func (c *callProgress) wait() (done func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = time.Now()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.waited += time.Since(c.paused)
		c.paused = time.Time{}
	}
}

// preparing returns the listener of the runtime's preparation steps, or nil.
func (c *callProgress) preparing() func(string) {
	if c == nil {
		return nil
	}
	return func(step string) {
		if c.private == "" || !strings.Contains(step, c.private) {
			c.report(ProgressEvent{Phase: PhasePreparing, Step: step})
		}
	}
}

// restoring reports the wait for the call's interpreter, which a worker
// on standby restores from the snapshot as it takes the call.
func (c *callProgress) restoring() {
	c.report(ProgressEvent{Phase: PhasePreparing, Step: "restoring the interpreter from the snapshot"})
}

// queued reports the call's place in the queue.
func (c *callProgress) queued(place int) {
	c.report(ProgressEvent{Phase: PhaseQueued, Place: place})
}

// Resolving reports the requirements being resolved.
func (c *callProgress) Resolving(reqs []string) {
	c.report(ProgressEvent{Phase: PhaseResolving, Packages: reqs})
}

// downloading reports how much of a file has come; it is the package
// cache's transfer callback.
func (c *callProgress) downloading(file string, bytes, size int64) {
	c.report(ProgressEvent{Phase: PhaseDownloading, File: file, Bytes: bytes, Size: size})
}

// Transfer returns the package cache's Transfer callback, or nil.
func (c *callProgress) Transfer() func(file string, bytes, size int64) {
	if c == nil {
		return nil
	}
	return c.downloading
}

// Installing reports the packages of wheels being installed.
func (c *callProgress) Installing(wheels []bridge.Payload) {
	if c == nil || len(wheels) == 0 {
		return
	}
	names := make([]string, len(wheels))
	for i, w := range wheels {
		names[i] = distribution(w.Name)
	}
	c.report(ProgressEvent{Phase: PhaseInstalling, Packages: names})
}

// distribution is the project a package file is of: a wheel's name starts
// with it, up to the first dash (PEP 427), and so do Pyodide's other files.
func distribution(filename string) string {
	name, _, _ := strings.Cut(filename, "-")
	return name
}

// running reports the code running, at once and then every progressTick
// until the returned function is called; once it returns, nothing more is
// reported. The ticks run on a goroutine that wg counts.
func (c *callProgress) running(wg *tracker.Tracker) (stop func()) {
	if c == nil {
		return func() {}
	}
	c.report(ProgressEvent{Phase: PhaseRunning})
	quit, done := make(chan struct{}), make(chan struct{})
	if !wg.Go(func() {
		defer close(done)
		tick := time.NewTicker(progressTick)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				c.tick()
			case <-quit:
				return
			}
		}
	}) {
		close(done)
	}
	return func() {
		close(quit)
		<-done
	}
}

// tick reports the running code: what it waits for, if it waits for
// answers.
func (c *callProgress) tick() {
	c.mu.Lock()
	ev := ProgressEvent{Phase: PhaseRunning}
	if c.asks > 0 {
		ev = c.asking
	}
	c.mu.Unlock()
	c.report(ev)
}

// waiting reports a round of questions, ev, waiting for its answers, at
// once and on every tick until the returned function is called.
func (c *callProgress) waiting(ev ProgressEvent) (answered func()) {
	if c == nil {
		return func() {}
	}
	ev.Phase = PhaseAsking
	c.mu.Lock()
	c.asking = ev
	c.asks++
	c.mu.Unlock()
	c.report(ev)
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.asks--
	})
}
