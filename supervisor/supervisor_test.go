package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dustin/go-humanize"

	"github.com/mcp-run-python/mcp-run-python/supervisor/denotest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
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

// testDeno is the deno these tests need; they are not run with -short.
func testDeno(t *testing.T) string {
	t.Helper()
	return denotest.Deno(t)
}

// testCache is shared by all tests so Pyodide is downloaded once.
func testCache(t *testing.T) string {
	t.Helper()
	d, err := denotest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// oneCallPerProcess makes each of s's worker processes serve one call, as
// where threads cannot be counted (see worker/recycle.go): for tests of what a
// worker process's start does. Before s's first call.
func oneCallPerProcess(s *Supervisor) {
	s.pool.StopRecycling()
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
		if !listsProcesses {
			return
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

func run(t *testing.T, s *Supervisor, code string) (Result, []Line) {
	t.Helper()
	var lines []Line
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, Request{Code: code, OnLine: func(l Line) { lines = append(lines, l) }})
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return res, lines
}

func TestRun(t *testing.T) {
	s := start(t, Config{Workers: 2, OutputLimit: 1 << 20, MemoryLimit: 1 << 30})
	tests := []struct {
		name, code string
		status     Status
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
			name: "memory",
			// Every byte written, so that the pages count as resident at
			// once even on a loaded machine.
			code:  "x = b'x' * (600 * 2**20)\nwhile True: pass",
			error: "MemoryError: the code used more than 400 MiB of memory and was killed with its worker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := run(t, s, tt.code)
			if res.Status != StatusRunError || res.Error != tt.error {
				t.Fatalf("got %s %q, want run-error %q", res.Status, res.Error, tt.error)
			}
			if strings.Join(res.Output, "\n") != strings.Join(tt.output, "\n") {
				t.Errorf("output %q, want %q", res.Output, tt.output)
			}
		})
	}
	t.Run("output", func(t *testing.T) {
		res, lines := run(t, s, "for i in range(100): print('x' * 9)")
		if res.Status != StatusSuccess || len(res.Output) != 11 {
			t.Fatalf("got %s with %d lines, want success with 10 lines and a marker", res.Status, len(res.Output))
		}
		if want := "[output truncated: 900 B more was printed than the 100 B limit]"; res.Output[10] != want {
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
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = s.Run(context.Background(), Request{Code: "print('looping')\nwhile True: pass", OnLine: func(Line) { started <- struct{}{} }})
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
	if err != nil || res.Status != StatusRunError || !strings.Contains(res.Error, "killed") {
		t.Errorf("got %s %q (err %v), want run-error naming the kill", res.Status, res.Error, err)
	}
	if r, _ := run(t, s, "'next'"); r.Status != StatusSuccess {
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
			if res.Status != StatusSuccess || res.ReturnValue != nil {
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
	// Damaged inside, in Pyodide's magic, so that it still looks whole to
	// the supervisor (checkSnapshot) and only a worker's restore fails.
	whole, err := os.ReadFile(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	at, err := runtimefiles.DataOffset(bytes.NewReader(whole), int64(len(whole)))
	if err != nil {
		t.Fatal(err)
	}
	magic := whole[at]
	whole[at] ^= 0xff
	if err := os.WriteFile(snaps[0], whole, 0o644); err != nil {
		t.Fatal(err)
	}

	s := start(t, Config{Workers: 1, CacheDir: cache})
	res, lines := run(t, s, "print('plain')\n6 * 7")
	if res.Status != StatusSuccess || string(res.ReturnValue) != "42" || len(lines) != 1 {
		t.Fatalf("after a damaged snapshot: %+v", res)
	}
	// The supervisor remakes the snapshot, and workers restore from it again.
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(snaps[0]); err == nil {
			if at, err := runtimefiles.DataOffset(bytes.NewReader(b), int64(len(b))); err == nil && b[at] == magic {
				break
			}
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
			"[output truncated: 95 MiB more was printed than the 1.0 KiB limit]"},
		{"many lines", "for _ in range(100_000): print('y' * 9)", 102,
			"[output truncated: 976 KiB more was printed than the 1.0 KiB limit]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, lines := run(t, s, tt.code)
			if res.Status != StatusSuccess || len(res.Output) != tt.kept+1 || len(lines) != tt.kept+1 {
				t.Fatalf("got %s with %d lines (%d streamed), want success with %d and a marker: %q", res.Status, len(res.Output), len(lines), tt.kept, res.Error)
			}
			if got := res.Output[tt.kept]; got != tt.marker {
				t.Errorf("marker %q, want %q", got, tt.marker)
			}
		})
	}
}

func TestReturnValueCutAtTheSource(t *testing.T) {
	const limit = 64 << 10
	s := start(t, Config{Workers: 1, OutputLimit: limit})
	// The JSON of ['ab'] * 1_250_000 is 10_000_002 bytes; all ASCII, so its
	// first 64 KiB are the kept part.
	list := "[\n" + strings.Repeat("  \"ab\",\n", limit/8+1)
	tests := []struct {
		name, code string
		size       int    // bytes of the value's text: a str itself, else its JSON
		kept       string // what is left of that text
		tampered   bool   // the runner's cut is bypassed: Go cuts
	}{
		{"10 MB str", "'x' * 10_000_000", 10_000_000, strings.Repeat("x", limit), false},
		{"10 MB list", "['ab'] * 1_250_000", 10_000_002, list[:limit], false},
		{"2-byte characters cut at a boundary", "'x' + 'é' * 40_000", 80_001, "x" + strings.Repeat("é", (limit-1)/2), false},
		{"4-byte characters cut at a boundary", "'ab' + '🐍' * 20_000", 80_002, "ab" + strings.Repeat("🐍", (limit-2)/4), false},
		{"top-level await", "import asyncio\nawait asyncio.sleep(0)\n'y' * 100_000", 100_000, strings.Repeat("y", limit), false},
		{"runner tampered with", "import sys\nsys.modules['_mcp_runner'].cut_text = lambda text, limit: None\n'w' * 10_000_000",
			10_000_000, strings.Repeat("w", limit), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after, settled runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			res, _ := run(t, s, tt.code)
			runtime.ReadMemStats(&after)
			runtime.GC()
			runtime.ReadMemStats(&settled)
			if res.Status != StatusSuccess || !res.ReturnString {
				t.Fatalf("got %s (str %v) %q, want a successful str", res.Status, res.ReturnString, res.Error)
			}
			var got string
			if err := json.Unmarshal(res.ReturnValue, &got); err != nil {
				t.Fatalf("return value %.100q: %v", res.ReturnValue, err)
			}
			want := tt.kept + "\n" + fmt.Sprintf("[return value truncated: the value is %s, more than the 64 KiB limit]", humanize.IBytes(uint64(tt.size)))
			if got != want {
				t.Errorf("return value of %d bytes ending %q, want %d ending %q", len(got), tail(got), len(want), tail(want))
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			retained := int64(settled.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("Go allocated %d bytes during the call and retained %d", allocated, retained)
			if tt.tampered {
				// The measure sees a value that crosses the bridge whole:
				// read, then decoded from the frame.
				if allocated < uint64(tt.size) {
					t.Errorf("Go allocated %d bytes for a %d byte value that crossed whole: the measure is blind", allocated, tt.size)
				}
				return
			}
			// A call costs Go about 0.5 MB whatever it returns (a new
			// worker among it): only a big value is measured.
			if tt.size >= 1<<20 && (allocated > uint64(tt.size)/4 || retained > int64(tt.size)/4) {
				t.Errorf("Go allocated %d and retained %d bytes for a %d byte value cut to %d", allocated, retained, tt.size, limit)
			}
		})
	}
	// An error text is cut the same way: a traceback can be as long as
	// the message of the exception.
	res, _ := run(t, s, "raise ValueError('v' * 10_000_000)")
	note := regexp.MustCompile(`\n\[error truncated: the value is 9\.5 MiB, more than the 64 KiB limit\]$`) // minErrorLimit
	if res.Status != StatusRunError || !strings.HasPrefix(res.Error, "Traceback") || !note.MatchString(res.Error) || len(res.Error) > limit+100 {
		t.Errorf("a 10 MB error: %s, %d bytes ending %q; want it cut to the limit with a note", res.Status, len(res.Error), tail(res.Error))
	}
	// Values up to the limit come whole, as before.
	for _, tt := range []struct{ code, value string }{
		{"'z' * 65536", `"` + strings.Repeat("z", limit) + `"`},
		{"'é' * 32768", `"` + strings.Repeat("é", limit/2) + `"`},
		{"list(range(3))", "[\n  0,\n  1,\n  2\n]"},
	} {
		if res, _ := run(t, s, tt.code); string(res.ReturnValue) != tt.value || res.ReturnString != strings.HasPrefix(tt.value, `"`) {
			t.Errorf("%s: value %q (str %v), want it whole", tt.code, tail(string(res.ReturnValue)), res.ReturnString)
		}
	}
}

// tail is the end of a long text, for messages.
func tail(s string) string {
	if len(s) <= 120 {
		return s
	}
	return "…" + s[len(s)-120:]
}

func TestCapReturnValue(t *testing.T) {
	note := func(size, limit int) string {
		return fmt.Sprintf("\n[return value truncated: the value is %s, more than the %s limit]", humanize.IBytes(uint64(size)), humanize.IBytes(uint64(limit)))
	}
	long := strings.Repeat("x", 512)
	tests := []struct {
		name     string
		raw      string
		isString bool
		limit    int
		want     string // the value's text (a str decoded) when cut; "" when left alone
		cutSize  int    // what the worker said the value was before it cut it
	}{
		{"no limit", `"` + strings.Repeat("x", 1000) + `"`, true, 0, "", 0},
		{"fits", `"abc"`, true, 3, "", 0},
		{"cut by the worker: the note is added", `"abc"`, true, 3, "abc" + note(1000, 3), 1000},
		{"cut by the worker, JSON: the note is added to the str", `"[\n  1,"`, true, 6, "[\n  1," + note(100, 6), 100},
		{"str", `"` + long + "yz" + `"`, true, 10, long[:10] + note(len(long)+2, 10), 0},
		{"escapes decoded, cut between characters", `"a\n\"\u00e9\ud83d\udc0d` + long + `"`, true, 8,
			"a\n\"é" + note(1+1+1+2+4+len(long), 8), 0},
		{"a pair of escapes is one character", `"\ud83d\udc0d\ud83d\udc0d` + long + `"`, true, 7,
			"🐍" + note(8+len(long), 7), 0},
		{"escaped to more than a note, short once decoded", `"` + strings.Repeat(`\u0001`, 100) + `"`, true, 100, "", 0},
		{"lone surrogate is U+FFFD", `"\ud800` + long + `"`, true, 4, "\ufffdx" + note(3+len(long), 4), 0},
		{"invalid UTF-8 is U+FFFD", "\"\xff" + long + `"`, true, 2, note(3+len(long), 2), 0},
		{"JSON becomes a str", "[\n  \"é" + long + "\"\n]", false, 6, "[\n  \"" + note(10+len(long), 6), 0},
		{"JSON cut inside a 4-byte character", "\"🐍" + long + "\"", false, 3, "\"" + note(6+len(long), 3), 0},
		{"a str that is not a string literal is cut as text", "[" + long + "]", true, 5, "[xxxx" + note(2+len(long), 5), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := json.RawMessage(tt.raw)
			got, isString := capReturnValue(raw, tt.isString, tt.cutSize, tt.limit)
			if tt.want == "" {
				if string(got) != tt.raw || isString != tt.isString {
					t.Errorf("capReturnValue changed a value it should leave alone: %q (str %v)", got, isString)
				}
				return
			}
			var text string
			if err := json.Unmarshal(got, &text); err != nil || !isString {
				t.Fatalf("capReturnValue = %q (str %v): want a str (%v)", got, isString, err)
			}
			if text != tt.want {
				t.Errorf("capReturnValue = %q, want %q", text, tt.want)
			}
		})
	}
}

// TestCloseDuringStart: a server that stops while its runtime is still being
// prepared (its listener failed, say) stops the preparation rather than
// waiting for it, and does not report the preparation as failed.
func TestCloseDuringStart(t *testing.T) {
	for _, preparing := range []bool{false, true} {
		t.Run(fmt.Sprintf("preparing=%v", preparing), func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			s := New(Config{Deno: testDeno(t), CacheDir: t.TempDir(), Timeout: 30 * time.Second}, zap.New(core))
			s.Start(context.Background())
			// The first step reported: the preparation, which takes
			// seconds in an empty cache, is under way.
			for deadline := time.Now().Add(30 * time.Second); preparing && logs.Len() == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the preparation reported no step")
				}
				time.Sleep(10 * time.Millisecond) // bounded polling for the first step
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
				t.Errorf("logged: %s %v", e.Message, e.ContextMap())
			}
		})
	}
}
