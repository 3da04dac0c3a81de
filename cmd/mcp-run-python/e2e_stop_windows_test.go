//go:build windows

package main_test

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// ownProcessGroup starts cmd in a process group of its own, so that
// stopServer's Ctrl-Break reaches the server and not this test.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
}

// stopServer asks a server to stop gracefully. Windows has no SIGTERM
// (os.Process.Signal sends only Kill there); the server stops on Ctrl-Break
// to its process group (main.go), which ownProcessGroup gave it.
func stopServer(p *os.Process) error {
	return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.Pid))
}
