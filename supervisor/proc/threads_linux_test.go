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

func TestChanged(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		args []string
		want string
	}{
		{cwd, os.Args, ""},
		{cwd + "/.", os.Args, ""},
		{t.TempDir(), os.Args, "working directory"},
		{cwd, append(slices.Clone(os.Args), "-more"), "command line"},
		{cwd, []string{"title"}, "command line"},
	}
	for _, tt := range tests {
		got, err := Changed(os.Getpid(), tt.dir, tt.args)
		if err != nil || got != tt.want {
			t.Errorf("Changed(self, %s, %q) = %q, %v; want %q", tt.dir, tt.args, got, err, tt.want)
		}
	}
	if _, err := Changed(-1, cwd, os.Args); err == nil {
		t.Error("Changed of no process: no error")
	}
}
