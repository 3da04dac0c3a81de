package main_test

// Benchmarks of the real binary, over stdio with the mcp-go client: `make
// bench`. Each reports medians (and percentiles) of repeated runs beside the
// goal set for two cores, in a table at the end and as benchmark metrics.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// benchServer is a stdio server the benchmark started, and its client.
type benchServer struct {
	*client.Client
	started time.Time // when the process was spawned
}

// startBench spawns the binary over stdio with extra flags and initializes.
func startBench(b *testing.B, s *e2eSetup, extra ...string) (*benchServer, time.Duration) {
	b.Helper()
	return startStdio(b, s.bin, append(append(s.baseArgs(), extra...), "stdio"))
}

// startStdio spawns bin with args and initializes it over stdio.
func startStdio(b *testing.B, bin string, args []string) (*benchServer, time.Duration) {
	b.Helper()
	return startStdioAs(b, bin, args, e2eProtocol)
}

// startStdioAs is startStdio with a client of protocol and opts.
func startStdioAs(b *testing.B, bin string, args []string, protocol string, opts ...client.ClientOption) (*benchServer, time.Duration) {
	b.Helper()
	tr := transport.NewStdioWithOptions(bin, serverEnv(), args, transport.WithCommandLogger(quietLog))
	c := client.NewClient(tr, append(opts, client.WithProtocolVersion(protocol))...)
	start := time.Now()
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocol
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	return &benchServer{Client: c, started: start}, time.Since(start)
}

// call runs code and fails unless it succeeds.
func (s *benchServer) call(b *testing.B, code string) time.Duration {
	b.Helper()
	start := time.Now()
	res, err := s.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{
		Name: toolName, Arguments: map[string]any{"python_code": code},
	}})
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if text, ok := onlyText(res); !ok || res.IsError || len(text) < 24 || text[:24] != "<status>success</status>" {
		b.Fatalf("call %q: %+v", code, res.Content)
	}
	return took
}

// benchSetup builds the binary and warms the cache, as the end-to-end tests do.
func benchSetup(b *testing.B) *e2eSetup {
	b.Helper()
	setupOnce.Do(func() { sharedSetup, setupErr = prepare() })
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	return sharedSetup
}

// figures collects the table printed at the end of the run.
var figures struct {
	sync.Mutex
	rows [][3]string
}

