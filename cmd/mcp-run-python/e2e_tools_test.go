package main_test

// Code mode end to end: the real binary, with --tools-config naming two
// small real MCP servers made here (this test binary over stdio, and one
// over Streamable HTTP in this process), and Python calling their tools.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// toolServerRole makes this test binary the stdio tool server (see TestMain).
const toolServerRole = "MCP_RUN_PYTHON_TEST_TOOL_SERVER"

// toolServer is the MCP server whose tools code calls in these tests. calls
// counts the calls of add, which the server saw.
func toolServer(calls *atomic.Int64) *server.MCPServer {
	s := server.NewMCPServer("tools", "1.0")
	s.AddTool(mcp.NewTool("add", mcp.WithDescription("Add two numbers. The second may not be negative."),
		mcp.WithNumber("a", mcp.Required(), mcp.Description("the first")),
		mcp.WithNumber("b", mcp.Required(), mcp.Min(0.0))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			sum := req.GetFloat("a", 0) + req.GetFloat("b", 0)
			return mcp.NewToolResultStructured(map[string]any{"sum": sum}, fmt.Sprint(sum)), nil
		})
	s.AddTool(mcp.NewTool("calls", mcp.WithDescription("How many times add was called.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(calls.Load())), nil
		})
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Say text back."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("boom: the tool failed"), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Waits."), mcp.WithNumber("seconds", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(req.GetFloat("seconds", 0) * float64(time.Second))):
			}
			return mcp.NewToolResultText("done"), nil
		})
	s.AddTool(mcp.NewTool("die", mcp.WithDescription("Ends the server's process.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(mcp.NewTool("big", mcp.WithDescription("Answers mb MiB of text."), mcp.WithNumber("mb", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Repeat("x", req.GetInt("mb", 0)<<20)), nil
		})
	s.AddTool(mcp.NewTool("secret", mcp.WithDescription("Not allowed by --tools-allow.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("leaked"), nil
		})
	return s
}

// serveToolServer is the stdio role of this binary.
func serveToolServer() {
	var calls atomic.Int64
	if err := server.ServeStdio(toolServer(&calls)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// toolServers are the tool servers of a code-mode test: "calc", this binary
// over stdio, and "web", an HTTP server in this process.
type toolServers struct {
	webURL   string       // web's MCP endpoint
	webCalls atomic.Int64 // calls of web's add
}

// toolsTarget starts a server in mode with code mode on, and its tool
// servers.
func toolsTarget(t *testing.T, mode string, extra ...string) (*target, *toolServers) {
	t.Helper()
	s := setup(t)
	args, ts := toolsArgs(t, s)
	return startTargetWith(t, s, mode, launch{args: append(args, extra...)}), ts
}

// toolsArgs starts the tool servers and returns the flags of a server that
// calls them.
func toolsArgs(t testing.TB, s *e2eSetup) ([]string, *toolServers) {
	t.Helper()
	ts := &toolServers{}
	web := httptest.NewServer(server.NewStreamableHTTPServer(toolServer(&ts.webCalls)))
	t.Cleanup(web.Close)
	ts.webURL = web.URL + "/mcp"
	cfg := map[string]any{"mcpServers": map[string]any{
		"calc": map[string]any{"command": os.Args[0], "args": []string{"-test.run=^$"}, "env": map[string]string{toolServerRole: "1"}},
		"web":  map[string]any{"url": ts.webURL},
		// Down for good: nothing listens on port 1 of loopback.
		"down": map[string]any{"url": "http://127.0.0.1:1/mcp"},
	}}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return append(s.baseArgs(), "--tools-config", path, "--tools-allow", "calc.*,down.*,web.add,web.big,web.calls,web.echo"), ts
}

func TestCodeModeCallsTools(t *testing.T) {
	tg, ts := toolsTarget(t, modeStdio, "--disable-networking", "--timeout", "5s")
	c := tg.connect(t)

	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	desc := tools.Tools[0].Description
	for _, want := range []string{"mcp_tools.calc.add(", "mcp_tools.web.echo(", "ToolError"} {
		if !strings.Contains(desc, want) {
			t.Errorf("run_python_code's description lacks %q:\n%s", want, desc)
		}
	}
	if strings.Contains(desc, "web.secret") || strings.Contains(desc, "web.fail") {
		t.Errorf("the description lists a tool --tools-allow leaves out:\n%s", desc)
	}

	cases := []struct{ name, code, want string }{
		{"structured and text results",
			"r = await mcp_tools.calc.add(a=1, b=2)\nt = await mcp_tools.web.echo(text='hi')\n[r, t]",
			"<status>success</status>\n<return_value>\n[\n  {\n    \"sum\": 3\n  },\n  \"hi\"\n]\n</return_value>"},
		{"a failing tool raises ToolError",
			"try:\n    await mcp_tools.calc.fail()\nexcept mcp_tools.ToolError as e:\n    r = f'{type(e).__name__}: {e}'\nr",
			"<status>success</status>\n<return_value>\nToolError: boom: the tool failed\n</return_value>"},
		{"arguments Python refuses",
			"try:\n    await mcp_tools.web.add(a='x', b=1)\nexcept TypeError as e:\n    r = str(e)\nr",
			"<status>success</status>\n<return_value>\nmcp_tools.web.add(): argument a must be number, not str\n</return_value>"},
		{"arguments the schema refuses never reach the tool",
			"try:\n    await mcp_tools.web.add(a=1, b=-1)\nexcept mcp_tools.ToolError as e:\n    r = 'invalid arguments' in str(e)\n[r, await mcp_tools.web.calls()]",
			"<status>success</status>\n<return_value>\n[\n  true,\n  \"0\"\n]\n</return_value>"},
		{"200 calls in a loop",
			"s = 0\nfor i in range(200):\n    s += (await mcp_tools.web.add(a=i, b=1))['sum']\ns",
			"<status>success</status>\n<return_value>\n20100\n</return_value>"},
		{"tools not allowed are not there",
			"hasattr(mcp_tools.web, 'secret'), hasattr(mcp_tools.web, 'fail'), hasattr(mcp_tools.calc, 'secret')",
			"<status>success</status>\n<return_value>\n[\n  false,\n  false,\n  true\n]\n</return_value>"},
		{"a server down since the start raises ToolError with the reason",
			"try:\n    await mcp_tools.down.search(q='x')\nexcept mcp_tools.ToolError as e:\n    r = str(e)\nr.startswith('tool server down is not connected: '), r.endswith('; retrying'), hasattr(mcp_tools.down, '__wrapped__')",
			"<status>success</status>\n<return_value>\n[\n  true,\n  true,\n  false\n]\n</return_value>"},
		{"USAGE's example adds up", usageToolsLoop(t),
			"<status>success</status>\n<return_value>\n5050\n</return_value>"},
		{"help shows the description and parameters",
			"import mcp_tools\nhelp(mcp_tools.calc.add)",
			""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := c.run(t, tc.code)
			if tc.want == "" {
				for _, want := range []string{"add(*, a, b)", "Add two numbers.", "a (number, required): the first", "b (number, required)"} {
					if !strings.Contains(got, want) {
						t.Errorf("help output lacks %q:\n%s", want, got)
						return
					}
				}
				return
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
	t.Run("calls past mcp_tools are checked too", func(t *testing.T) {
		// Code can send any tool call frame it likes: the trusted side
		// checks each, whatever the module would have done.
		got := c.run(t, "import json\nfrom _mcp_tools_bridge import call\n"+
			"r = [json.loads(await call(s, n, a)).get('error') for s, n, a in [('calc', 'add', '[1, 2]'), ('web', 'secret', '{}'), ('nosuch', 'x', '{}'), ('web', 'add', '{\"a\": 1}')]]\nr")
		for _, want := range []string{"want a JSON object", "not allowed (--tools-allow)", "no tool server is named", "invalid arguments for web.add"} {
			if !strings.Contains(got, want) {
				t.Errorf("lacks %q:\n%s", want, got)
			}
		}
	})
	if n := ts.webCalls.Load(); n != 200 {
		t.Errorf("web's add ran %d times, want 200: the loop's, and not the one with invalid arguments", n)
	}

	t.Run("the code's own network stays off", func(t *testing.T) {
		got := c.run(t, "import js\ntry:\n    await js.fetch('"+ts.webURL+"')\n    r = 'reached'\nexcept Exception as e:\n    r = type(e).__name__\nr")
		if strings.Contains(got, "reached") {
			t.Errorf("code reached the tool server's host itself: %s", got)
		}
	})

	t.Run("a slow tool is stopped by the time limit", func(t *testing.T) {
		start := time.Now()
		got := c.run(t, "await mcp_tools.calc.slow(seconds=60)")
		if !strings.Contains(got, "TimeoutError") {
			t.Errorf("got %s, want a TimeoutError", got)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("the call took %v, past its 5 s limit and the grace", d)
		}
	})

	t.Run("a 32 MiB result is refused as it is read", func(t *testing.T) {
		// --tool-result-limit is 1 MiB: no message past 7 MiB is read whole.
		got := c.run(t, "r = []\nfor tool in [mcp_tools.calc.big, mcp_tools.web.big]:\n    try:\n        await tool(mb=32)\n        r.append('read')\n    except mcp_tools.ToolError as e:\n        r.append(str(e))\nr")
		for _, server := range []string{"calc", "web"} {
			if want := "the answer of " + server + ".big was more than 7.0 MiB, the read limit that --tool-result-limit sets"; !strings.Contains(got, want) {
				t.Errorf("lacks %q:\n%s", want, got)
			}
		}
		if rss := rssOf(t, c.pid); rss > 200<<20 {
			t.Errorf("the server's resident memory is %d MiB after the results", rss>>20)
		}
		t.Logf("server RSS after two 32 MiB results: %d MiB", rssOf(t, c.pid)>>20)
	})

	t.Run("a tool server that died", func(t *testing.T) {
		got := c.run(t, "try:\n    await mcp_tools.calc.die()\n    r = 'answered'\nexcept mcp_tools.ToolError as e:\n    r = 'ToolError'\n[r, await mcp_tools.web.echo(text='web still works')]")
		if want := "<status>success</status>\n<return_value>\n[\n  \"ToolError\",\n  \"web still works\"\n]\n</return_value>"; got != want {
			t.Errorf("after calc died: got\n%s\nwant\n%s", got, want)
		}
		c.expectWorks(t)
		// The server is started again, with backoff: calc answers again.
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := c.run(t, "try:\n    r = (await mcp_tools.calc.add(a=1, b=1))['sum']\nexcept mcp_tools.ToolError as e:\n    r = str(e)\nr")
			if strings.Contains(got, "<return_value>\n2\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("calc never came back: %s", got)
			}
			time.Sleep(200 * time.Millisecond) // bounded polling for the reconnection
		}
	})
}

// BenchmarkToolCallOverhead: what a tool call costs code beyond the tool's
// own time, which is the same call made by a Go MCP client, in another
// process, to its own copy of the tool server over the same transport
// (stdio). Both are the median of every call's time, over 7 runs of 200
// calls, each run in a fresh interpreter.
func BenchmarkToolCallOverhead(b *testing.B) {
	s := benchSetup(b)
	args, _ := toolsArgs(b, s)
	srv, _ := startStdio(b, s.bin, append(args, "stdio"))
	const calls = 200
	loop := fmt.Sprintf("import time\nr = []\nfor _ in range(%d):\n    t = time.perf_counter()\n    await mcp_tools.calc.echo(text='x')\n    r.append(int((time.perf_counter() - t) * 1e6))\n' '.join(map(str, r))", calls)
	direct, err := client.NewStdioMCPClient(os.Args[0], []string{toolServerRole + "=1"}, "-test.run=^$")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	ctx := context.Background()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = e2eProtocol
	if _, err := direct.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	echo := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}}
	var fromCode, own []time.Duration
	for range 7 {
		res, err := srv.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": loop}}})
		if err != nil {
			b.Fatal(err)
		}
		text, _ := onlyText(res)
		body, ok := strings.CutPrefix(text, "<status>success</status>\n<return_value>\n")
		if !ok {
			b.Fatalf("the loop's result: %s", text)
		}
		for _, f := range strings.Fields(strings.TrimSuffix(body, "\n</return_value>")) {
			var us int64
			if _, err := fmt.Sscan(f, &us); err != nil {
				b.Fatalf("the loop's result: %s", text)
			}
			fromCode = append(fromCode, time.Duration(us)*time.Microsecond)
		}
		for range calls {
			start := time.Now()
			if _, err := direct.CallTool(ctx, echo); err != nil {
				b.Fatal(err)
			}
			own = append(own, time.Since(start))
		}
	}
	c, o := percentile(fromCode, 0.5), percentile(own, 0.5)
	report(b, "a tool call from code (stdio tool server), median of 7×200", ms(c), "ms", "")
	report(b, "a tool call from code, p90", ms(percentile(fromCode, 0.9)), "ms", "")
	report(b, "the same call from a Go MCP client (the tool's own time)", ms(o), "ms", "")
	report(b, "overhead of a tool call from code, median", ms(c-o), "ms", "≤ 1 ms")
}

// usageToolsLoop is the loop of docs/USAGE.md's code-mode example, which
// users copy, with its total as the call's value.
func usageToolsLoop(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "USAGE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "```python\ntotal = 0\n")
	loop, _, ok2 := strings.Cut(block, "try:\n")
	if !ok || !ok2 {
		t.Fatal("docs/USAGE.md has no code-mode example that starts with total = 0 and then a try")
	}
	return "total = 0\n" + loop + "total"
}
