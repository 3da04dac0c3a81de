package main_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssOf returns the resident memory of process pid, in bytes, from /proc.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read the status of process %d: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS of process %d: %q: %v", pid, rest, err)
			}
			return kib << 10
		}
	}
	t.Fatalf("process %d: no VmRSS in /proc status", pid)
	return 0
}
