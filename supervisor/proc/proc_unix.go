//go:build unix

package proc

import (
	"fmt"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcess is empty on Unix: the kernel's process is all there is.
type sysProcess struct{}

func (sysProcess) release() {}

func sysProcAttr(o Options) *syscall.SysProcAttr {
	// Its own process group: a terminal's Ctrl-C goes to the foreground
	// group, the server's, and not to its workers.
	attr := &syscall.SysProcAttr{Setpgid: true}
	if !o.PortableOnly {
		setParentDeathSignal(attr)
	}
	return attr
}

func afterStart(*exec.Cmd, Options) (sysProcess, error) { return sysProcess{}, nil }

func describeExit(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ee.ExitCode())
}
