//go:build unix && !linux

package proc

import "syscall"

// Background lowers the CPU priority of the process pid to BackgroundNice,
// so that its work yields to the others'.
func Background(pid int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, pid, BackgroundNice)
}
