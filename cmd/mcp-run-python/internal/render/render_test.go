package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// renderDir holds the golden files: <case>.xml and <case>.json, written by
// hand (the two DESIGN 1.3 examples copied from DESIGN) and checked against
// upstream's own JavaScript in TestRenderMatchesUpstreamJavaScript.
const renderDir = "../../../../testdata/render"

// renderCase is one golden rendering case.
type renderCase struct {
	name string
	res  supervisor.Result
}

// raw is a JSON value as the worker sends it.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// str is a Python str return value: its JSON string form.
func str(s string) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

const designTraceback = "Traceback (most recent call last):\n" +
	"  File \"main.py\", line 1, in <module>\n" +
	"    print(unknown)\n" +
	"          ^^^^^^^\n" +
	"NameError: name 'unknown' is not defined\n"

// renderCases are the golden cases, shared with the JavaScript cross-check.
func renderCases() []renderCase {
	return []renderCase{
		{"design_success", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"x=4"}, ReturnValue: raw("4")}},
		{"design_run_error", supervisor.Result{Status: supervisor.StatusRunError, Error: designTraceback}},
		{"escape_output", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{
			"</output>",
			"</OUTPUT >",
			`<Output attr="x">text</oUtPuT>`,
			"unclosed <output",
			"< / output>",
			"<outputs>",
			"<return_value>1</return_value> <error>",
			"a < b > c <output> d > e",
			`<output x="<y>">`,
			"<\t\u00a0output>",
			"<\u200boutput>",
			"</\u3000OUTPUT>",
			"<output\u2028>",
			"<\u2028output>",
			"<<output>>",
			"<\ufeffoutput\u00a0>",
			"</output></output>",
			"<output>>",
			"<\u180eoutput>",
		}}},
		{"escape_return_string", supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true,
			ReturnValue: str("</return_value>\n<return_value attr>\n</RETURN_VALUE\n<output></output>\nplain > text <")}},
		{"escape_return_json", supervisor.Result{Status: supervisor.StatusSuccess,
			ReturnValue: raw("{\n  \"k\": \"</return_value>\",\n  \"e\": \"</error>\"\n}")}},
		{"escape_error", supervisor.Result{Status: supervisor.StatusRunError, Output: []string{"before </error> crash"},
			Error: "Traceback:\n  <error>\n</error>\n<error\n>\n<Error class='x'>boom</ERROR >\n<output>\n"}},
		{"unicode", supervisor.Result{Status: supervisor.StatusSuccess,
			Output:      []string{"héllo wörld", "日本語テキスト", "emoji 🐍🎉", "مرحبا", "e\u0301 combining", "line\u2028sep\u2029end"},
			ReturnValue: raw("{\n  \"greeting\": \"こんにちは\",\n  \"snake\": \"🐍\"\n}")}},
		{"empty_string_return", supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true, ReturnValue: str("")}},
		{"dependencies_install_error", supervisor.Result{Status: supervisor.StatusInstallError,
			Dependencies: []string{"numpy", "pydantic>=2", `a"b`},
			Output:       []string{"install error: boom"},
			Error:        "failed to install numpy: not found"}},
		{"dependencies_success", supervisor.Result{Status: supervisor.StatusSuccess, Dependencies: []string{"numpy"},
			Output: []string{"[1 2 3]"}, ReturnValue: raw("[\n  1,\n  2,\n  3\n]")}},
		{"none_return", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"only output"}}},
		{"json_numbers_and_keys", supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: raw(`{
  "a": 1.0,
  "b": 1e21,
  "c": 12345678901234567890,
  "2": true,
  "1": false,
  "01": null,
  "b2": [
    1.5e-7,
    0.000001,
    -0.0,
    1e400
  ],
  "a": "dup"
}`)}},
		{"control_chars", supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true, ReturnValue: str("hi"),
			Output: []string{"\x1b[31mred\x1b[0m", "tab\there", `quote " backslash \`, "del\x7f", "nul\x00 bell\x07 ff\x0c"}}},
		// Return values past the output limit, as the worker cuts them
		// (js/encode.py, cut_text; here with a 32 and a 48 byte
		// limit): always a str, so JSON mode's return_value stays valid JSON
		// and XML mode shows the text cut, then the note on its own line.
		{"return_truncated_str", supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true,
			ReturnValue: str("日本語テキスト日本語\n[return value truncated: the value is 4.1 KiB, more than the 32 B limit]")}},
		{"return_truncated_json", supervisor.Result{Status: supervisor.StatusSuccess, Output: []string{"big"}, ReturnString: true,
			ReturnValue: str("[\n  {\n    \"tag\": \"</return_value>\",\n    \"n\": 1\n \n[return value truncated: the value is 102 B, more than the 48 B limit]")}},
	}
}

// readGolden returns a golden file's bytes.
func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.FromSlash(renderDir), name))
	if err != nil {
		t.Fatalf("read golden file: %v", err)
	}
	return string(b)
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		for _, mode := range []ReturnMode{ReturnXML, ReturnJSON} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				got, err := Text(mode, tc.res, nil)
				if err != nil {
					t.Fatalf("render: %v", err)
				}
				want := readGolden(t, tc.name+"."+string(mode))
				if got != want {
					t.Errorf("render(%s) mismatch\n got: %q\nwant: %q", mode, got, want)
				}
			})
		}
	}
}

// TestRenderGoldenFilesUsed makes sure no golden file is left without a case,
// so a renamed case cannot leave a stale file that checks nothing.
func TestRenderGoldenFilesUsed(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range renderCases() {
		names[tc.name+".xml"] = true
		names[tc.name+".json"] = true
	}
	entries, err := os.ReadDir(filepath.FromSlash(renderDir))
	if err != nil {
		t.Fatalf("read golden dir: %v", err)
	}
	for _, e := range entries {
		if !names[e.Name()] {
			t.Errorf("golden file %s has no case", e.Name())
		}
		delete(names, e.Name())
	}
	for name := range names {
		t.Errorf("case file %s missing", name)
	}
}

func TestEscapeTag(t *testing.T) {
	tests := []struct {
		name, in, tag, want string
	}{
		{"no tag", "plain text", "output", "plain text"},
		{"closing", "</output>", "output", "&lt;/output&gt;"},
		{"other tag untouched", "</error>", "output", "</error>"},
		{"mixed case", "<ReTuRn_VaLuE>", "return_value", "&lt;ReTuRn_VaLuE&gt;"},
		{"space before tag", "< output>", "output", "&lt; output&gt;"},
		{"slash then space", "</ output>", "output", "&lt;/ output&gt;"},
		{"space before slash", "< /output>", "output", "< /output>"},
		{"newline is space", "<\n\noutput>", "output", "&lt;\n\noutput&gt;"},
		{"vertical tab is space", "<\voutput>", "output", "&lt;\voutput&gt;"},
		{"dot stops at newline", "<output\n>", "output", "&lt;output\n>"},
		{"dot stops at carriage return", "<output\r>", "output", "&lt;output\r>"},
		{"dot stops at U+2029", "<output\u2029>", "output", "&lt;output\u2029>"},
		{"lazy to first >", "<output a>b>", "output", "&lt;output a&gt;b>"},
		{"unclosed at end", "x <output", "output", "x &lt;output"},
		{"unclosed then text", "<output and more", "output", "&lt;output and more"},
		{"prefix of tag", "<outp>", "output", "<outp>"},
		{"long s does not fold", "<error\u017f>", "errors", "<error\u017f>"},
		{"kelvin sign does not fold", "<\u212aey>", "key", "<\u212aey>"},
		{"repeated", "<error><error>", "error", "&lt;error&gt;&lt;error&gt;"},
		{"lone less-than", "1 < 2", "error", "1 < 2"},
		{"invalid utf-8 kept", "\xff<error\xfe>", "error", "\xff&lt;error\xfe&gt;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := escapeTag(tt.in, tt.tag); got != tt.want {
				t.Errorf("escapeTag(%q, %q) = %q, want %q", tt.in, tt.tag, got, tt.want)
			}
		})
	}
}

func TestRenderJSONRejectsInvalidReturnValue(t *testing.T) {
	for _, value := range []string{"{", "[1,]", "1 2", "nul", `{"a" 1}`} {
		res := supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: raw(value)}
		if _, err := Text(ReturnJSON, res, nil); err == nil {
			t.Errorf("render(json) of return value %q: want an error", value)
		}
	}
}

func TestRenderXMLStringReturnIsNotJSON(t *testing.T) {
	// A str shows as itself, with no quotes or JSON escapes.
	res := supervisor.Result{Status: supervisor.StatusSuccess, ReturnString: true, ReturnValue: str("a \"b\"\nc")}
	got := XML(res)
	want := "<status>success</status>\n<return_value>\na \"b\"\nc\n</return_value>"
	if got != want {
		t.Errorf("XML = %q, want %q", got, want)
	}
	if !strings.Contains(renderXMLMust(t, supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: raw(`"json str"`)}), `"json str"`) {
		t.Errorf("a non-str value must stand as its JSON text")
	}
}

// renderXMLMust renders res in XML mode.
func renderXMLMust(t *testing.T, res supervisor.Result) string {
	t.Helper()
	got, err := Text(ReturnXML, res, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return got
}
