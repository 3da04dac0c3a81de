package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
