package main_test

// End-to-end tests: the real binary, real deno and Pyodide, driven by mcp-go's
// client over each of the four transports. Every case of e2eCases runs over
// every transport, as the subtest TestE2E/TRANSPORT/CASE. Results are compared
// byte for byte, inline or with the golden files under testdata/e2e (rewrite
// them with -update).
//
//	go test ./cmd/mcp-run-python/ -run E2E -count=1 -v

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// sharedWorkers is the worker limit of the server every transport's cases share.
const sharedWorkers = 2

// e2eCase is one row of the table. A case either runs code and compares the
// result's text (with want, or with the golden file NAME.txt when golden is
// set), or runs its own test against the transport's shared server and client.
type e2eCase struct {
	name   string
	code   string
	want   string
	golden bool
	test   func(t *testing.T, s *e2eSetup, tg *target, c *e2eClient)
	// serial cases run alone on the shared server, before the others: they
	// kill its processes or count them.
	serial bool
}

func TestE2E(t *testing.T) {
	s := setup(t)
	cases := e2eCases()
	used := map[string]bool{}
	for _, tc := range cases {
		if used[tc.name] {
			t.Fatalf("two cases named %s", tc.name)
		}
		used[tc.name] = true
	}
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tg := startTarget(t, s, mode, "--workers", fmt.Sprint(sharedWorkers))
			c := tg.connect(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					if !tc.serial {
						t.Parallel()
					}
					switch {
					case tc.test != nil:
						tc.test(t, s, tg, c)
					case tc.golden:
						golden(t, tc.name+".txt", c.run(t, tc.code))
					default:
						c.expectRun(t, tc.code, tc.want)
					}
				})
			}
		})
	}
}

// success is the XML result of a successful call with the given return value
// text and no output.
func success(value string) string {
	return "<status>success</status>\n<return_value>\n" + value + "\n</return_value>"
}

// noValue is the XML result of a successful call that printed nothing and
// returned nothing.
const noValue = "<status>success</status>"

