package proc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHelperProcess is not a test: the tests below start this test binary
// as a worker stand-in, in the role that PROC_TEST_HELPER names.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("PROC_TEST_HELPER") {
	case "":
		return
	case "exit3":
		os.Exit(3)
	case "hold":
		// Hold 64 MiB, touched so that it is resident, until stdin ends.
		held := make([]byte, 64<<20)
		for i := range held {
			held[i] = 1
		}
		os.Stdout.WriteString("holding\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		runtime.KeepAlive(held)
		os.Exit(0)
	case "spin":
		// Use a core until stdin ends.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
		os.Stdout.WriteString("spinning\n")
		for {
		}
	default: // "stdin": live until stdin ends, as a worker does
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
}

// helper starts this binary in a helper role, with its stdin as a pipe.
func helper(t *testing.T, role string) (*Process, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "PROC_TEST_HELPER="+role)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p, stdin, stdout
}

// wait waits for p to end, failing the test if it takes long.
func wait(t *testing.T, p *Process) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		t.Fatal("the process did not end")
		return nil
	}
}

func TestHowAProcessEnded(t *testing.T) {
	killed := "killed by SIGKILL"
	if runtime.GOOS == "windows" {
		killed = "exit status 1" // TerminateProcess's code, as os.Process.Kill uses it
	}
	tests := []struct {
		name, role string
		kill       bool
		want       string
	}{
		{"its stdin ended", "stdin", false, "exit status 0"},
		{"it exited", "exit3", false, "exit status 3"},
		{"it was killed", "stdin", true, killed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, stdin, _ := helper(t, tt.role)
			if tt.kill {
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
			} else {
				stdin.Close()
			}
			if got := Describe(wait(t, p)); got != tt.want {
				t.Errorf("Describe = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	p, stdin, stdout := helper(t, "hold")
	defer func() {
		stdin.Close()
		wait(t, p)
	}()
	line := make([]byte, len("holding\n"))
	if _, err := io.ReadFull(stdout, line); err != nil {
		t.Fatal(err)
	}
	rss, err := p.Memory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 64<<20 || rss > 1<<30 {
		t.Errorf("Memory = %d bytes, want the 64 MiB the process holds and not much more", rss)
	}
}

func TestCPUTime(t *testing.T) {
	p, stdin, stdout := helper(t, "spin")
	defer func() {
		stdin.Close()
		wait(t, p)
	}()
	line := make([]byte, len("spinning\n"))
	if _, err := io.ReadFull(stdout, line); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := p.CPUTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The process spins: its CPU time grows, by no more than the time
	// passed on its one spinning thread (and a little for the runtime's).
	start := time.Now()
	var used time.Duration
	for used < 200*time.Millisecond && time.Since(start) < 10*time.Second {
		time.Sleep(50 * time.Millisecond)
		now, err := p.CPUTime(ctx)
		if err != nil {
			t.Fatal(err)
		}
		used = now - first
	}
	if passed := time.Since(start); used < 200*time.Millisecond || used > 2*passed+100*time.Millisecond {
		t.Errorf("CPUTime grew by %v in %v of spinning, want at least 200ms and about the time passed", used, passed)
	}
}

func TestStartKeepsItsOwnAttributes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.SysProcAttr = sysProcAttr(Options{})
	if _, err := Start(cmd, Options{}); err == nil || !strings.Contains(err.Error(), "SysProcAttr") {
		t.Errorf("Start with SysProcAttr set: %v, want a refusal", err)
	}
}
