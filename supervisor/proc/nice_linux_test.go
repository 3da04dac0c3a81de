package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// niceOf reads the nice value of thread tid of process pid.
func niceOf(t *testing.T, pid int, tid string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + tid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// After the command name in parentheses: field 19 is the nice value.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBackground(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	if err := Background(pid); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if n := niceOf(t, pid, task.Name()); n != BackgroundNice {
			t.Errorf("thread %s has nice %d, want %d", task.Name(), n, BackgroundNice)
		}
	}
}
