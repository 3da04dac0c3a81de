package main_test

import (
	"strings"
	"testing"
)

// TestRecycle: on Linux a worker process serves call after call, each in a
// new interpreter (supervisor/recycle.go). One worker, so that every call
// runs in the process of the one before it: nothing of a call reaches the
// next, and a process that a call's code outlived is killed, not reused.
func TestRecycle(t *testing.T) {
	s := setup(t)
	c := startTarget(t, s, modeStdio, "--workers", "1").connect(t)
	c.expectWorks(t)
	first := waitIdleWorkers(t, c.pid, 1)[0]
	sameProcess := func(step string) {
		t.Helper()
		if now := waitIdleWorkers(t, c.pid, 1)[0]; now != first {
			t.Fatalf("%s: the worker process changed from %d to %d; it should have been recycled", step, first, now)
		}
	}

	testIsolation(t, s, nil, c)
	sameProcess("Python's state")

	// The JavaScript side: globals, a timer still running, random state.
	const taint = `import js, random
from pyodide.ffi import create_proxy
js.globalThis.leaked = 'call 1'
js.globalThis.ticks = 0
def tick():
    js.globalThis.ticks += 1
js.setInterval(create_proxy(tick), 1)
print(random.random(), js.Math.random())`
	const check = `import js, random
print(hasattr(js.globalThis, 'leaked'), hasattr(js.globalThis, 'ticks'))
print(random.random(), js.Math.random())`
	one := c.run(t, taint)
	two := c.run(t, check)
	sameProcess("JavaScript's state")
	if !strings.Contains(two, "<output>\nFalse False\n") {
		t.Errorf("a global or a timer of the last call's JavaScript reached the next:\n%s", two)
	}
	randoms := func(text string) string {
		lines := strings.Split(text, "\n")
		return lines[len(lines)-2] // the last printed line, before </output>
	}
	if r1, r2 := randoms(one), randoms(two); r1 == r2 || !strings.Contains(r1, "0.") {
		t.Errorf("random numbers of two calls: %q and %q; want two different draws", r1, r2)
	}

	// A busy Web Worker made from Python outlives its runner's
	// terminate(): its thread is counted, and the process is killed.
	c.expectRun(t, `import js
from pyodide.ffi import to_js
js.Worker.new("data:text/javascript,for (;;) {}", to_js({"type": "module"}, dict_converter=js.Object.fromEntries))
'made'`, "<status>success</status>\n<return_value>\nmade\n</return_value>")
	c.expectWorks(t)
	if now := waitIdleWorkers(t, c.pid, 1)[0]; now == first {
		t.Errorf("the process whose call left a busy Worker behind serves on (pid %d)", now)
	}
}
