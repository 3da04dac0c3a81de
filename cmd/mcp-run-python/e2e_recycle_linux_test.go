package main_test

import (
	"strings"
	"testing"
)

// TestRecycle: on Linux a worker process serves call after call, each in a
// new interpreter (supervisor/internal/worker/recycle.go). One worker, so that every call
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

	// The JavaScript side: globals, a timer and an asyncio task still
	// running, a Worker that idles, storage, random state.
	const taint = `import asyncio, js, random
from pyodide.ffi import create_proxy, to_js
js.globalThis.leaked = 'call 1'
js.globalThis.ticks = 0
def tick():
    js.globalThis.ticks += 1
js.setInterval(create_proxy(tick), 1)
async def background():
    while True:
        js.globalThis.background = True
        await asyncio.sleep(0.001)
asyncio.ensure_future(background())
js.Worker.new("data:text/javascript,setInterval(() => {}, 1000)", to_js({"type": "module"}, dict_converter=js.Object.fromEntries))
try:
    await (await js.caches.open('leak')).put('https://example.com/', js.Response.new('call 1'))
except Exception as e:
    print('no cache:', type(e).__name__)
print(random.random(), js.Math.random())`
	const check = `import js, random
print(hasattr(js.globalThis, 'leaked'), hasattr(js.globalThis, 'ticks'), hasattr(js.globalThis, 'background'))
try:
    print('cache kept:', await js.caches.has('leak'))
except Exception as e:
    print('no cache:', type(e).__name__)
print(random.random(), js.Math.random())`
	one := c.run(t, taint)
	two := c.run(t, check)
	sameProcess("JavaScript's state")
	if !strings.Contains(two, "<output>\nFalse False False\nno cache: JsException\n") {
		t.Errorf("a global, a timer, a task or a cache of the last call reached the next:\n%s", two)
	}
	randoms := func(text string) string {
		lines := strings.Split(text, "\n")
		return lines[len(lines)-2] // the last printed line, before </output>
	}
	if r1, r2 := randoms(one), randoms(two); r1 == r2 || !strings.Contains(r1, "0.") {
		t.Errorf("random numbers of two calls: %q and %q; want two different draws", r1, r2)
	}

	// What a Worker can change for its whole process: the runner's
	// permissions refuse the environment and the umask (and the priority,
	// which takes the same sys permission), and the rest ends with the
	// Worker (DESIGN 3.3), but for the working directory. A call that moved it leaves a process that is not
	// reused: the next call starts where the first one did.
	const where = "import js\nprint(js.Deno.cwd())"
	home := c.run(t, where)
	c.expectRun(t, `import js, pyodide_js
from pyodide.ffi import create_proxy
async def env(): js.Deno.env.set('LEAK', 'call 1')
async def umask(): js.Deno.umask(0)
refused = []
for change in (env, umask):
    try:
        await change()
    except Exception as e:
        if 'NotCapable' in str(e):
            refused.append(change.__name__)
js.Deno.addSignalListener('SIGINT', create_proxy(lambda: None))
js.Deno.exitCode = 3
js.Deno.chdir(pyodide_js._api.config.indexURL)
refused`, "<status>success</status>\n<return_value>\n[\n  \"env\",\n  \"umask\"\n]\n</return_value>")
	if got := c.run(t, where); got != home {
		t.Errorf("the working directory a call left reached the next call: %q, before it %q", got, home)
	}
	if now := waitIdleWorkers(t, c.pid, 1)[0]; now == first {
		t.Errorf("the process whose call changed its working directory serves on (pid %d)", now)
	}
	first = waitIdleWorkers(t, c.pid, 1)[0]

	// node:process's title overwrites the process's command line, from a
	// Worker the code made that is gone when the call ends.
	c.expectRun(t, `import asyncio, js
from pyodide.ffi import create_proxy, to_js
titled = asyncio.get_running_loop().create_future()
w = js.Worker.new("data:text/javascript,import process from 'node:process'; process.title = 'call 1'; postMessage(process.title)", to_js({"type": "module"}, dict_converter=js.Object.fromEntries))
w.onmessage = create_proxy(lambda e: titled.set_result(e.data))
title = await titled
w.terminate()
title`, "<status>success</status>\n<return_value>\ncall 1\n</return_value>")
	c.expectWorks(t)
	if now := waitIdleWorkers(t, c.pid, 1)[0]; now == first {
		t.Errorf("the process whose call changed its command line serves on (pid %d)", now)
	}
	first = waitIdleWorkers(t, c.pid, 1)[0]

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
