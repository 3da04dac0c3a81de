package supervisor

import (
	"strings"
	"testing"
)

// The value of a call is its last expression's, unless the code ends with a
// semicolon: runner.py's _compile does what Pyodide's CodeRunner does, more
// cheaply, and these are the cases where the two could part.
func TestLastExpressionValue(t *testing.T) {
	s := start(t, Config{Workers: 2})
	tests := []struct {
		name, code string
		value      string // ReturnValue bytes; "" for none
		errText    string // in the error of a run-error
	}{
		{name: "expression", code: "1+1", value: "2"},
		{name: "after statements", code: "x = 20\nprint(x)\nx + 1", value: "21"},
		{name: "assignment", code: "x = 1"},
		{name: "a comment", code: "# nothing\n"},
		{name: "semicolon", code: "1+1;"},
		{name: "semicolon and comment", code: "1+1 ; # why"},
		{name: "semicolon in a string", code: "x = ';'\nx", value: `";"`},
		{name: "semicolons between", code: "x = 2; y = 3; x * y", value: "6"},
		{name: "indented", code: "    x = 1\n    x + 1\n", value: "2"},
		{name: "continued line", code: "1 + \\\n  2", value: "3"},
		{name: "top-level await", code: "import asyncio\nawait asyncio.sleep(0)\n7", value: "7"},
		{name: "awaited value", code: "import asyncio\nasync def f():\n    return 8\nawait f()", value: "8"},
		{name: "syntax error", code: "1 +", errText: "SyntaxError"},
		{name: "error in the last expression", code: "x = 0\n1 / x", errText: "line 2, in <module>\n    1 / x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := run(t, s, tt.code)
			if tt.errText != "" {
				if res.Status != StatusRunError || !strings.Contains(res.Error, tt.errText) {
					t.Fatalf("status %s, error %q; want a run-error with %q", res.Status, res.Error, tt.errText)
				}
				return
			}
			if res.Status != StatusSuccess || string(res.ReturnValue) != tt.value {
				t.Errorf("status %s, value %q (error %q); want success, %q", res.Status, res.ReturnValue, res.Error, tt.value)
			}
		})
	}
}
