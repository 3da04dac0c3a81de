package proc

import (
	"os"
	"strconv"
	"syscall"
)

// Background lowers the CPU priority of the process pid to BackgroundNice,
// so that its work yields to the others'. On Linux a nice value is a
// thread's, and a new thread takes its creator's: each thread that exists
// is lowered, and those it makes later start low. Best effort: a thread
// that ends meanwhile is skipped.
func Background(pid int) error {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return syscall.Setpriority(syscall.PRIO_PROCESS, pid, BackgroundNice)
	}
	var first error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, BackgroundNice); err != nil && err != syscall.ESRCH && first == nil {
			first = err
		}
	}
	return first
}
