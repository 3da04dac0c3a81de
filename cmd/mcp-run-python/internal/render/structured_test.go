package render

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// compileOutputSchema compiles OutputSchema under draft, which it must mean
// the same in: 2020-12, MCP's default, and draft-07, the input schema's.
func compileOutputSchema(t *testing.T, draft *jsonschema.Draft) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(OutputSchema()))
	if err != nil {
		t.Fatalf("decode the output schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
	if err := c.AddResource("output.json", doc); err != nil {
		t.Fatalf("add the output schema: %v", err)
	}
	s, err := c.Compile("output.json")
	if err != nil {
		t.Fatalf("compile the output schema: %v", err)
	}
	return s
}

// outputSchemas are OutputSchema compiled under each draft it must hold in.
func outputSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	return map[string]*jsonschema.Schema{
		"2020-12":  compileOutputSchema(t, jsonschema.Draft2020),
		"draft-07": compileOutputSchema(t, jsonschema.Draft7),
	}
}

// validate checks structured against every draft's schema and returns the
// first error.
func validate(t *testing.T, schemas map[string]*jsonschema.Schema, structured json.RawMessage) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(structured))
	if err != nil {
		t.Fatalf("structured content %s is not JSON: %v", structured, err)
	}
	for draft, s := range schemas {
		if err := s.Validate(v); err != nil {
			return &draftError{draft, err}
		}
	}
	return nil
}

// draftError is a validation error under one draft.
type draftError struct {
	draft string
	err   error
}

func (e *draftError) Error() string { return e.draft + ": " + e.err.Error() }

// TestStructured checks each kind of result's structuredContent in JSON
// mode: the object its text holds, byte for byte, which the output schema
// validates.
func TestStructured(t *testing.T) {
	files := []File{{Path: "out/plot.png", Size: 1234, MIMEType: "image/png", URI: "call://c1/out/plot.png"}}
	tests := []struct {
		name    string
		res     supervisor.Result
		files   []File
		isError bool   // a tool error, whose text is the message
		message string // its message
		want    any    // the object, as encoding/json decodes it
	}{
		{name: "return value", res: supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"x=4"}, ReturnValue: raw("4")},
			want: map[string]any{"status": "success", "output": []any{"x=4"}, "return_value": 4.0}},
		{name: "None", res: supervisor.Result{Status: supervisor.StatusSuccess},
			want: map[string]any{"status": "success", "output": []any{}, "return_value": nil}},
		{name: "str", res: supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true, ReturnValue: str("a \"b\"\n")},
			want: map[string]any{"status": "success", "output": []any{}, "return_value": "a \"b\"\n"}},
		{name: "object", res: supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: raw("{\n  \"a\": [1.0, null],\n  \"ü\": true\n}")},
			want: map[string]any{"status": "success", "output": []any{}, "return_value": map[string]any{"a": []any{1.0, nil}, "ü": true}}},
		{name: "dependencies", res: supervisor.Result{Status: supervisor.StatusSuccess, Dependencies: []string{"numpy", "pydantic>=2"}, ReturnValue: raw("1")},
			want: map[string]any{"status": "success", "dependencies": []any{"numpy", "pydantic>=2"}, "output": []any{}, "return_value": 1.0}},
		{name: "files", res: supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"saved"}}, files: files,
			want: map[string]any{"status": "success", "output": []any{"saved"}, "return_value": nil, "files": []any{
				map[string]any{"path": "out/plot.png", "size": 1234.0, "mime_type": "image/png", "uri": "call://c1/out/plot.png"}}}},
		{name: "run error with output", res: supervisor.Result{Status: supervisor.StatusRunError, Output: []string{"before"}, Error: designTraceback},
			want: map[string]any{"status": "run-error", "output": []any{"before"}, "error": designTraceback}},
		{name: "run error with files", res: supervisor.Result{Status: supervisor.StatusRunError, Error: "boom\n"}, files: files,
			want: map[string]any{"status": "run-error", "output": []any{}, "error": "boom\n", "files": []any{
				map[string]any{"path": "out/plot.png", "size": 1234.0, "mime_type": "image/png", "uri": "call://c1/out/plot.png"}}}},
		{name: "install error", res: supervisor.Result{Status: supervisor.StatusInstallError, Dependencies: []string{"nope"}, Error: `cannot install "nope"`},
			want: map[string]any{"status": "install-error", "dependencies": []any{"nope"}, "output": []any{}, "error": `cannot install "nope"`}},
		{name: "tool error", isError: true, message: "the server is busy: queue full; try again later",
			want: map[string]any{"status": "error", "output": []any{}, "error": "the server is busy: queue full; try again later"}},
		{name: "tool error escapes", isError: true, message: "bad \"arg\"\n\x01 </error> \u2028",
			want: map[string]any{"status": "error", "output": []any{}, "error": "bad \"arg\"\n\x01 </error> \u2028"}},
	}
	schemas := outputSchemas(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.message
			if !tt.isError {
				var err error
				if text, err = Text(ReturnJSON, tt.res, tt.files); err != nil {
					t.Fatalf("render: %v", err)
				}
			}
			structured := Structured(text, tt.isError)
			if !tt.isError && string(structured) != text {
				t.Errorf("structured content %s, want the text %s", structured, text)
			}
			var got any
			if err := json.Unmarshal(structured, &got); err != nil {
				t.Fatalf("structured content %s: %v", structured, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("structured content %#v, want %#v", got, tt.want)
			}
			if err := validate(t, schemas, structured); err != nil {
				t.Errorf("the output schema rejects %s: %v", structured, err)
			}
		})
	}
}