func e2eCases() []e2eCase {
	return []e2eCase{
		// 1. The two examples of DESIGN 1.3, exactly.
		{name: "design_success", code: "x = 4\nprint(f'{x=}')\nx", want: "<status>success</status>\n" +
			"<output>\n" +
			"x=4\n" +
			"</output>\n" +
			"<return_value>\n" +
			"4\n" +
			"</return_value>"},
		{name: "design_run_error", code: "print(unknown)", want: "<status>run-error</status>\n" +
			"<error>\n" +
			"Traceback (most recent call last):\n" +
			"  File \"main.py\", line 1, in <module>\n" +
			"    print(unknown)\n" +
			"          ^^^^^^^\n" +
			"NameError: name 'unknown' is not defined\n" +
			"\n" +
			"</error>"},

		// 2. Every kind of return value of DESIGN 1.3.
		{name: "return_str", code: "'hello world'", want: success("hello world")},
		{name: "return_str_quotes_raw", code: `'say "hi"\\n'`, want: success(`say "hi"\n`)},
		{name: "return_str_multiline", code: "'first line\\nsecond line\\n'", want: success("first line\nsecond line\n")},
		{name: "return_str_unicode", code: "'héllo wörld ✓ 日本語 🐍'", want: success("héllo wörld ✓ 日本語 🐍")},
		{name: "return_str_empty", code: "''", want: noValue},
		{name: "return_int", code: "6 * 7", want: success("42")},
		{name: "return_int_negative", code: "-7", want: success("-7")},
		{name: "return_int_zero", code: "0", want: success("0")},
		{name: "return_float_one", code: "1.0", want: success("1.0")},
		{name: "return_float_1e20", code: "1e20", want: success("1e20")},
		{name: "return_float_tenth", code: "0.1", want: success("0.1")},
		{name: "return_float_nan", code: "float('nan')", want: success("null")},
		{name: "return_float_inf", code: "float('-inf')", want: success("null")},
		{name: "return_bool_true", code: "True", want: success("true")},
		{name: "return_bool_false", code: "1 == 2", want: success("false")},
		{name: "return_none", code: "None", want: noValue},
		{name: "return_nothing", code: "x = 1", want: noValue},
		{name: "return_list", code: "[1, 'two', 3.5, None, True]", want: success("[\n  1,\n  \"two\",\n  3.5,\n  null,\n  true\n]")},
		{name: "return_tuple", code: "(1, 'a')", want: success("[\n  1,\n  \"a\"\n]")},
		{name: "return_set", code: "{3, 1, 2}", want: success("[\n  1,\n  2,\n  3\n]")},
		{name: "return_dict", code: "{'a': 1, 'ü': 'ö'}", want: success("{\n  \"a\": 1,\n  \"ü\": \"ö\"\n}")},
		{name: "return_dict_nonstr_keys", code: "{1: 'one', 2.5: 'two', False: 'f'}",
			want: success("{\n  \"1\": \"one\",\n  \"2.5\": \"two\",\n  \"false\": \"f\"\n}")},
		{name: "return_dict_keys_pydantic", code: "{float('nan'): 1, float('-inf'): 2, 1e20: 3, (1, 'a'): 4, b'k': 5}",
			want: success("{\n  \"nan\": 1,\n  \"-inf\": 2,\n  \"1e+20\": 3,\n  \"1,a\": 4,\n  \"k\": 5\n}")},
		{name: "return_int_past_str_limit", code: "10**5000", want: success("1" + strings.Repeat("0", 5000))},
		{name: "return_nested", golden: true, code: "{'a': [1, (2, 3), {'b': None, 'c': [[]]}], 'd': {'e': {}}, 'f': 'x\\ny'}"},
		{name: "return_empty_list", code: "[]", want: success("[]")},
		{name: "return_empty_dict", code: "{}", want: success("{}")},
		{name: "return_bytes", code: "b'hello bytes'", want: success(`"hello bytes"`)},
		{name: "return_datetime", code: "import datetime\ndatetime.datetime(2024, 1, 2, 3, 4, 5)", want: success(`"2024-01-02T03:04:05"`)},
		{name: "return_date", code: "import datetime\ndatetime.date(2024, 1, 2)", want: success(`"2024-01-02"`)},
		{name: "return_time", code: "import datetime\ndatetime.time(3, 4, 5)", want: success(`"03:04:05"`)},
		{name: "return_decimal", code: "from decimal import Decimal\nDecimal('1.10')", want: success(`"1.10"`)},
		{name: "return_uuid", code: "import uuid\nuuid.UUID('12345678-1234-5678-1234-567812345678')",
			want: success(`"12345678-1234-5678-1234-567812345678"`)},
		{name: "return_enum", code: "import enum\nclass Color(enum.Enum):\n    RED = 'red'\nclass Num(enum.IntEnum):\n    TWO = 2\n[Color.RED, Num.TWO]",
			want: success("[\n  \"red\",\n  2\n]")},
		{name: "return_dataclass", golden: true, code: "import dataclasses\n\n" +
			"@dataclasses.dataclass\nclass Point:\n    x: int\n    y: float\n    label: str\n    tags: list\n\n" +
			"Point(1, 2.5, 'p', ['a', 'b'])"},
		{name: "return_js_proxy", code: "import js\njs.JSON.parse('{\"a\": 1, \"b\": [true, \"x\"]}')",
			want: success("{\n  \"a\": 1,\n  \"b\": [\n    true,\n    \"x\"\n  ]\n}")},
		{name: "return_js_object", code: "import js\njs.Object.new()", want: success("{}")},
		// Empty code runs, as upstream's runPythonAsync('') does: nothing.
		{name: "empty_code", code: "", want: noValue},
		{name: "return_js_null", code: "import js\njs.JSON.parse('[1, null, {\"a\": null}]')", want: success("[\n  1,\n  null,\n  {\n    \"a\": null\n  }\n]")},
		{name: "return_object_repr", code: "class Thing:\n    def __repr__(self):\n        return 'Thing(1)'\n\nThing()",
			want: success(`"Thing(1)"`)},

		// 3. Only a block's own tag is neutralised.
		{name: "escape_output", code: "print('</output>')\nprint('<Output attr=1>x</ output>')\nprint('</error> </return_value>')",
			want: "<status>success</status>\n<output>\n&lt;/output&gt;\n&lt;Output attr=1&gt;x&lt;/ output&gt;\n</error> </return_value>\n</output>"},
		{name: "escape_return_value", code: "'a </return_value> b <RETURN_VALUE attr=1> c </output>'",
			want: success("a &lt;/return_value&gt; b &lt;RETURN_VALUE attr=1&gt; c </output>")},
		{name: "escape_error", golden: true, code: "raise ValueError('bad </error> and </output>')"},

		// 4. Top-level await.
		{name: "async_await", code: "import asyncio\nawait asyncio.sleep(0.01)\n42", want: success("42")},

		// 5. stdout and stderr in print order; a last line without newline.
		{name: "stdout_stderr_interleaved", code: "import sys\n" +
			"print('out 1')\n" +
			"print('err 1', file=sys.stderr)\n" +
			"print('out 2')\n" +
			"sys.stderr.write('err 2\\n')\n" +
			"print('out 3')\n" +
			"print('err 3', file=sys.stderr)\n" +
			"_ = sys.stdout.write('last line without newline')",
			want: "<status>success</status>\n<output>\nout 1\nerr 1\nout 2\nerr 2\nout 3\nerr 3\nlast line without newline\n</output>"},
		{name: "partial_lines", code: "import sys\n" +
			"print('progress', end='', flush=True)\n" +
			"print(' done')\n" +
			"_ = sys.stderr.write('warn')\n" +
			"sys.stderr.flush()\n" +
			"print(' more', file=sys.stderr)\n" +
			"print('after')\n" +
			"print('no newline', end='')",
			want: "<status>success</status>\n<output>\nprogress done\nwarn more\nafter\nno newline\n</output>"},
		{name: "output_and_value", code: "print('a')\nprint()\nprint('  indented  ')\n'v'",
			want: "<status>success</status>\n<output>\na\n\n  indented  \n</output>\n<return_value>\nv\n</return_value>"},

		// 6. A SyntaxError keeps its caret lines.
		{name: "syntax_error", golden: true, code: "x = 1\ny = (x +* 2)\n"},

		// 7. Nothing of one call is visible to the next.
		{name: "isolation", test: testIsolation},

		// 8. Logging.
		{name: "logging_levels", test: testLoggingLevels},
		{name: "logging_order", test: testLoggingOrder},

		// 9. JSON mode.
		{name: "json_mode", test: testJSONMode},

		// 10. Bad arguments.
		{name: "bad_arguments", test: testBadArguments},
		{name: "extra_argument", test: testExtraArgument},

		// 11. The code ends its interpreter or its worker.
		{name: "sys_exit", golden: true, code: "import sys\nsys.exit(3)"},
		{name: "os_exit", test: testOSExit},
		{name: "worker_killed", test: testWorkerKilled, serial: true},

		// 12. Time limit.
		{name: "timeout", test: testTimeout},

		// 13. Started by a client with a minimal environment and no cache.
		{name: "minimal_environment", test: testMinimalEnvironment},

		// 14. The MCP surface.
		{name: "initialize", test: testInitialize},
		{name: "tools_list", test: testToolsList},
	}
}

