package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/shirou/gopsutil/v4/process"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// bulkyWheel is a pure-Python package whose import is slow, as real ones
// are: 300 modules of classes and functions that its __init__ imports.
func bulkyWheel() pt.Wheel {
	files := map[string]string{}
	var init strings.Builder
	for i := range 300 {
		var m strings.Builder
		for j := range 20 {
			fmt.Fprintf(&m, "class C%d:\n    def f(self, x):\n        return [x * k for k in range(%d)]\n\ndef g%d(a, b=%d):\n    return {str(i): i for i in range(a + b)}\n\n", j, j, j, j)
		}
		files[fmt.Sprintf("m%03d.py", i)] = m.String()
		fmt.Fprintf(&init, "from . import m%03d\n", i)
	}
	return pt.Wheel{Name: "bulky", Version: "1.0", Source: init.String(), Files: files}
}

// BenchmarkDepsImport: importing a --deps package costs what a bare call
// does, since the snapshot holds it loaded (goal ≤ 1.5×).
func BenchmarkDepsImport(b *testing.B) {
	s := benchSetup(b)
	r := &pt.Repo{}
	r.Add(bulkyWheel())
	srv, _ := startBench(b, s, "--workers", "2", "--index-url", r.Location(b, pt.Variant{JSON: true, Dir: true}), "--deps", "bulky")
	srv.call(b, "1+1")
	median := func(code string) time.Duration {
		var times []time.Duration
		for range 15 {
			time.Sleep(2 * time.Second) // a warm worker for every call: restoring one with bulky loaded, and installing its files, takes longer
			times = append(times, srv.call(b, code))
		}
		return percentile(times, 0.5)
	}
	bare, imported := median("1+1"), median("import bulky\nbulky.m299.C1().f(3)")
	report(b, "`1+1` with --deps bulky, p50 of 15", ms(bare), "ms", "")
	report(b, "`import bulky` (300 modules) with --deps bulky, p50 of 15", ms(imported), "ms", "")
	report(b, "import of a --deps package ÷ bare call", float64(imported)/float64(bare), "×", "≤ 1.5×")
}

// BenchmarkRepeatedScriptDeps: ten calls in a row naming the same slow
// package in their PEP 723 block. Goal: from the sixth on, ≤ 2× a bare call
// (a snapshot learned from the repeated set).
func BenchmarkRepeatedScriptDeps(b *testing.B) {
	first, later, bare := repeatedCalls(b, "# /// script\n# dependencies = [\"bulky\"]\n# ///\nimport bulky\nbulky.m299.C1().f(3)")
	report(b, "PEP 723 `bulky`, first call", ms(first), "ms", "")
	report(b, "PEP 723 `bulky`, calls 6–10 of 10 in a row, median", ms(later), "ms", "")
	report(b, "the same ÷ bare `1+1` on that server", float64(later)/float64(bare), "×", "≤ 2×")
}

// BenchmarkRepeatedImports: the same with plain imports, as agents write
// them, without a block. Goal: from the sixth on, ≤ 2× a bare call (the set
// learned from the imports); the first call no slower than with a block.
func BenchmarkRepeatedImports(b *testing.B) {
	first, later, bare := repeatedCalls(b, "import bulky\nbulky.m299.C1().f(3)")
	report(b, "`import bulky` without a block, first call", ms(first), "ms", "")
	report(b, "`import bulky` without a block, calls 6–10 of 10 in a row, median", ms(later), "ms", "")
	report(b, "the same ÷ bare `1+1` on that server", float64(later)/float64(bare), "×", "≤ 2×")
}

// repeatedCalls makes ten calls in a row with code, which imports bulky
// from a local index, on a new server, and returns the first call's time,
// the median of calls 6–10 and the median of five bare calls after them.
func repeatedCalls(b *testing.B, code string) (first, later, bare time.Duration) {
	b.Helper()
	s := benchSetup(b)
	r := &pt.Repo{}
	r.Add(bulkyWheel())
	srv, _ := startBench(b, s, "--workers", "2", "--index-url", r.Location(b, pt.Variant{JSON: true, Dir: true}))
	srv.call(b, "1+1")
	var lates, bares []time.Duration
	for i := range 10 {
		time.Sleep(time.Second)
		took := srv.call(b, code)
		switch {
		case i == 0:
			first = took
		case i >= 5:
			lates = append(lates, took)
		}
	}
	for range 5 {
		time.Sleep(time.Second)
		bares = append(bares, srv.call(b, "1+1"))
	}
	return first, percentile(lates, 0.5), percentile(bares, 0.5)
}

