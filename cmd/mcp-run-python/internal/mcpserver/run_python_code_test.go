package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// TestBadArguments checks that a call without python_code, or with one of
// the wrong type, gets a tool error and that the server keeps serving.
func TestBadArguments(t *testing.T) {
	c := stdioServer(t, &mcptest.FakeRunner{Lines: 1})(t, mcptest.Legacy)
	ctx := mcptest.Context(t)
	tests := []struct {
		name      string
		arguments any
		mention   string
	}{
		{"no arguments", nil, `missing required argument "python_code"`},
		{"other argument", map[string]any{"code": "1"}, `missing required argument "python_code"`},
		{"number", map[string]any{codeArgument: 5}, `invalid argument "python_code": expected a string, got number`},
		{"null", map[string]any{codeArgument: nil}, "expected a string, got null"},
		{"list", map[string]any{codeArgument: []string{"print(1)"}}, "expected a string, got array"},
		{"object", map[string]any{codeArgument: map[string]any{}}, "expected a string, got object"},
		{"arguments not an object", "print(1)", "invalid arguments: expected an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, isError, err := c.Call(ctx, tt.arguments)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !isError || !strings.Contains(text, tt.mention) {
				t.Errorf("got isError %v %q, want a tool error mentioning %q", isError, text, tt.mention)
			}
		})
	}
	text, isError, err := c.Call(ctx, map[string]any{codeArgument: "after", "extra": true})
	if err != nil || isError || text != mcptest.ExpectedXML("after", 1) {
		t.Errorf("good call after bad ones: err %v, isError %v, %q", err, isError, text)
	}
}

// TestRunErrorIsToolError checks that a call the runner cannot run gets a
// tool error with the runner's message.
func TestRunErrorIsToolError(t *testing.T) {
	c := stdioServer(t, &mcptest.FakeRunner{RunErr: errors.New("no worker could be started: deno not found")})(t, mcptest.Legacy)
	text, isError, err := c.Call(mcptest.Context(t), map[string]any{codeArgument: "1"})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if !isError || text != "no worker could be started: deno not found" {
		t.Errorf("got isError %v %q", isError, text)
	}
}

// errorRunner fails the calls of the codes in errs and runs the others as
// mcptest.FakeRunner does; it records the codes it was given.
type errorRunner struct {
	mcptest.FakeRunner
	errs map[string]error

	mu    sync.Mutex
	codes []string
}

func (r *errorRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	r.mu.Lock()
	r.codes = append(r.codes, req.Code)
	r.mu.Unlock()
	if err := r.errs[req.Code]; err != nil {
		return supervisor.Result{}, err
	}
	return r.FakeRunner.Run(ctx, req)
}

// ran returns the codes run so far.
func (r *errorRunner) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.codes...)
}

// TestPoolErrorsAreToolErrors checks that calls the pool cannot take get a
// tool error that says to try again, and that the server keeps serving.
func TestPoolErrorsAreToolErrors(t *testing.T) {
	r := &errorRunner{FakeRunner: mcptest.FakeRunner{Lines: 1}, errs: map[string]error{
		"full":    fmt.Errorf("get a worker: %w", supervisor.ErrQueueFull),
		"waited":  fmt.Errorf("get a worker: %w", supervisor.ErrQueueTimeout),
		"no deno": errors.New("prepare the runtime: deno not found"),
	}}
	c := stdioServer(t, r)(t, mcptest.Legacy)
	ctx := mcptest.Context(t)
	tests := []struct {
		code string
		want string
	}{
		{"full", "the server is busy: get a worker: all workers are busy and the queue of waiting calls is full; try again later"},
		{"waited", "the server is busy: get a worker: no worker was free in time; try again later"},
		{"no deno", "prepare the runtime: deno not found"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			text, isError, err := c.Call(ctx, map[string]any{codeArgument: tt.code})
			if err != nil || !isError || text != tt.want {
				t.Errorf("got err %v, isError %v, %q; want the tool error %q", err, isError, text, tt.want)
			}
			text, isError, err = c.Call(ctx, map[string]any{codeArgument: "next"})
			if err != nil || isError || text != mcptest.ExpectedXML("next", 1) {
				t.Errorf("call after the error: err %v, isError %v, %q", err, isError, text)
			}
		})
	}
}

