package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// structuredRunner returns a fixed result, or fails the code "fail".
type structuredRunner struct {
	mcptest.FakeRunner
	res supervisor.Result
}

func (r *structuredRunner) Run(_ context.Context, req supervisor.Request) (supervisor.Result, error) {
	if req.Code == "fail" {
		return supervisor.Result{}, errors.New("prepare the runtime: deno not found")
	}
	return r.res, nil
}

// TestStructuredOutput checks, on the wire, that JSON mode's tool declares
// the output schema and that each way of answering carries structured
// content beside its unchanged text, and that XML mode has neither.
func TestStructuredOutput(t *testing.T) {
	success := supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"<b>"}, ReturnValue: json.RawMessage("{\n  \"x\": 1.0\n}")}
	calls := []struct {
		name, args string
		res        supervisor.Result
		text       string // the text content; a tool error's by its start
		isError    bool
	}{
		{"success", `{"python_code":"x"}`, success, `{"status":"success","output":["<b>"],"return_value":{"x":1}}`, false},
		{"run error", `{"python_code":"x"}`, supervisor.Result{Status: supervisor.StatusRunError, Output: []string{"a"}, Error: "boom\n"},
			`{"status":"run-error","output":["a"],"error":"boom\n"}`, false},
		{"bad arguments", `{}`, success, `missing required argument "python_code": the Python code to run`, true},
		{"runner error", `{"python_code":"fail"}`, success, "prepare the runtime: deno not found", true},
		{"render error", `{"python_code":"x"}`, supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: json.RawMessage("{")},
			"render return value: invalid JSON", true},
	}
	for _, mode := range []render.ReturnMode{render.ReturnXML, render.ReturnJSON} {
		for _, call := range calls {
			t.Run(string(mode)+"/"+call.name, func(t *testing.T) {
				o := testOptions(&structuredRunner{res: call.res})
				o.ReturnMode = mode
				s := newRawStdio(t, o)
				s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
				s.recv()
				s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
				var list struct {
					Result struct {
						Tools []map[string]json.RawMessage `json:"tools"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(s.recv()), &list); err != nil || len(list.Result.Tools) != 1 {
					t.Fatalf("tools/list: %v, %d tools", err, len(list.Result.Tools))
				}
				schema, declared := list.Result.Tools[0]["outputSchema"]
				if mode == render.ReturnXML && declared {
					t.Errorf("XML mode declares an outputSchema: %s", schema)
				}
				if mode == render.ReturnJSON && compact(t, schema) != compact(t, render.OutputSchema()) {
					t.Errorf("outputSchema %s, want render.OutputSchema", schema)
				}

				s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python_code","arguments":` + call.args + `}}`)
				var resp struct {
					Result map[string]json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal([]byte(s.recv()), &resp); err != nil {
					t.Fatalf("decode: %v", err)
				}
				var content []struct{ Type, Text string }
				if err := json.Unmarshal(resp.Result["content"], &content); err != nil || len(content) != 1 {
					t.Fatalf("content %s: %v", resp.Result["content"], err)
				}
				text := content[0].Text
				if mode == render.ReturnXML {
					if structured, ok := resp.Result["structuredContent"]; ok {
						t.Errorf("XML mode sends structuredContent %s", structured)
					}
					return
				}
				isError := string(resp.Result["isError"]) == "true"
				if isError != call.isError || (!isError && text != call.text) || !strings.HasPrefix(text, call.text) {
					t.Errorf("text %q (isError %v), want %q (isError %v)", text, isError, call.text, call.isError)
				}
				if got, want := compact(t, resp.Result["structuredContent"]), compact(t, render.Structured(text, call.isError)); got != want {
					t.Errorf("structuredContent %s, want %s", got, want)
				}
			})
		}
	}
}

// compact returns the JSON value raw compacted, with encoding/json's HTML
// escapes, which a message on the wire may have.
func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, b.Bytes())
	return out.String()
}