// TestStructuredGoldenValidates checks that the schema takes every golden
// case of JSON mode.
func TestStructuredGoldenValidates(t *testing.T) {
	schemas := outputSchemas(t)
	for _, tc := range renderCases() {
		text, err := Text(ReturnJSON, tc.res, nil)
		if err != nil {
			t.Fatalf("%s: render: %v", tc.name, err)
		}
		if err := validate(t, schemas, Structured(text, false)); err != nil {
			t.Errorf("%s: the output schema rejects %s: %v", tc.name, text, err)
		}
	}
}

// TestOutputSchemaRejects checks that the schema is as strict as JSON mode:
// what renderJSON never writes does not validate.
func TestOutputSchemaRejects(t *testing.T) {
	tests := []struct{ name, object, why string }{
		{"no status", `{"output":[],"return_value":1}`, "status"},
		{"unknown status", `{"status":"ok","output":[],"return_value":1}`, "status"},
		{"no output", `{"status":"success","return_value":1}`, "output"},
		{"output not lines", `{"status":"success","output":[1],"return_value":1}`, "output"},
		{"success without return_value", `{"status":"success","output":[]}`, "return_value"},
		{"success with error", `{"status":"success","output":[],"return_value":1,"error":"x"}`, "error"},
		{"run error without error", `{"status":"run-error","output":[]}`, "error"},
		{"run error with return_value", `{"status":"run-error","output":[],"error":"x","return_value":1}`, "return_value"},
		{"tool error without error", `{"status":"error","output":[]}`, "error"},
		{"unknown key", `{"status":"success","output":[],"return_value":1,"extra":1}`, "extra"},
		{"dependencies not strings", `{"status":"success","dependencies":[1],"output":[],"return_value":1}`, "dependencies"},
		{"file without uri", `{"status":"success","output":[],"return_value":1,"files":[{"path":"a","size":1,"mime_type":"text/plain"}]}`, "uri"},
		{"file size fractional", `{"status":"success","output":[],"return_value":1,"files":[{"path":"a","size":1.5,"mime_type":"text/plain","uri":"call://c/a"}]}`, "size"},
		{"file size negative", `{"status":"success","output":[],"return_value":1,"files":[{"path":"a","size":-1,"mime_type":"text/plain","uri":"call://c/a"}]}`, "size"},
	}
	schemas := outputSchemas(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(t, schemas, json.RawMessage(tt.object))
			if err == nil {
				t.Fatalf("the output schema takes %s", tt.object)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("rejecting %s: %v, want it to name %q", tt.object, err, tt.why)
			}
		})
	}
}
