// Package workertest is a worker process for tests, in memory: it lives
// until killed, and uses the memory and CPU time the test sets.
package workertest

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Process is a worker process whose memory and CPU time a test sets.
// Its CPU time grows at spin cores from when spin was set.
type Process struct {
	gone     chan struct{}
	exitOnce sync.Once
	exitErr  error

	mu      sync.Mutex
	memory  int64
	cpu     time.Duration // up to since
	spin    float64
	since   time.Time
	readErr error
}

// NewProcess returns a live process that uses no memory or CPU time.
func NewProcess() *Process {
	return &Process{gone: make(chan struct{}), since: time.Now()}
}

// Pid is a made-up process id.
func (p *Process) Pid() int { return 4242 }

// Wait waits for the process to end.
func (p *Process) Wait() error {
	<-p.gone
	return p.exitErr
}

// Kill ends the process.
func (p *Process) Kill() error {
	p.Exit(errors.New("signal: killed"))
	return nil
}

// Gone is closed once the process has ended.
func (p *Process) Gone() <-chan struct{} { return p.gone }

// Exit ends the process, as its own exit or a kill does.
func (p *Process) Exit(err error) {
	p.exitOnce.Do(func() {
		p.exitErr = err
		close(p.gone)
	})
}

// Memory returns the resident bytes set.
func (p *Process) Memory(context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.memory, p.readErr
}

// CPUTime returns the CPU time used so far.
func (p *Process) CPUTime(context.Context) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cpu + time.Duration(p.spin*float64(time.Since(p.since))), p.readErr
}

// SetMemory sets the resident bytes.
func (p *Process) SetMemory(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.memory = n
}

// SetSpin makes the process use cores from now on.
func (p *Process) SetSpin(cores float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.cpu += time.Duration(p.spin * float64(now.Sub(p.since)))
	p.spin, p.since = cores, now
}

// UseCPU adds d of CPU time at once.
func (p *Process) UseCPU(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cpu += d
}

// FailReads makes the readings of memory and CPU time fail with err.
func (p *Process) FailReads(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readErr = err
}
