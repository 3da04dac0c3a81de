package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// killPid kills a process from outside, as a user or the OOM killer would.
func killPid(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// testDeno finds deno as the Makefile does; these tests need the real thing.
func testDeno(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MCP_RUN_PYTHON_DENO"); d != "" {
		return d
	}
	if d, err := exec.LookPath("deno"); err == nil {
		return d
	}
	d := filepath.Join(os.Getenv("HOME"), ".deno", "bin", "deno")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("deno not found: run `make test`, which installs it (%v)", err)
	}
	return d
}

// testCache is shared by all tests so Pyodide is downloaded once.
func testCache(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MCP_RUN_PYTHON_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "mcp-run-python")
}

func start(t *testing.T, cfg Config, opts ...zaptest.LoggerOption) *Supervisor {
	t.Helper()
	cfg.Deno = testDeno(t)
	if cfg.CacheDir == "" {
		cfg.CacheDir = testCache(t)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	s := New(cfg, zaptest.NewLogger(t, opts...))
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if left := denoChildren(t); len(left) > 0 {
			t.Errorf("deno processes left after Close: %v", left)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Warmup(ctx, func(step string) { t.Log(step) }); err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s *Supervisor, code string) (bridge.Result, []bridge.Line) {
	t.Helper()
	var lines []bridge.Line
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, code, func(l bridge.Line) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return res, lines
}

func TestRun(t *testing.T) {
	s := start(t, Config{Workers: 2, OutputLimit: 1 << 20, MemoryLimit: 1 << 30})
	tests := []struct {
		name, code string
		status     bridge.Status
		value      string // ReturnValue bytes
		isString   bool
		output     []string
		errPrefix  string
	}{
		{name: "value", code: "x = 4\nprint(f'{x=}')\nx", status: "success", value: "4", output: []string{"x=4"}},
		{name: "string", code: "'a\\nb'", status: "success", value: `"a\nb"`, isString: true},
		{name: "none", code: "x = 1", status: "success"},
		{name: "last line without newline", code: "print('a'); print('b', end='')", status: "success", output: []string{"a", "b"}},
		{name: "interleaved", code: "import sys\nprint(1)\nprint(2, file=sys.stderr)\nprint(3)", status: "success", output: []string{"1", "2", "3"}},
		{name: "error", code: "1/0", status: "run-error", errPrefix: "Traceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n"},
		{name: "sys.exit", code: "import sys; sys.exit(3)", status: "run-error", errPrefix: "Traceback"},
		{name: "os._exit", code: "print('bye'); import os; os._exit(3)", status: "run-error", output: []string{"bye"},
			errPrefix: "RuntimeError: the Python worker stopped while running the code (the interpreter exited with status 3)"},
		{name: "no host files", code: "import js\njs.Deno.readTextFileSync('/etc/passwd')", status: "run-error", errPrefix: "Traceback"},
		{name: "no environment", code: "import js\njs.Deno.env.get('HOME')", status: "run-error", errPrefix: "Traceback"},
		{name: "no writes", code: "import js\njs.Deno.writeTextFileSync('/tmp/mcp-run-python-probe', 'x')", status: "run-error", errPrefix: "Traceback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, lines := run(t, s, tt.code)
			if res.Status != tt.status {
				t.Fatalf("status %s, want %s (error %q)", res.Status, tt.status, res.Error)
			}
			if string(res.ReturnValue) != tt.value || res.ReturnString != tt.isString {
				t.Errorf("value %q (string %v), want %q (%v)", res.ReturnValue, res.ReturnString, tt.value, tt.isString)
			}
			if strings.Join(res.Output, "\n") != strings.Join(tt.output, "\n") || len(lines) != len(tt.output) {
				t.Errorf("output %q, lines %v, want %q", res.Output, lines, tt.output)
			}
			if !strings.HasPrefix(res.Error, tt.errPrefix) {
				t.Errorf("error %q, want prefix %q", res.Error, tt.errPrefix)
			}
		})
	}
	if _, err := os.Stat("/tmp/mcp-run-python-probe"); err == nil {
		t.Error("user code wrote a host file")
	}
}

func TestLimits(t *testing.T) {
	// The grace is long enough for a loaded machine to run a traceback.
	s := start(t, Config{Workers: 2, Timeout: 2 * time.Second, Grace: 2 * time.Second, OutputLimit: 100, MemoryLimit: 400 << 20})
	tests := []struct {
		name, code string
		error      string // exact, or a prefix when it ends with "…"
		output     []string
	}{
		{
			name: "time: interrupted",
			code: "print('started')\nwhile True: pass",
			error: "Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    while True: pass\n                ^^^^\n" +
				"TimeoutError: the code did not finish within 2s and was interrupted\n",
			output: []string{"started"},
		},
		{
			// The interrupt is repeated during the grace, as a second Ctrl-C.
			name: "time: first KeyboardInterrupt caught",
			code: "try:\n    while True: pass\nexcept KeyboardInterrupt:\n    print('caught')\nwhile True: pass",
			error: "Traceback (most recent call last):\n  File \"main.py\", line 5, in <module>\n    while True: pass\n                ^^^^\n" +
				"TimeoutError: the code did not finish within 2s and was interrupted\n",
			output: []string{"caught"},
		},
		{
			name:   "time: KeyboardInterrupt ignored",
			code:   "print('stubborn')\nwhile True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        pass",
			error:  "TimeoutError: the code did not finish within 2s and was killed with its worker",
			output: []string{"stubborn"},
		},
		{
			name:  "memory",
			code:  "x = bytearray(600 * 2**20)\nwhile True: pass",
			error: "MemoryError: the code used more than 400 MiB of memory and was killed with its worker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := run(t, s, tt.code)
			if res.Status != bridge.StatusRunError || res.Error != tt.error {
				t.Fatalf("got %s %q, want run-error %q", res.Status, res.Error, tt.error)
			}
			if strings.Join(res.Output, "\n") != strings.Join(tt.output, "\n") {
				t.Errorf("output %q, want %q", res.Output, tt.output)
			}
		})
	}
	t.Run("output", func(t *testing.T) {
		res, lines := run(t, s, "for i in range(100): print('x' * 9)")
		if res.Status != bridge.StatusSuccess || len(res.Output) != 11 {
			t.Fatalf("got %s with %d lines, want success with 10 lines and a marker", res.Status, len(res.Output))
		}
		if want := "[output truncated: 900 bytes more was printed than the 100 bytes limit]"; res.Output[10] != want {
			t.Errorf("marker %q, want %q", res.Output[10], want)
		}
		if len(lines) != 11 {
			t.Errorf("%d lines streamed, want 11", len(lines))
		}
	})
	// Every limit leaves the pool serving.
	if res, _ := run(t, s, "1+1"); string(res.ReturnValue) != "2" {
		t.Errorf("after the limits: %+v", res)
	}
}

