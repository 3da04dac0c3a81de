package toolbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// spec returns a ToolSpec whose input schema is schema.
func spec(server, name, description, schema string) supervisor.ToolSpec {
	return supervisor.ToolSpec{Server: server, Name: name, Description: description, InputSchema: json.RawMessage(schema)}
}

const header = "Python code can call the tools of other MCP servers: `import mcp_tools`, then `await` these async functions, " +
	"passing arguments by keyword. A call returns the tool's structured content (a dict) when it has some, else its text:"

func TestDescribe(t *testing.T) {
	add := spec("calc", "add", "Add two numbers. Exactly.\nMore text.",
		`{"type":"object","properties":{"precision":{"type":"integer"},"b":{"type":"number"},"a":{"type":"number"}},"required":["b","a"]}`)
	tests := []struct {
		name  string
		tools []supervisor.ToolSpec
		want  string
	}{{
		name:  "none",
		tools: nil,
		want:  "",
	}, {
		name:  "only a server that is down",
		tools: []supervisor.ToolSpec{{Server: "web", Down: "tool server web is not connected: refused; retrying"}},
		want:  "",
	}, {
		name:  "one, and a server that is down",
		tools: []supervisor.ToolSpec{{Server: "web", Down: "tool server web is not connected: refused; retrying"}, add},
		want: header + `
mcp_tools.calc.add(*, a: number, b: number, precision: integer = ...) — Add two numbers.
Example:
    import mcp_tools
    result = await mcp_tools.calc.add(a=1, b=1)
    print(result)
A tool that fails raises mcp_tools.ToolError.`,
	}, {
		name:  "one",
		tools: []supervisor.ToolSpec{add},
		want: header + `
mcp_tools.calc.add(*, a: number, b: number, precision: integer = ...) — Add two numbers.
Example:
    import mcp_tools
    result = await mcp_tools.calc.add(a=1, b=1)
    print(result)
A tool that fails raises mcp_tools.ToolError.`,
	}, {
		name: "sorted, names mapped, types, no description",
		tools: []supervisor.ToolSpec{
			spec("web-search", "fetch.page", "", `{"type":"object","properties":{"url":{"type":"string"},"x":{"type":["string","null"]},"y":{}},"required":["url"]}`),
			spec("calc", "class", "A keyword.", `{"type":"object"}`),
			spec("calc", "1st", strings.Repeat("long ", 40), `{"type":"object","properties":{"flag":{"type":"boolean"}},"required":["flag","missing"]}`),
		},
		want: header + `
getattr(mcp_tools.calc, "1st")(*, flag: boolean, missing: any) — ` + strings.Repeat("long ", 19) + `lo…
getattr(mcp_tools.calc, "class")() — A keyword.
mcp_tools.web_search.fetch_page(*, url: string, x: string | null = ..., y: any = ...)
Example:
    import mcp_tools
    result = await getattr(mcp_tools.calc, "1st")(flag=True, missing=None)
    print(result)
A tool that fails raises mcp_tools.ToolError.`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Describe(tt.tools, 0); got != tt.want {
				t.Errorf("Describe =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestDescribeLimit(t *testing.T) {
	var tools []supervisor.ToolSpec
	for i := range 50 {
		tools = append(tools, spec("s", fmt.Sprintf("tool%02d", i), "Does a thing.", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`))
	}
	all := Describe(tools, 0)
	for _, limit := range []int{len(all), len(all) - 1, 2000, 800, 100, 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			got := Describe(tools, limit)
			if len(got) > limit {
				t.Fatalf("Describe is %d bytes, more than %d:\n%s", len(got), limit, got)
			}
			if got != Describe(tools, limit) {
				t.Error("Describe is not deterministic")
			}
			if limit == len(all) {
				if got != all {
					t.Errorf("Describe with room for all = \n%s\nwant\n%s", got, all)
				}
				return
			}
			listed := strings.Count(got, "— Does a thing.")
			if more := fmt.Sprintf("… and %d more: see help(mcp_tools)", 50-listed); limit > 200 && !strings.Contains(got, more) {
				t.Errorf("Describe lists %d tools but lacks %q:\n%s", listed, more, got)
			}
			if limit >= 800 && (listed == 0 || !strings.Contains(got, "mcp_tools.ToolError")) {
				t.Errorf("Describe within %d bytes lists no tool or lacks the note:\n%s", limit, got)
			}
			// Listing one more tool would not have fitted.
			if limit > 200 && listed < 50 && len(got)+len(toolLine(tools[listed]))+1 <= limit {
				t.Errorf("Describe lists %d tools in %d bytes of %d; one more fits", listed, len(got), limit)
			}
		})
	}
}
