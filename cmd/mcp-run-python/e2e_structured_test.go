package main_test

// End-to-end tests of JSON mode's structured results (DESIGN 1.4): the
// outputSchema run_python_code declares, and the structuredContent every
// result carries beside its unchanged text, over every transport.
//
//	go test ./cmd/mcp-run-python/ -run TestE2EStructured -count=1 -v

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// structuredCase is one call of TestE2EStructured and what it must answer.
type structuredCase struct {
	name string
	code any // the python_code argument; nil leaves it out
	// want is the structured content, and for a result (not a tool error)
	// also its text, byte for byte. {uri} stands for the URI of the
	// result's one file, which the server makes up.
	want    string
	isError bool
}

// TestE2EStructured runs calls of every kind on a --return-mode json server
// over each transport: the tool lists the output schema of the snapshot,
// each result's structuredContent is the object of its text (a tool error's
// is {"status":"error",...} around its message), and every one validates
// against the schema the server declared.
func TestE2EStructured(t *testing.T) {
	s := setup(t)
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			repo := &pt.Repo{}
			repo.Add(pt.Wheel{Name: "jsonshout", Version: "1.0", Source: "def shout(s):\n    return s.upper() + '!'\n"})
			srv, _ := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
			index := srv.URL + "/simple/"
			c := startTarget(t, s, mode, "--return-mode", "json", "--workers", "1", "--index-url", index).connect(t)
			expectToolsnaps(t, c, "json")
			schema := listedOutputSchema(t, c)

			for _, tc := range []structuredCase{
				{name: "success", code: "x = 4\nprint(f'{x=}')\nx",
					want: `{"status":"success","output":["x=4"],"return_value":4}`},
				{name: "return_value", code: "print('a', 'b')\n{'a': [1, 2.5, None], 'ü': (True, 'str <&>')}",
					want: `{"status":"success","output":["a b"],"return_value":{"a":[1,2.5,null],"ü":[true,"str <&>"]}}`},
				{name: "no_return_value", code: "print('no value')",
					want: `{"status":"success","output":["no value"],"return_value":null}`},
				// Integers past 2^53 keep their digits; keys as pydantic_core
				// makes them, NaN's too (issue 37).
				{name: "big_int", code: "[2**64 + 1, -10**30]",
					want: `{"status":"success","output":[],"return_value":[18446744073709551617,-1000000000000000000000000000000]}`},
				{name: "keys", code: "{float('nan'): 1, float('-inf'): 2, 1e20: 3, (1, 'a'): 4, b'k': 5}",
					want: `{"status":"success","output":[],"return_value":{"nan":1,"-inf":2,"1e+20":3,"1,a":4,"k":5}}`},
				{name: "not_json", code: "b'ok\\xff'",
					want: `{"status":"run-error","output":[],"error":"Traceback (most recent call last):\nValueError: the return value cannot be JSON: bytes b'\\xff' at index 2 are not UTF-8 text\n"}`},
				{name: "run_error_with_output", code: "print('before')\nprint(unknown)",
					want: `{"status":"run-error","output":["before"],"error":"Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    print(unknown)\n          ^^^^^^^\nNameError: name 'unknown' is not defined\n"}`},
				{name: "dependencies", code: script(`"jsonshout"`, "import jsonshout\njsonshout.shout('hi')"),
					want: `{"status":"success","dependencies":["jsonshout"],"output":[],"return_value":"HI!"}`},
				{name: "install_error", code: script(`"no-such-package>=1"`, "1"),
					want: `{"status":"install-error","dependencies":["no-such-package>=1"],"output":[],"error":"cannot install \"no-such-package>=1\": no package named no-such-package on the index ` + index + `"}`},
				{name: "files", code: putFiles + "put('out.txt', 'hello')",
					want: `{"status":"success","output":[],"return_value":null,"files":[{"path":"out.txt","size":5,"mime_type":"text/plain","uri":"{uri}"}]}`},
				{name: "tool_error", isError: true,
					want: `{"status":"error","output":[],"error":"missing required argument \"python_code\": the Python code to run"}`},
			} {
				t.Run(tc.name, func(t *testing.T) { expectStructured(t, c, schema, tc) })
			}
		})
	}
}

// listedOutputSchema returns run_python_code's outputSchema as the server
// lists it, compiled.
func listedOutputSchema(t *testing.T, c *e2eClient) *jsonschema.Schema {
	t.Helper()
	list := rawResult[struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}](t, c, "tools/list")
	if len(list.Tools) != 1 || list.Tools[0].Name != toolName || list.Tools[0].OutputSchema == nil {
		t.Fatalf("tools/list: %+v, want %s with an outputSchema", list.Tools, toolName)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(list.Tools[0].OutputSchema))
	if err != nil {
		t.Fatalf("decode the outputSchema: %v", err)
	}
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("output.json", doc); err != nil {
		t.Fatalf("add the outputSchema: %v", err)
	}
	schema, err := compiler.Compile("output.json")
	if err != nil {
		t.Fatalf("compile the outputSchema: %v", err)
	}
	return schema
}

// expectStructured makes tc's call and checks its answer.
func expectStructured(t *testing.T, c *e2eClient, schema *jsonschema.Schema, tc structuredCase) {
	t.Helper()
	args := map[string]any{}
	if tc.code != nil {
		args["python_code"] = tc.code
	}
	res := c.callNamed(t, toolName, args)
	text := firstText(t, res)
	want := tc.want
	if strings.Contains(want, "{uri}") {
		want = strings.ReplaceAll(want, "{uri}", onlyLink(t, res))
	}
	if res.IsError != tc.isError {
		t.Fatalf("isError %v (%q), want %v", res.IsError, text, tc.isError)
	}
	if !tc.isError && text != want {
		t.Errorf("text:\n got: %s\nwant: %s", text, want)
	}
	if res.StructuredContent == nil {
		t.Fatalf("no structuredContent beside %q", text)
	}
	var wantValue any
	if err := json.Unmarshal([]byte(want), &wantValue); err != nil {
		t.Fatalf("the case's object %s: %v", want, err)
	}
	if !reflect.DeepEqual(res.StructuredContent, wantValue) {
		t.Errorf("structuredContent:\n got: %s\nwant: %s", res.RawStructuredContent, want)
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.RawStructuredContent))
	if err != nil {
		t.Fatalf("structuredContent %s: %v", res.RawStructuredContent, err)
	}
	if err := schema.Validate(value); err != nil {
		t.Errorf("the declared outputSchema rejects %s: %v", res.RawStructuredContent, err)
	}
}

// onlyLink returns the URI of a result's one resource link.
func onlyLink(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var uris []string
	for _, content := range res.Content {
		if link, ok := content.(mcp.ResourceLink); ok {
			uris = append(uris, link.URI)
		}
	}
	if len(uris) != 1 {
		t.Fatalf("resource links %q, want one", uris)
	}
	return uris[0]
}
