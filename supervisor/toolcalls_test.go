package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testTools is a tool backend for these tests: the supervisor's side of code
// mode runs for real, with real workers; only the MCP servers are left out
// (the front end's toolbox and the end-to-end tests have those).
type testTools struct {
	calls     atomic.Int32
	cancelled atomic.Int32 // calls of "wait" that saw their context end
}

func (tt *testTools) List() []ToolSpec {
	return []ToolSpec{
		{Server: "t", Name: "double", Description: "Twice n.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		{Server: "t", Name: "text", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "t", Name: "broken", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "t", Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
}

func (tt *testTools) Call(ctx context.Context, server, tool string, args json.RawMessage) (ToolResult, error) {
	tt.calls.Add(1)
	switch tool {
	case "double":
		var a struct{ N int }
		if err := json.Unmarshal(args, &a); err != nil {
			return ToolResult{}, err
		}
		b, _ := json.Marshal(map[string]int{"n": 2 * a.N})
		return ToolResult{Structured: b}, nil
	case "text":
		return ToolResult{Text: "plain text"}, nil
	case "broken":
		return ToolResult{Text: "it broke", IsError: true}, nil
	case "wait":
		<-ctx.Done()
		tt.cancelled.Add(1)
		return ToolResult{}, ctx.Err()
	}
	return ToolResult{}, errors.New("no such tool")
}

func TestToolCalls(t *testing.T) {
	tt := &testTools{}
	s := start(t, Config{Workers: 1, Tools: tt, ToolCalls: 5, Timeout: 3 * time.Second, Grace: 5 * time.Second})
	cases := []struct{ name, code, want string }{
		{"structured", "await mcp_tools.t.double(n=21)", `{"n": 42}`},
		{"text", "await mcp_tools.t.text()", `"plain text"`},
		{"a tool error", "try:\n    await mcp_tools.t.broken()\nexcept mcp_tools.ToolError as e:\n    r = str(e)\nr", `"it broke"`},
		{"the limit of calls", "r = []\nfor i in range(6):\n    try:\n        r.append((await mcp_tools.t.double(n=i))['n'])\n    except mcp_tools.ToolError as e:\n        r.append(str(e))\nr",
			`[0, 2, 4, 6, 8, "this run has made more than 5 tool calls, the limit (--tool-calls)"]`},
		{"300 calls at once, past the limit", "import asyncio\nr = await asyncio.gather(*[mcp_tools.t.double(n=i) for i in range(300)], return_exceptions=True)\n[sum(isinstance(x, dict) for x in r), sum(isinstance(x, mcp_tools.ToolError) for x in r)]",
			`[5, 295]`},
		{"Python checks arguments first", "try:\n    await mcp_tools.t.double()\nexcept TypeError as e:\n    r = str(e)\nr", `"mcp_tools.t.double() missing required argument(s): n"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := run(t, s, tc.code)
			var got any
			if res.Status != StatusSuccess || json.Unmarshal(res.ReturnValue, &got) != nil {
				t.Fatalf("%+v (%s)", res, res.Error)
			}
			compact, _ := json.Marshal(got)
			var want any
			_ = json.Unmarshal([]byte(tc.want), &want)
			wantCompact, _ := json.Marshal(want)
			if string(compact) != string(wantCompact) {
				t.Errorf("got %s, want %s", compact, wantCompact)
			}
		})
	}

	t.Run("the time limit cancels a pending call", func(t *testing.T) {
		before := tt.cancelled.Load()
		start := time.Now()
		res, _ := run(t, s, "await mcp_tools.t.wait()")
		if res.Status != StatusRunError || !strings.Contains(res.Error, "TimeoutError") {
			t.Errorf("%+v", res)
		}
		// Cancelled, the call's answer lets Python take the interrupt: the
		// run ends within the grace, its worker alive until retired.
		if strings.Contains(res.Error, "killed") {
			t.Errorf("the run was killed rather than interrupted: %s", res.Error)
		}
		if d := time.Since(start); d > 3*time.Second+4*time.Second {
			t.Errorf("took %v", d)
		}
		if tt.cancelled.Load() != before+1 {
			t.Errorf("the pending tool call was not cancelled")
		}
	})
}

func TestToolCallsWithoutTools(t *testing.T) {
	s := start(t, Config{Workers: 1})
	res, _ := run(t, s, "import sys\n'mcp_tools' in sys.modules")
	if res.Status != StatusSuccess || string(res.ReturnValue) != "false" {
		t.Errorf("without tools: %+v", res)
	}
}