// report records a figure beside its goal, as a metric and a table row.
func report(b *testing.B, name string, value float64, unit, goal string) {
	b.Helper()
	b.ReportMetric(value, unit)
	figures.Lock()
	defer figures.Unlock()
	figures.rows = append(figures.rows, [3]string{name, strconv.FormatFloat(value, 'f', 1, 64) + " " + unit, goal})
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// trivialServer is the least a Go program can do to answer initialize: the
// yardstick of BenchmarkInitialize.
const trivialServer = `package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	line, _ := in.ReadBytes('\n')
	var req struct{ ID json.RawMessage }
	_ = json.Unmarshal(line, &req)
	fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"trivial\",\"version\":\"1\"}}}\n", req.ID)
	_, _ = io.Copy(io.Discard, in)
}
`

// buildTrivialServer builds trivialServer and returns the binary.
func buildTrivialServer(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for name, text := range map[string]string{"main.go": trivialServer, "go.mod": "module trivial\n\ngo 1.24\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "trivial")
	if runtime.GOOS == "windows" {
		bin += ".exe" // as in prepare
	}
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkInitialize times spawn → initialize answered, against a trivial
// Go program answering the same request the same way. Runs of the two
// alternate, so that both see the same noise.
func BenchmarkInitialize(b *testing.B) {
	s := benchSetup(b)
	trivial := buildTrivialServer(b)
	var ours, base []time.Duration
	for range 20 {
		srv, took := startBench(b, s)
		ours = append(ours, took)
		_ = srv.Close()
		srv, took = startStdio(b, trivial, nil)
		base = append(base, took)
		_ = srv.Close()
	}
	m, t := ms(percentile(ours, 0.5)), ms(percentile(base, 0.5))
	report(b, "spawn → initialize answered (median of 20)", m, "ms", "≤ 20 ms")
	report(b, "the same, a trivial Go program (median of 20)", t, "ms", "")
	report(b, "ratio to the trivial Go program", m/t, "×", "≤ 3×")
}

func BenchmarkWarmCall(b *testing.B) {
	s := benchSetup(b)
	srv, _ := startBench(b, s, "--workers", "2")
	srv.call(b, "1+1") // the pool is up
	var times []time.Duration
	for range 40 {
		// Give the retired worker's replacement time to warm, so every call
		// finds a warm worker: this measures the call, not the boot.
		time.Sleep(600 * time.Millisecond)
		times = append(times, srv.call(b, "1+1"))
	}
	report(b, "`1+1` with a warm pool, p50 of 40", ms(percentile(times, 0.5)), "ms", "≤ 3 ms")
	report(b, "`1+1` with a warm pool, p99 of 40", ms(percentile(times, 0.99)), "ms", "")
}

func BenchmarkBackToBackCalls(b *testing.B) {
	s := benchSetup(b)
	srv, _ := startBench(b, s, "--workers", "2")
	srv.call(b, "1+1")
	var times []time.Duration
	for range 20 {
		times = append(times, srv.call(b, "1+1"))
	}
	report(b, "`1+1` back to back over stdio, median of 20", ms(percentile(times, 0.5)), "ms", "≤ 150 ms")
}

func BenchmarkSustained(b *testing.B) {
	s := benchSetup(b)
	const workers, window = 2, 15 * time.Second
	srv, _ := startBench(b, s, "--workers", strconv.Itoa(workers))
	srv.call(b, "1+1")
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Since(start) < window {
				srv.call(b, "1+1")
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	report(b, "sustained calls/s, fresh interpreter each", float64(n)/time.Since(start).Seconds(), "calls/s", "≥ 8 calls/s")
}

func BenchmarkColdStart(b *testing.B) {
	s := benchSetup(b)
	var times []time.Duration
	for range 5 {
		srv, _ := startBench(b, s)
		srv.call(b, "1+1")
		times = append(times, time.Since(srv.started))
		_ = srv.Close()
	}
	report(b, "spawn → first result, cached snapshot (median of 5)", ms(percentile(times, 0.5)), "ms", "≤ 800 ms")
}

func BenchmarkConcurrentCPU(b *testing.B) {
	s := benchSetup(b)
	srv, _ := startBench(b, s, "--workers", "4")
	// Warm all four workers before timing.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { srv.call(b, "1+1") })
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	// One second of CPU: a fixed amount of work, calibrated on an idle
	// worker, so that sharing two cores shows as wall time.
	res, err := srv.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName,
		Arguments: map[string]any{"python_code": "import time\nn, end = 0, time.perf_counter() + 1\nwhile time.perf_counter() < end:\n    for _ in range(1000): pass\n    n += 1\nn"}}})
	if err != nil {
		b.Fatal(err)
	}
	text, _ := onlyText(res)
	var per int
	if _, err := fmt.Sscanf(text, "<status>success</status>\n<return_value>\n%d", &per); err != nil || per == 0 {
		b.Fatalf("calibration: %q", text)
	}
	time.Sleep(2 * time.Second)
	code := fmt.Sprintf("for _ in range(%d):\n    for _ in range(1000): pass", per)
	var times []time.Duration
	for range 3 {
		start := time.Now()
		for range 4 {
			wg.Go(func() { srv.call(b, code) })
		}
		wg.Wait()
		times = append(times, time.Since(start))
		time.Sleep(2 * time.Second) // replacements warm
	}
	report(b, "4 concurrent calls of 1 CPU-s, 4 workers (median of 3)", percentile(times, 0.5).Seconds(), "s", "≤ 2.2 s")
}

// BenchmarkInstall times calls that install three wheels (greet, colorlib,
// emscripten-only) into a fresh interpreter, against the same call's code
// without dependencies, each with a warm pool.
func BenchmarkInstall(b *testing.B) {
	s := benchSetup(b)
	const body = "import greet\ngreet.hello('x')"
	code := script(`"greet>=2"`, body)
	// An install spends the time of a call plus a few wasm-side unpacks, so
	// each measurement waits for a warm worker, as BenchmarkWarmCall does.
	settle := func() { time.Sleep(600 * time.Millisecond) }
	var cold, fresh, warm, none []time.Duration
	for range 5 {
		repo := packageRepo(b) // new wheels: new to the cache
		srv, _ := repo.Serve(b, pt.Variant{JSON: true, Metadata: true}, 0)
		index := srv.URL + "/simple/"
		first, _ := startBench(b, s, "--index-url", index)
		first.call(b, "1+1")
		settle()
		cold = append(cold, first.call(b, code))
		settle()
		warm = append(warm, first.call(b, code))
		settle()
		none = append(none, first.call(b, "1+1"))
		_ = first.Close()
		// A new process: the files are cached, but the index is asked again.
		second, _ := startBench(b, s, "--index-url", index)
		second.call(b, "1+1")
		settle()
		fresh = append(fresh, second.call(b, code))
		_ = second.Close()
	}
	report(b, "call installing 3 wheels, cold cache (median of 5)", ms(percentile(cold, 0.5)), "ms", "")
	report(b, "call installing 3 wheels, cached, new process (median of 5)", ms(percentile(fresh, 0.5)), "ms", "")
	report(b, "call installing 3 wheels, cached, repeated (median of 5)", ms(percentile(warm, 0.5)), "ms", "")
	report(b, "`1+1` on the same server, no dependencies (median of 5)", ms(percentile(none, 0.5)), "ms", "")
}

// printFigures prints the table of the benchmarks that ran; TestMain calls it.
func printFigures() {
	figures.Lock()
	defer figures.Unlock()
	if len(figures.rows) == 0 {
		return
	}
	fmt.Fprintf(os.Stdout, "\n%-58s %-16s %s\n", "benchmark", "measured", "goal")
	for _, r := range figures.rows {
		fmt.Fprintf(os.Stdout, "%-58s %-16s %s\n", r[0], r[1], r[2])
	}
}
