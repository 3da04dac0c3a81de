//go:build !windows

package main_test

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup prepares cmd so that stopServer can reach it; on Unix a
// signal needs nothing.
func ownProcessGroup(*exec.Cmd) {}

// stopServer asks a server to stop gracefully, as a service manager does:
// SIGTERM.
func stopServer(p *os.Process) error {
	return p.Signal(syscall.SIGTERM)
}
