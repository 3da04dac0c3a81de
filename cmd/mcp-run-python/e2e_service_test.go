package main_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// get fetches path from the server and returns the status and body.
func (tg *target) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(tg.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// waitFor polls path until its body contains want.
func (tg *target) waitFor(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		status, body := tg.get(t, path)
		if status == http.StatusOK && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q after %v, want it to contain %q", path, status, body, startTimeout, want)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling of the server's state
	}
}

// TestE2EServiceEndpoints checks the probes and metrics of the real binary.
func TestE2EServiceEndpoints(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStateful, "--workers", "1")
	if status, body := tg.get(t, "/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", status, body)
	}
	tg.waitFor(t, "/readyz", "")
	tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 1`)

	c := tg.connect(t)
	c.expectRun(t, "print('hi')", "<status>success</status>\n<output>\nhi\n</output>")
	c.expectRun(t, "1/0", "<status>run-error</status>\n<error>\nTraceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n    1/0\n    ~^~\nZeroDivisionError: division by zero\n\n</error>")
	_, body := tg.get(t, "/metrics")
	for _, want := range []string{
		`mcp_run_python_calls_total{status="success"} 1`,
		`mcp_run_python_calls_total{status="run-error"} 1`,
		"mcp_run_python_call_duration_seconds_count 2",
		"mcp_run_python_pool_wait_seconds_count 2",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestE2ESIGTERMDuringCalls stops a server while calls run: it exits 0
// within its shutdown timeout and grace, the calls end, no worker survives.
func TestE2ESIGTERMDuringCalls(t *testing.T) {
	s := setup(t)
	for _, mode := range []string{modeStdio, modeSSE, modeStateful, modeStateless} {
		t.Run(mode, func(t *testing.T) {
			if mode == modeStdio {
				testStdioSIGTERM(t, s)
				return
			}
			tg := startTarget(t, s, mode, "--workers", "2", "--shutdown-timeout", "1s", "--grace", "500ms")
			c := tg.connect(t)
			tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="warm"} 2`)
			calls := make(chan *mcp.CallToolResult, 2)
			for range 2 {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					defer cancel()
					res, _ := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName,
						Arguments: map[string]any{"python_code": "while True: pass"}}})
					calls <- res
				}()
			}
			tg.waitFor(t, "/metrics", `mcp_run_python_workers{state="busy"} 2`)
			workers := denoChildren(t, tg.cmd.Process.Pid)

			start := time.Now()
			if err := stopServer(tg.cmd.Process); err != nil {
				t.Fatal(err)
			}
			select {
			case <-tg.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("no exit within 10s of SIGTERM; stderr:\n%s", tg.stderr)
			}
			if tg.waitErr != nil {
				t.Errorf("exit: %v, want status 0; stderr:\n%s", tg.waitErr, tg.stderr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v to stop, want about the shutdown timeout plus grace (1.5s)", took)
			}
			for range 2 {
				select {
				case <-calls:
				case <-time.After(5 * time.Second):
					t.Error("a call did not end after the server stopped")
				}
			}
			assertGone(t, workers)
		})
	}
}

// testStdioSIGTERM: as TestE2ESIGTERMDuringCalls, for a stdio server.
func testStdioSIGTERM(t *testing.T, s *e2eSetup) {
	tg := startTarget(t, s, modeStdio, "--workers", "1", "--shutdown-timeout", "1s", "--grace", "500ms")
	c := tg.connect(t)
	c.expectWorks(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, _ = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName,
			Arguments: map[string]any{"python_code": "while True: pass"}}})
	}()
	t0 := time.Now()
	var workers []denoChild
	for time.Since(t0) < startTimeout {
		if workers = denoChildren(t, c.pid); len(workers) == 1 && busyWorker(t, c.pid, done) != 0 {
			break
		}
	}
	if p, err := os.FindProcess(c.pid); err != nil {
		t.Fatal(err)
	} else if err := stopServer(p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end within 10s of SIGTERM")
	}
	assertGone(t, workers)
}

// assertGone checks that the worker processes have exited.
func assertGone(t *testing.T, workers []denoChild) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, w := range workers {
		for {
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/stat")
			if err != nil || !strings.Contains(string(stat), "(deno)") {
				break // gone (or the pid was reused by something else)
			}
			if time.Now().After(deadline) {
				t.Errorf("worker %d still exists after the server stopped: %s", w.pid, stat)
				break
			}
			time.Sleep(20 * time.Millisecond) // bounded polling for the exit
		}
	}
}

// TestE2EStdioClientClosedStderr: a client may close its end of the server's
// stderr before the server is done logging, as mcp-go's stdio client does in
// Close. The server must keep serving and exit 0 at the end of stdin, not
// die of SIGPIPE on its next log line.
func TestE2EStdioClientClosedStderr(t *testing.T) {
	s := setup(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // every write to the server's stderr now fails with EPIPE
	defer w.Close()
	// connect's cleanup closes the client and checks the exit status.
	c := startTargetWith(t, s, modeStdio, launch{args: append(s.baseArgs(), "--log-level", "debug"), stderr: w}).connect(t)
	for range 2 {
		c.expectRun(t, "print('hi')", "<status>success</status>\n<output>\nhi\n</output>")
	}
}
