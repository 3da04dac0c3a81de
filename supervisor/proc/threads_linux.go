package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HasThreads reports whether Threads works on this platform.
const HasThreads = true

// Threads returns the names of the threads of process pid, as the kernel
// keeps them: at most 15 bytes each. A thread that ends as they are read is
// left out.
func Threads(pid int) ([]string, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(tasks))
	for _, t := range tasks {
		comm, err := os.ReadFile(filepath.Join(dir, t.Name(), "comm"))
		if err != nil {
			continue // ended meanwhile
		}
		names = append(names, strings.TrimSuffix(string(comm), "\n"))
	}
	return names, nil
}

// Changed says what of process pid differs from how it was started, in dir
// with the command line args: "working directory", "command line" (which a
// process may overwrite, as node's process.title does), or "" for neither.
// Like Threads, it works where HasThreads says so.
func Changed(pid int, dir string, args []string) (string, error) {
	self := filepath.Join("/proc", strconv.Itoa(pid))
	cwd, err := os.Stat(filepath.Join(self, "cwd"))
	if err != nil {
		return "", err
	}
	want, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !os.SameFile(cwd, want) {
		return "working directory", nil
	}
	cmdline, err := os.ReadFile(filepath.Join(self, "cmdline"))
	if err != nil {
		return "", err
	}
	if string(cmdline) != strings.Join(args, "\x00")+"\x00" {
		return "command line", nil
	}
	return "", nil
}
