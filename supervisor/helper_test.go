package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/proc"
)

// helperRole is the environment variable that makes this test binary a
// helper process instead of a test run (the os/exec TestHelperProcess
// pattern): a stand-in worker that never connects, or a server to kill.
const helperRole = "SUPERVISOR_TEST_HELPER"

// TestHelperProcess is not a test: see helperRole.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperRole) {
	case "":
		return
	case "worker":
		// Lives until its stdin ends, as a worker does.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "server":
		serveUntilKilled()
	}
	os.Exit(2)
}

// helperCommand returns a command that runs this binary in role.
func helperCommand(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), helperRole+"="+role), env...)
	return cmd
}

// serveUntilKilled is the "server" role: a supervisor whose workers have
// only the portable guard against outliving it (proc.Options.PortableOnly).
// It prints the pid of every worker it starts, then "busy" once a call runs
// (HELPER_CALL=busy) or "idle", and waits to be killed.
func serveUntilKilled() {
	var mu sync.Mutex
	s := New(Config{
		Deno:     os.Getenv("HELPER_DENO"),
		CacheDir: os.Getenv("HELPER_CACHE"),
		Workers:  2,
	}, zap.NewNop())
	s.workers.Launch = func(cmd *exec.Cmd) (worker.Process, error) {
		p, err := proc.Start(cmd, proc.Options{PortableOnly: true})
		if err == nil {
			mu.Lock()
			fmt.Printf("pid %d\n", p.Pid())
			mu.Unlock()
		}
		return p, err
	}
	ctx := context.Background()
	if err := s.Warmup(ctx, func(string) {}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for s.Health().Warm < 2 {
		// Until both workers are warm, so both pids are printed; bounded by
		// the test, which kills this process.
		time.Sleep(20 * time.Millisecond)
	}
	state := "idle"
	if os.Getenv("HELPER_CALL") == "busy" {
		started := make(chan struct{})
		go s.Run(ctx, Request{Code: "print('started')\nwhile True: pass", OnLine: func(Line) { close(started) }})
		<-started
		state = "busy"
	}
	mu.Lock()
	fmt.Println(state)
	mu.Unlock()
	select {}
}

// readPids reads the server role's output up to its state line.
func readPids(t *testing.T, out *bufio.Reader) ([]int, string) {
	t.Helper()
	var pids []int
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("helper server: %v", err)
		}
		var pid int
		if _, err := fmt.Sscanf(line, "pid %d", &pid); err != nil {
			return pids, strings.TrimSpace(line)
		}
		pids = append(pids, pid)
	}
}