func testIsolation(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	c.expectRun(t, `import builtins, json, sys
leaked_global = 'call 1'
json.leaked_attribute = 'call 1'
sys.modules['leaked_module'] = json
builtins.leaked_builtin = 'call 1'
with open('/tmp/e2e-isolation.txt', 'w') as f:
    f.write('written by call 1')
print(open('/tmp/e2e-isolation.txt').read())
print(leaked_builtin)
'set'`, "<status>success</status>\n<output>\nwritten by call 1\ncall 1\n</output>\n<return_value>\nset\n</return_value>")

	c.expectRun(t, `import builtins, json, os, sys
print('leaked_global' in globals())
print(hasattr(json, 'leaked_attribute'))
print('leaked_module' in sys.modules)
print(hasattr(builtins, 'leaked_builtin'))
print(os.path.exists('/tmp/e2e-isolation.txt'))`,
		"<status>success</status>\n<output>\nFalse\nFalse\nFalse\nFalse\nFalse\n</output>")
}

// logCode prints two lines on stdout and one on stderr.
const logCode = "import sys\nprint('log out 1')\nprint('log err 1', file=sys.stderr)\nprint('log out 2')"

const logCodeResult = "<status>success</status>\n<output>\nlog out 1\nlog err 1\nlog out 2\n</output>"

