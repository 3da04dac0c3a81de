// Package proc starts worker processes and ends them, the same way on every
// platform the server runs on.
//
// A worker must never outlive its server, however the server ends. The rule
// that holds everywhere is the worker's own: it reads its stdin until the end
// and exits when that comes, and the server holds the stdin pipe open until it
// retires the worker, so the operating system closes it for the server if the
// server dies. Each platform adds the guard it has: Linux a parent-death
// signal, Windows a job object that kills its processes when the server's
// handle to it closes. macOS has no such guard; the portable rule is its only
// one.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// Options are what Start sets up around the command.
type Options struct {
	// MemoryLimit caps the bytes the process may commit, on platforms whose
	// kernel enforces such a cap on a process (Windows, through its job
	// object); 0 means none. Everywhere else the caller watches Memory.
	MemoryLimit int64
	// PortableOnly leaves out the platform's own guard against outliving the
	// server, so that tests can check the portable rule alone.
	PortableOnly bool
}

// Process is a started worker process.
type Process struct {
	cmd *exec.Cmd
	sys sysProcess // what the platform keeps about it
}

// Start starts cmd with the platform's guards: out of the server's process
// group or console, so that a Ctrl-C in a terminal reaches only the server,
// which then stops its workers in order; and ended with the server where the
// platform can. cmd must not have been started and its SysProcAttr must be
// nil. Its stdin should be a pipe that the caller keeps open for the life of
// the process (see the package documentation).
func Start(cmd *exec.Cmd, o Options) (*Process, error) {
	if cmd.SysProcAttr != nil {
		return nil, errors.New("proc: cmd.SysProcAttr is set by Start")
	}
	cmd.SysProcAttr = sysProcAttr(o)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd}
	sys, err := afterStart(cmd, o)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("set up process %d: %w", cmd.Process.Pid, err)
	}
	p.sys = sys
	return p, nil
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Wait waits for the process to exit and releases what Start set up for it,
// as exec.Cmd.Wait does. It must be called exactly once.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	p.sys.release()
	return err
}

// Kill ends the process at once. It is the only stop a busy Deno worker
// obeys; asking code to stop travels over the bridge instead. Through
// os.Process, which never signals another process that reused the pid of
// one already reaped.
func (p *Process) Kill() error { return p.cmd.Process.Kill() }

// Memory returns the process's resident memory in bytes. It is read with
// gopsutil, which does it on each platform without cgo: /proc on Linux,
// proc_pidinfo from libproc on macOS, GetProcessMemoryInfo on Windows.
func (p *Process) Memory(ctx context.Context) (int64, error) {
	info, err := (&process.Process{Pid: int32(p.Pid())}).MemoryInfoWithContext(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.RSS), nil
}

// CPUTime returns the CPU time the process has used so far, user and
// system, all its threads together. Read with gopsutil as Memory is:
// /proc on Linux, proc_pidinfo on macOS, GetProcessTimes on Windows.
func (p *Process) CPUTime(ctx context.Context) (time.Duration, error) {
	times, err := (&process.Process{Pid: int32(p.Pid())}).TimesWithContext(ctx)
	if err != nil {
		return 0, err
	}
	return time.Duration((times.User + times.System) * float64(time.Second)), nil
}

// Describe says how a process ended, from the error Wait returned: "exit
// status 1", "killed by SIGKILL" or, on Windows, the NTSTATUS of a crash.
func Describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return describeExit(ee)
	}
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// BackgroundNice is the nice value of background work (see Background):
// a process at it gets about a tenth of a core that a process at 0 also
// wants, so a call's worker barely slows, while on a busy machine the
// background work still ends (at 19, the lowest, it got 1.5%: a compile
// waited minutes).
const BackgroundNice = 10