// jsonModeRunner returns a fixed result.
type jsonModeRunner struct {
	mcptest.FakeRunner
	res supervisor.Result
}

func (r *jsonModeRunner) Run(context.Context, supervisor.Request) (supervisor.Result, error) {
	return r.res, nil
}

// TestReturnModeJSON checks that --return-mode json reaches the tool result.
func TestReturnModeJSON(t *testing.T) {
	tests := []struct {
		name    string
		res     supervisor.Result
		want    string
		isError bool
	}{
		{"success", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"<b>"}, ReturnValue: json.RawMessage("{\n  \"x\": 1.0\n}")},
			`{"status":"success","output":["<b>"],"return_value":{"x":1}}`, false},
		{"invalid return value", supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: json.RawMessage("{")},
			"render return value: invalid JSON", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(&jsonModeRunner{res: tt.res})
			o.ReturnMode = render.ReturnJSON
			s := newRawStdio(t, o)
			s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
			s.recv()
			s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"x"}}}`)
			var resp struct {
				Result struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(s.recv()), &resp); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(resp.Result.Content) != 1 || resp.Result.Content[0].Type != "text" {
				t.Fatalf("content %+v", resp.Result.Content)
			}
			// A tool error is checked by its start; the rest is encoding/json's.
			got := resp.Result.Content[0].Text
			if (tt.isError && !strings.HasPrefix(got, tt.want)) || (!tt.isError && got != tt.want) || resp.Result.IsError != tt.isError {
				t.Errorf("got isError %v %q, want isError %v %q", resp.Result.IsError, got, tt.isError, tt.want)
			}
		})
	}
}

func TestRunArguments(t *testing.T) {
	tests := []struct {
		name     string
		args     any
		sessions bool
		want     runArgs
		wantErr  string
	}{
		{name: "code, other arguments ignored", args: map[string]any{codeArgument: "print(1)", "other": 1}, want: runArgs{code: "print(1)"}},
		{name: "empty code", args: map[string]any{codeArgument: ""}, want: runArgs{}},
		{name: "no arguments", args: nil, wantErr: `missing required argument "python_code"`},
		{name: "not an object", args: []any{1}, wantErr: "expected an object"},
		{name: "code not a string", args: map[string]any{codeArgument: 1.0}, wantErr: "expected a string, got number"},
		{name: "globals", args: map[string]any{codeArgument: "a", globalsArgument: map[string]any{"a": 1.0, "b": []any{"x"}}},
			want: runArgs{code: "a", globals: json.RawMessage(`{"a":1,"b":["x"]}`)}},
		{name: "empty or null globals", args: map[string]any{codeArgument: "a", globalsArgument: nil}, want: runArgs{code: "a"}},
		{name: "globals not an object", args: map[string]any{codeArgument: "a", globalsArgument: "x=1"}, wantErr: "expected an object of global names and their values, got string"},
		{name: "session", sessions: true, args: map[string]any{codeArgument: "a", sessionArgument: "abc"}, want: runArgs{code: "a", session: "abc"}},
		{name: "session without --sessions is ignored", args: map[string]any{codeArgument: "a", sessionArgument: "abc"}, want: runArgs{code: "a"}},
		{name: "empty session", sessions: true, args: map[string]any{codeArgument: "a", sessionArgument: ""}, wantErr: "got an empty string"},
		{name: "session not a string", sessions: true, args: map[string]any{codeArgument: "a", sessionArgument: 7.0}, wantErr: "got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runArguments(tt.args, tt.sessions)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("runArguments = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.code != tt.want.code || string(got.globals) != string(tt.want.globals) || got.session != tt.want.session {
				t.Errorf("runArguments = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestCallKeepsOnlyItsArguments checks that the request mcp-go keeps while a
// call waits and runs holds the tool's arguments only: not the raw copy of
// the arguments, nor an argument the tool does not take.
func TestCallKeepsOnlyItsArguments(t *testing.T) {
	hooks := &server.Hooks{}
	srv := New(testOptions(&mcptest.FakeRunner{}), true, hooks)
	var kept *mcp.CallToolRequest
	// Added after New's, so it sees what they left.
	hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) { kept = req })
	ctx := mcptest.Context(t)
	srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	resp := srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"x","global_variables":{"a":1},"padding":"p"}}}`))
	if _, ok := resp.(mcp.JSONRPCResponse); !ok || kept == nil {
		t.Fatalf("tools/call answered %#v, want a result", resp)
	}
	args, _ := kept.Params.Arguments.(map[string]any)
	if _, ok := args["padding"]; ok || len(args) != 2 || kept.Params.RawArguments != nil {
		t.Errorf("the call kept arguments %v and %d raw bytes, want python_code and global_variables only", slices.Collect(maps.Keys(args)), len(kept.Params.RawArguments))
	}
}