// expectLogs runs logCode on c and checks the log messages c got during the call.
func expectLogs(t *testing.T, c *e2eClient, want []logMessage) {
	t.Helper()
	before := len(c.logged())
	c.expectRun(t, logCode, logCodeResult)
	got := c.logged()[before:]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("log messages:\n got: %q\nwant: %q", got, want)
	}
}

// testLoggingLevels checks DESIGN 1.5 on new sessions: nothing until
// logging/setLevel, then stdout as info and stderr as warning, filtered by
// the level, and one session's level does not reach another.
func testLoggingLevels(t *testing.T, _ *e2eSetup, tg *target, _ *e2eClient) {
	c := tg.connect(t)
	expectLogs(t, c, nil)

	all := []logMessage{{mcp.LoggingLevelInfo, "log out 1"}, {mcp.LoggingLevelWarning, "log err 1"}, {mcp.LoggingLevelInfo, "log out 2"}}
	warnings := []logMessage{{mcp.LoggingLevelWarning, "log err 1"}}
	if tg.mode == modeStateless {
		// No session keeps a level: upstream made a new server for each
		// stateless request, so a level set by one request is gone by the
		// next and nothing is ever sent.
		all, warnings = nil, nil
	}
	c.setLevel(t, mcp.LoggingLevelInfo)
	expectLogs(t, c, all)
	c.setLevel(t, mcp.LoggingLevelWarning)
	expectLogs(t, c, warnings)
	c.setLevel(t, mcp.LoggingLevelDebug)
	expectLogs(t, c, all)
	c.setLevel(t, mcp.LoggingLevelError)
	expectLogs(t, c, nil)

	if tg.mode != modeStdio {
		// A second client on the same server keeps the default level.
		c.setLevel(t, mcp.LoggingLevelInfo)
		other := tg.connect(t)
		expectLogs(t, other, nil)
		if got := len(c.logged()); got != 2*len(all)+len(warnings) {
			t.Errorf("the first client got %d log messages in all, want %d: %q", got, 2*len(all)+len(warnings), c.logged())
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.others) > 0 {
		t.Errorf("unexpected notifications: %q", c.others)
	}
}

// testLoggingOrder makes -e2e.order-calls calls, 4 at a time, each printing
// several lines, and checks that every log message of a call arrives before
// its result.
func testLoggingOrder(t *testing.T, _ *e2eSetup, tg *target, _ *e2eClient) {
	const concurrency, lines = 4, 6
	calls := *orderCalls
	protocol := e2eProtocol
	if tg.mode == modeStateless {
		protocol = modernProtocol
	}
	c := tg.connectProtocol(t, protocol)
	c.setLevel(t, mcp.LoggingLevelInfo)

	var mu sync.Mutex
	perCall := make([][]logMessage, calls)
	var stray []logMessage
	c.mu.Lock()
	c.onLog = func(m logMessage) {
		var i, j int
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Sscanf(m.Data, "call %d line %d", &i, &j); err != nil || i < 0 || i >= calls {
			stray = append(stray, m)
			return
		}
		perCall[i] = append(perCall[i], m)
	}
	c.mu.Unlock()

	wantLogs := func(i int) []logMessage {
		var want []logMessage
		for j := range lines {
			level := mcp.LoggingLevelInfo
			if j%3 == 1 {
				level = mcp.LoggingLevelWarning
			}
			want = append(want, logMessage{level, fmt.Sprintf("call %d line %d", i, j)})
		}
		return want
	}

	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				code := fmt.Sprintf("import sys\nfor j in range(%d):\n    print(f'call %d line {j}', file=sys.stderr if j %% 3 == 1 else sys.stdout)", lines, i)
				want := "<status>success</status>\n<output>\n"
				for j := range lines {
					want += fmt.Sprintf("call %d line %d\n", i, j)
				}
				want += "</output>"
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": code}}})
				cancel()
				// Taken at once: what arrived before the result.
				mu.Lock()
				got := append([]logMessage(nil), perCall[i]...)
				mu.Unlock()
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					continue
				}
				if text, ok := onlyText(res); !ok || res.IsError || text != want {
					t.Errorf("call %d: result %+v (isError %v), want %q", i, res.Content, res.IsError, want)
				}
				if w := wantLogs(i); fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("call %d: log messages before the result:\n got: %q\nwant: %q", i, got, w)
				}
			}
		})
	}
	start := time.Now()
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Logf("%d calls, %d at a time, in %v", calls, concurrency, time.Since(start).Round(time.Millisecond))

	mu.Lock()
	defer mu.Unlock()
	for i := range calls {
		if w := wantLogs(i); fmt.Sprint(perCall[i]) != fmt.Sprint(w) {
			t.Errorf("call %d: log messages in all:\n got: %q\nwant: %q", i, perCall[i], w)
		}
	}
	if len(stray) > 0 {
		t.Errorf("log messages of no call: %q", stray)
	}
}

