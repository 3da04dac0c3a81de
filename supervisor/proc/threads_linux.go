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