// BenchmarkIdleMemory: what the default pool holds at rest, the server and
// its workers together (resident memory).
func BenchmarkIdleMemory(b *testing.B) {
	s := benchSetup(b)
	tg := startTarget(b, s, modeStateless)
	deadline := time.Now().Add(startTimeout)
	for {
		if status, body := tg.get(b, "/readyz"); status == 200 && strings.HasPrefix(body, "ready: 2 warm") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the pool did not warm up")
		}
		time.Sleep(50 * time.Millisecond) // bounded polling for the pool
	}
	time.Sleep(5 * time.Second) // at rest
	total, err := treeRSS(int32(tg.cmd.Process.Pid))
	if err != nil {
		b.Skipf("resident memory cannot be read here: %v", err)
	}
	report(b, "default pool at rest: server and 2 warm workers, resident", float64(total)/(1<<20), "MiB", "≤ 250 MiB")
}

// treeRSS is the resident memory of process pid and its descendants.
func treeRSS(pid int32) (uint64, error) {
	p, err := process.NewProcess(pid)
	if err != nil {
		return 0, err
	}
	mem, err := p.MemoryInfo()
	if err != nil {
		return 0, err
	}
	total := mem.RSS
	children, _ := p.Children() // none is no error
	for _, c := range children {
		n, err := treeRSS(c.Pid)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// BenchmarkBytecodeImport: the first `import bulky` call (300 modules, a
// plain import) on a server, before the package's wheel was compiled to
// bytecode (it imports from source) and after (from the compiled variant
// in the package cache): the whole call, and the import alone as the
// interpreter timed it. Each wheel is new to the cache (a nonce), and is
// used once on each of two servers sharing the cache, so that neither
// call is a learned set's.
func BenchmarkBytecodeImport(b *testing.B) {
	s := benchSetup(b)
	const n = 5
	r := &pt.Repo{}
	var shas, code []string
	for i := range n {
		w := bulkyWheel()
		w.Name = fmt.Sprintf("bulky%d", i)
		w.Source = nonceLine() + w.Source
		r.Add(w)
		data, _ := w.Build()
		shas = append(shas, pt.SHA256(data))
		code = append(code, fmt.Sprintf("import time\nt = time.perf_counter()\nimport bulky%d\nbulky%d.m299.C1().f(3)\nround((time.perf_counter() - t) * 1000)", i, i))
	}
	index := r.Location(b, pt.Variant{JSON: true, Dir: true})
	compiled := func(sha string) bool {
		found, _ := filepath.Glob(filepath.Join(s.cacheDir, "packages", "wheels", "sha256", sha, "bytecode", "*", "bytecode.json"))
		return len(found) > 0
	}
	waitCompiled := func(sha string) {
		deadline := time.Now().Add(5 * time.Minute)
		for !compiled(sha) {
			if time.Now().After(deadline) {
				b.Fatalf("wheel %s not compiled within 5 minutes", sha)
			}
			time.Sleep(100 * time.Millisecond) // bounded polling for the background compile
		}
	}
	measure := func() (calls, imports []time.Duration) {
		srv, _ := startBench(b, s, "--workers", "2", "--index-url", index)
		srv.call(b, "1+1")
		for i := range n {
			time.Sleep(2 * time.Second) // a warm worker for every call
			start := time.Now()
			res, err := srv.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{
				Name: toolName, Arguments: map[string]any{"python_code": code[i]},
			}})
			calls = append(calls, time.Since(start))
			text, _ := onlyText(res)
			var took int
			if err != nil || !strings.HasPrefix(text, "<status>success</status>") {
				b.Fatalf("call %q: %v %s", code[i], err, text)
			}
			if _, err := fmt.Sscanf(text[strings.Index(text, "<return_value>\n")+len("<return_value>\n"):], "%d", &took); err != nil {
				b.Fatalf("no import time in %s", text)
			}
			imports = append(imports, time.Duration(took)*time.Millisecond)
			// Before the next call: its compile would compete with it.
			waitCompiled(shas[i])
		}
		_ = srv.Close()
		return calls, imports
	}
	for _, sha := range shas {
		if compiled(sha) {
			b.Fatalf("wheel %s compiled before its first use", sha)
		}
	}
	sourceCalls, sourceImports := measure()
	bcCalls, bcImports := measure()
	report(b, "first `import bulky` (300 modules) call, from source (not compiled yet), p50 of 5", ms(percentile(sourceCalls, 0.5)), "ms", "")
	report(b, "first `import bulky` call, from bytecode (the compiled variant), p50 of 5", ms(percentile(bcCalls, 0.5)), "ms", "")
	report(b, "the import alone, in the interpreter: from source, p50 of 5", ms(percentile(sourceImports, 0.5)), "ms", "")
	report(b, "the import alone, in the interpreter: from bytecode, p50 of 5", ms(percentile(bcImports, 0.5)), "ms", "")
	report(b, "bytecode ÷ source, first `import bulky` call", float64(percentile(bcCalls, 0.5))/float64(percentile(sourceCalls, 0.5)), "×", "< 1×")
}
