package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
	s := benchSetup(b)
	r := &pt.Repo{}
	r.Add(bulkyWheel())
	srv, _ := startBench(b, s, "--workers", "2", "--index-url", r.Location(b, pt.Variant{JSON: true, Dir: true}))
	srv.call(b, "1+1")
	code := "# /// script\n# dependencies = [\"bulky\"]\n# ///\nimport bulky\nbulky.m299.C1().f(3)"
	var later []time.Duration
	for i := range 10 {
		time.Sleep(time.Second)
		took := srv.call(b, code)
		if i >= 5 {
			later = append(later, took)
		}
	}
	var bare []time.Duration
	for range 5 {
		time.Sleep(time.Second)
		bare = append(bare, srv.call(b, "1+1"))
	}
	l, base := percentile(later, 0.5), percentile(bare, 0.5)
	report(b, "PEP 723 `bulky`, calls 6–10 of 10 in a row, median", ms(l), "ms", "")
	report(b, "the same ÷ bare `1+1` on that server", float64(l)/float64(base), "×", "≤ 2×")
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