// testJSONMode checks --return-mode json (DESIGN 1.4) on a server of its own.
func testJSONMode(t *testing.T, s *e2eSetup, tg *target, _ *e2eClient) {
	c := startTarget(t, s, tg.mode, "--return-mode", "json", "--workers", "1").connect(t)
	for _, tc := range []struct{ code, want string }{
		{"x = 4\nprint(f'{x=}')\nx", `{"status":"success","output":["x=4"],"return_value":4}`},
		{"'a \"str\"\\n'", `{"status":"success","output":[],"return_value":"a \"str\"\n"}`},
		{"print('no value')", `{"status":"success","output":["no value"],"return_value":null}`},
		// Numbers as JavaScript's JSON.stringify writes them, as upstream did.
		{"{'a': [1, 2.5, None], 'ü': (True, 1.0, 1e20, 1e21, 0.1, float('nan'))}", `{"status":"success","output":[],"return_value":{"a":[1,2.5,null],"ü":[true,1,100000000000000000000,1e+21,0.1,null]}}`},
		{"print('before')\nprint(unknown)", `{"status":"run-error","output":["before"],"error":"Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    print(unknown)\n          ^^^^^^^\nNameError: name 'unknown' is not defined\n"}`},
	} {
		c.expectRun(t, tc.code, tc.want)
	}
}

// testBadArguments checks that wrong arguments give a clear tool error and
// that the server goes on serving.
func testBadArguments(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	for _, tc := range []struct {
		name string
		args any
		want string
	}{
		{"missing", map[string]any{}, `missing required argument "python_code": the Python code to run`},
		{"misspelt", map[string]any{"python": "1 + 1"}, `missing required argument "python_code": the Python code to run`},
		{"number", map[string]any{"python_code": 42}, `invalid argument "python_code": expected a string, got number`},
		{"null", map[string]any{"python_code": nil}, `invalid argument "python_code": expected a string, got null`},
		{"array", map[string]any{"python_code": []string{"1 + 1"}}, `invalid argument "python_code": expected a string, got array`},
	} {
		res, text := c.callTool(t, tc.args)
		if !res.IsError || text != tc.want {
			t.Errorf("%s: arguments %v: got %q (isError %v), want the tool error %q", tc.name, tc.args, text, res.IsError, tc.want)
		}
	}
	c.expectWorks(t)
}

