package toolbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// maxSummary bounds the description of a tool in Describe, in bytes.
const maxSummary = 100

// Describe returns what the description of run_python_code says about
// tools: how to call them, one line for each, an example and how they
// fail, in at most limit bytes (0 for no limit), with the first tools only
// when all would not fit. It returns "" for no tools. The text depends on
// tools only, not on their order.
func Describe(tools []supervisor.ToolSpec, limit int) string {
	// A server down since the start has no tools to list yet; the code
	// learns why from the ToolError of a call.
	tools = slices.DeleteFunc(slices.Clone(tools), func(t supervisor.ToolSpec) bool { return t.Down != "" })
	if len(tools) == 0 {
		return ""
	}
	tools = slices.SortedFunc(slices.Values(tools), func(a, b supervisor.ToolSpec) int {
		return cmp.Or(strings.Compare(a.Server, b.Server), strings.Compare(a.Name, b.Name))
	})
	head := "Python code can call the tools of other MCP servers: `import mcp_tools`, then `await` these async functions, " +
		"passing arguments by keyword. A call returns the tool's structured content (a dict) when it has some, else its text:"
	lines := make([]string, len(tools))
	for i, t := range tools {
		lines[i] = toolLine(t)
	}
	tail := []string{
		"Example:",
		"    import mcp_tools",
		"    result = await " + example(tools[0]),
		"    print(result)",
		"A tool that fails raises mcp_tools.ToolError.",
	}
	text := func(listed int, tail []string) string {
		out := append([]string{head}, lines[:listed]...)
		if more := len(lines) - listed; more > 0 {
			out = append(out, fmt.Sprintf("… and %d more: see help(mcp_tools)", more))
		}
		return strings.Join(append(out, tail...), "\n")
	}
	if all := text(len(lines), tail); limit <= 0 || len(all) <= limit {
		return all
	}
	// Each tool listed makes the text longer, so list tools until the next
	// would not fit: a short text when the limit is small.
	if fits := text(0, tail); len(fits) <= limit {
		for listed := 1; listed < len(lines); listed++ {
			s := text(listed, tail)
			if len(s) > limit {
				break
			}
			fits = s
		}
		return fits
	}
	// Not even the example fits: the bare minimum, cut.
	return oneLine(text(0, nil), limit)
}

// toolLine is the line of Describe for t: its Python signature and the
// start of its description.
func toolLine(t supervisor.ToolSpec) string {
	params := parameters(t.InputSchema)
	sig := make([]string, 0, len(params)+1)
	if len(params) > 0 {
		sig = append(sig, "*") // the functions take keyword arguments only
	}
	for _, p := range params {
		s := p.name + ": " + p.typ
		if !p.required {
			s += " = ..."
		}
		sig = append(sig, s)
	}
	line := function(t) + "(" + strings.Join(sig, ", ") + ")"
	if d := summary(t.Description); d != "" {
		line += " — " + d
	}
	return line
}

// param is a parameter of a tool.
type param struct {
	name, typ string
	required  bool
}

// parameters returns the parameters an input schema declares: the
// required ones, then the others, each by name, as Python's mcp_tools
// orders them.
func parameters(schema json.RawMessage) []param {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []param
	for name, prop := range s.Properties {
		out = append(out, param{name: name, typ: typeName(prop), required: slices.Contains(s.Required, name)})
	}
	for _, name := range s.Required {
		if _, ok := s.Properties[name]; !ok && !slices.ContainsFunc(out, func(p param) bool { return p.name == name }) {
			out = append(out, param{name: name, typ: "any", required: true})
		}
	}
	slices.SortFunc(out, func(a, b param) int {
		if a.required != b.required {
			if a.required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// typeName is the JSON type a property's schema declares: "any" when it
// declares none, "a | b" when several.
func typeName(prop json.RawMessage) string {
	var p struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(prop, &p)
	switch t := p.Type.(type) {
	case string:
		return t
	case []any:
		var names []string
		for _, n := range t {
			if s, ok := n.(string); ok {
				names = append(names, s)
			}
		}
		if len(names) > 0 {
			return strings.Join(names, " | ")
		}
	}
	return "any"
}

// function is how Python code names the function of t.
func function(t supervisor.ToolSpec) string {
	server := attribute("mcp_tools", Identifier(t.Server))
	return attribute(server, Identifier(t.Name))
}

// attribute is Python for the attribute name of object: getattr when name
// is not an identifier (a keyword, or a leading digit).
func attribute(object, name string) string {
	if isPythonIdentifier(name) {
		return object + "." + name
	}
	return fmt.Sprintf("getattr(%s, %q)", object, name)
}

// summary is the first sentence of a description, on one line and short.
func summary(description string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(description), "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return oneLine(s, maxSummary)
}

// example is a call of t with made-up values for its required parameters.
func example(t supervisor.ToolSpec) string {
	var args []string
	for _, p := range parameters(t.InputSchema) {
		if p.required && isPythonIdentifier(p.name) {
			args = append(args, p.name+"="+exampleValue(p.typ))
		}
	}
	return function(t) + "(" + strings.Join(args, ", ") + ")"
}

// exampleValue is a Python value of a JSON type.
func exampleValue(typ string) string {
	typ, _, _ = strings.Cut(typ, " | ")
	switch typ {
	case "string":
		return `"..."`
	case "number", "integer":
		return "1"
	case "boolean":
		return "True"
	case "array":
		return "[]"
	case "object":
		return "{}"
	default:
		return "None"
	}
}