// TestCallBeyondCodeBound checks that a run_python_code call that carries
// more than maxBeyondCode besides its code and globals is refused, with an
// error naming the bound, before it runs, and that large code and globals
// are not.
func TestCallBeyondCodeBound(t *testing.T) {
	big := strings.Repeat("b", maxBeyondCode)
	for _, tc := range []struct {
		name   string
		params string
		want   string // in the refusal; "" when the call runs
	}{
		{"large code", `"arguments":{"python_code":"` + big + big + `"}`, ""},
		{"large globals", `"arguments":{"python_code":"x","global_variables":{"g":"` + big + big + `"}}`, ""},
		{"small extras", `"arguments":{"python_code":"` + big + `","padding":"p"},"_meta":{"x":1}`, ""},
		{"unknown argument", `"arguments":{"python_code":"x","padding":"` + big + `"}`, "more than the 65536 a call may carry beyond its code"},
		{"large meta", `"arguments":{"python_code":"x"},"_meta":{"x":"` + big + `"}`, "more than the 65536"},
		{"unknown param", `"arguments":{"python_code":"x"},"padding":"` + big + `"`, "more than the 65536"},
		// A retry's answers are its code's, bounded as code is.
		{"large answers", `"arguments":{"python_code":"x"},"inputResponses":{"q0":{"role":"assistant","content":{"type":"text","text":"` + big + big + `"}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRefusal(t, tc.params, tc.want) })
	}
}

// checkRefusal serves a tools/call of run_python_code whose params hold
// params besides the tool's name, and checks that it is refused with an
// error that says want before it runs, or, when want is "", that it runs.
func checkRefusal(t *testing.T, params, want string) {
	t.Helper()
	runs := 0
	r := &mcptest.FakeRunner{Block: func(context.Context, string) error { runs++; return nil }}
	srv := New(testOptions(r), true, &server.Hooks{})
	ctx := mcptest.Context(t)
	srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	resp := srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code",`+params+`}}`))
	refusal, refused := resp.(mcp.JSONRPCError)
	switch {
	case want == "" && (refused || runs != 1):
		t.Errorf("answered %#v after %d runs, want the call run", resp, runs)
	case want != "" && (!refused || runs != 0):
		t.Errorf("answered %#v after %d runs, want a refusal before the run", resp, runs)
	case refused && (refusal.Error.Code != mcp.INVALID_REQUEST || !strings.Contains(refusal.Error.Message, want)):
		t.Errorf("refused with %d %q, want %d naming %q", refusal.Error.Code, refusal.Error.Message, mcp.INVALID_REQUEST, want)
	}
}
