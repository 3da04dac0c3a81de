package proc

import (
	"os"
	"runtime"
	"slices"
	"testing"
)

func TestThreads(t *testing.T) {
	// The test binary has several threads, each named after it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	names, err := Threads(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 || slices.Contains(names, "") {
		t.Errorf("Threads = %q; want the test's threads, each named", names)
	}
	if _, err := Threads(-1); err == nil {
		t.Error("Threads of no process: no error")
	}
}