// testExtraArgument sends an argument the input schema does not name.
// Upstream validates arguments with zod, whose objects strip unknown keys,
// so upstream runs the code, and so does a drop-in.
func testExtraArgument(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	res, text := c.callTool(t, map[string]any{"python_code": "1 + 1", "unexpected": true})
	if want := "<status>success</status>\n<return_value>\n2\n</return_value>"; res.IsError || text != want {
		t.Errorf("unknown extra argument: got %q (isError %v), want %q as upstream", text, res.IsError, want)
	}
}

func testOSExit(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	c.expectRun(t, "import os\nprint('exiting', flush=True)\nos._exit(1)", "<status>run-error</status>\n<output>\nexiting\n</output>\n<error>\n"+
		"RuntimeError: the Python worker stopped while running the code (the interpreter exited with status 1)\n</error>")
	c.expectWorks(t)
}

// testWorkerKilled kills the worker running a call from outside.
func testWorkerKilled(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	idle := waitIdleWorkers(t, c.pid, sharedWorkers)
	done := make(chan struct{})
	var res *mcp.CallToolResult
	var err error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName,
			Arguments: map[string]any{"python_code": "print('kill marker', flush=True)\nwhile True:\n    pass"}}})
	}()
	busyWorker(t, c.pid, done, idle...)
	// The code runs. Every worker is killed, those that were idle and any
	// started since, so the call's own is among them whatever a loaded
	// machine made the samples say, and whichever worker took the call.
	for _, w := range denoChildren(t, c.pid) {
		if p, err := os.FindProcess(w.pid); err != nil || p.Kill() != nil {
			t.Fatalf("kill worker %d: %v", w.pid, err)
		}
	}
	<-done // bounded by callTimeout
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	// The reason in parentheses must name the signal.
	prefix := "<status>run-error</status>\n<output>\nkill marker\n</output>\n<error>\n" +
		"RuntimeError: the Python worker stopped while running the code ("
	suffix := ")\n</error>"
	text := resultText(t, res)
	reason, ok := strings.CutPrefix(text, prefix)
	if ok {
		reason, ok = strings.CutSuffix(reason, suffix)
	}
	if res.IsError || !ok || !strings.Contains(reason, "SIGKILL") {
		t.Errorf("result:\n got: %q (isError %v)\nwant: %q", text, res.IsError, prefix+"killed by SIGKILL"+suffix)
	}
	c.expectWorks(t)
}

// testTimeout runs an endless loop on a server with a 2 s time limit. The
// grace is long, so that the interrupt is what stops the code even when a
// loaded machine is slow to run its traceback.
func testTimeout(t *testing.T, s *e2eSetup, tg *target, _ *e2eClient) {
	c := startTarget(t, s, tg.mode, "--timeout", "2s", "--grace", "10s", "--workers", "1").connect(t)
	start := time.Now()
	got := c.run(t, "print('started', flush=True)\nwhile True: pass")
	elapsed := time.Since(start)
	// Interrupted, the code ends with a traceback that shows where it was.
	want := "<status>run-error</status>\n<output>\nstarted\n</output>\n<error>\n" +
		"Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    while True: pass\n                ^^^^\n" +
		"TimeoutError: the code did not finish within 2s and was interrupted\n\n</error>"
	if got != want {
		t.Errorf("result:\n got: %q\nwant: %q", got, want)
	}
	if elapsed < 2*time.Second {
		t.Errorf("the call ended after %v, before the time limit", elapsed)
	}
	c.expectWorks(t)
}