func TestKilledWorkerGivesRunError(t *testing.T) {
	s := start(t, Config{Workers: 1})
	started := make(chan struct{}, 1)
	var res bridge.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = s.Run(context.Background(), "print('looping')\nwhile True: pass", func(bridge.Line) { started <- struct{}{} })
	}()
	<-started
	// With one slot, the busy worker is the only deno process we started:
	// the slot starts the next one only once this one is gone.
	pids := denoChildren(t)
	if len(pids) != 1 {
		t.Fatalf("deno children %v, want exactly the busy worker", pids)
	}
	killPid(t, pids[0])
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end after its worker was killed")
	}
	if err != nil || res.Status != bridge.StatusRunError || !strings.Contains(res.Error, "killed") {
		t.Errorf("got %s %q (err %v), want run-error naming the kill", res.Status, res.Error, err)
	}
	if r, _ := run(t, s, "'next'"); r.Status != bridge.StatusSuccess {
		t.Errorf("the next call: %+v", r)
	}
}

func TestParallelCallsAreIsolated(t *testing.T) {
	s := start(t, Config{Workers: 2})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			code := "import builtins\nseen = getattr(builtins, 'marker', None)\nbuiltins.marker = 1\nseen"
			res, _ := run(t, s, code)
			if res.Status != bridge.StatusSuccess || res.ReturnValue != nil {
				t.Errorf("call %d saw state of another call: %+v", i, res)
			}
		})
	}
	wg.Wait()
}

func TestDamagedSnapshotFallsBackToAPlainLoad(t *testing.T) {
	cache := t.TempDir()
	// Share the downloaded Pyodide; everything else in this cache is new.
	if err := os.Symlink(filepath.Join(testCache(t), "pyodide"), filepath.Join(cache, "pyodide")); err != nil {
		t.Fatal(err)
	}
	first := start(t, Config{Workers: 1, CacheDir: cache})
	snaps, _ := filepath.Glob(filepath.Join(cache, "snapshots", "*.bin"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v, want one", snaps)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snaps[0], []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}

	s := start(t, Config{Workers: 1, CacheDir: cache})
	res, lines := run(t, s, "print('plain')\n6 * 7")
	if res.Status != bridge.StatusSuccess || string(res.ReturnValue) != "42" || len(lines) != 1 {
		t.Fatalf("after a damaged snapshot: %+v", res)
	}
	// The supervisor remakes the snapshot, and workers restore from it again.
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(snaps[0]); err == nil && len(b) > 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the damaged snapshot was not remade")
		}
		time.Sleep(50 * time.Millisecond) // bounded polling for the new file
	}
}

func TestOutputBombsAreCutAtTheSource(t *testing.T) {
	s := start(t, Config{Workers: 1, OutputLimit: 1 << 10})
	tests := []struct {
		name, code string
		kept       int
		marker     string
	}{
		{"one huge line", "print('x' * 100_000_000)\nprint('never')", 0,
			"[output truncated: 100000007 bytes more was printed than the 1 KiB limit]"},
		{"many lines", "for _ in range(100_000): print('y' * 9)", 102,
			"[output truncated: 998980 bytes more was printed than the 1 KiB limit]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, lines := run(t, s, tt.code)
			if res.Status != bridge.StatusSuccess || len(res.Output) != tt.kept+1 || len(lines) != tt.kept+1 {
				t.Fatalf("got %s with %d lines (%d streamed), want success with %d and a marker: %q", res.Status, len(res.Output), len(lines), tt.kept, res.Error)
			}
			if got := res.Output[tt.kept]; got != tt.marker {
				t.Errorf("marker %q, want %q", got, tt.marker)
			}
		})
	}
}
