package main_test

import (
	"testing"
)

// floodStderr writes 40 lines of 100 KB to the worker process's own stderr,
// which the supervisor reads (DESIGN 4.1), through console.error and
// Deno.stderr, and returns start + 41.
const floodStderr = `import js
line = "e" * 100_000
encoded = js.TextEncoder.new().encode(line + "\n")
for _ in range(20):
    js.console.error(line)
    js.Deno.stderr.writeSync(encoded)
start + 41`

// TestStderrFlood checks that code writing long lines to the worker's
// stderr, which the supervisor must drain, gets its result at once, in a
// fresh interpreter and in a session, and that the session lives on. A
// reader that stopped at a long line left deno blocked on its next write
// until the time limit: a TimeoutError, and a lost session.
func TestStderrFlood(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStdio, "--sessions", "--workers", "1", "--timeout", "20s")
	c := tg.connect(t)
	t.Run("call", func(t *testing.T) {
		c.expectRun(t, "start = 1\n"+floodStderr, success("42"))
	})
	t.Run("session", func(t *testing.T) {
		id := c.createSession(t, defaultIdle)
		c.expectRunIn(t, id, "start = 1", noValue)
		c.expectRunIn(t, id, floodStderr, success("42"))
		c.expectRunIn(t, id, "start = 2\n"+floodStderr, success("43"))
	})
}