// testMinimalEnvironment starts the server as an MCP client would: from an
// empty working directory, with only PATH and HOME, and with an empty cache,
// so that the first call must install Pyodide. initialize must not wait for it.
func testMinimalEnvironment(t *testing.T, s *e2eSetup, tg *target, _ *e2eClient) {
	dirs := map[string]string{}
	for _, name := range []string{"home", "cache", "cwd"} {
		d, err := os.MkdirTemp(s.tempRoot, tg.mode+"-"+name+"-") // removed by TestMain
		if err != nil {
			t.Fatal(err)
		}
		dirs[name] = d
	}
	l := launch{
		args: []string{"--deno", s.deno, "--cache-dir", dirs["cache"]},
		env:  []string{"PATH=/usr/bin:/bin", "HOME=" + dirs["home"]},
		dir:  dirs["cwd"],
	}
	if runtime.GOOS == "windows" {
		// Its HOME, which os.TempDir falls back to without TMP and TEMP
		// (Go adds SYSTEMROOT itself).
		l.env = append(l.env, "USERPROFILE="+dirs["home"])
	}
	start := time.Now()
	c := startTargetWith(t, s, tg.mode, l).connect(t)
	elapsed := time.Since(start)
	snapshots, _ := filepath.Glob(filepath.Join(dirs["cache"], "snapshots", "*"))
	t.Logf("initialize answered %v after the start", elapsed.Round(time.Millisecond))
	if elapsed > 2*time.Second {
		t.Errorf("initialize answered %v after the start, want < 2s", elapsed)
	}
	if len(snapshots) > 0 {
		t.Errorf("initialize waited for the runtime: the cache already holds %q", snapshots)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if wantDescription, _ := snapshotTool(t); len(tools.Tools) != 1 || tools.Tools[0].Description != wantDescription {
		t.Errorf("tools/list before Pyodide is installed: %+v", tools.Tools)
	}

	start = time.Now()
	c.expectWorks(t)
	t.Logf("first call, installing Pyodide into the empty cache: %v", time.Since(start).Round(time.Millisecond))
}

func testInitialize(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	if c.init.ServerInfo.Name != wantServerName {
		t.Errorf("server name %q, want %q", c.init.ServerInfo.Name, wantServerName)
	}
	if c.init.ServerInfo.Version == "" {
		t.Errorf("no server version")
	}
	if c.init.Instructions != wantInstructions {
		t.Errorf("instructions %q, want %q", c.init.Instructions, wantInstructions)
	}
	if c.init.Capabilities.Tools == nil || c.init.Capabilities.Logging == nil {
		t.Errorf("capabilities %+v, want tools and logging", c.init.Capabilities)
	}
}

// snapshotTool returns run_python_code's description and compact input
// schema as testdata/toolsnaps pins them (TestToolsnaps keeps the file).
func snapshotTool(t *testing.T) (description, inputSchema string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/toolsnaps", toolName+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var tool struct {
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(b, &tool); err != nil {
		t.Fatalf("decode the %s snapshot: %v", toolName, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, tool.InputSchema); err != nil {
		t.Fatal(err)
	}
	return tool.Description, compact.String()
}

func testToolsList(t *testing.T, _ *e2eSetup, _ *target, c *e2eClient) {
	wantDescription, wantInputSchema := snapshotTool(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(tools.Tools) != 1 {
		t.Fatalf("%d tools, want 1: %+v", len(tools.Tools), tools.Tools)
	}
	tool := tools.Tools[0]
	if tool.Name != toolName {
		t.Errorf("tool name %q, want %q", tool.Name, toolName)
	}
	if tool.Description != wantDescription {
		t.Errorf("description:\n got: %q\nwant: %q", tool.Description, wantDescription)
	}

	// The input schema byte for byte, as the server sent it.
	var raw struct {
		Tools []struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(c.rawRequest(t, "tools/list", map[string]any{}), &raw); err != nil {
		t.Fatalf("decode tools/list: %v", err)
	}
	if len(raw.Tools) != 1 {
		t.Fatalf("%d tools, want 1", len(raw.Tools))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw.Tools[0].InputSchema); err != nil {
		t.Fatal(err)
	}
	if compact.String() != wantInputSchema {
		t.Errorf("input schema:\n got: %s\nwant: %s", compact.String(), wantInputSchema)
	}
}
