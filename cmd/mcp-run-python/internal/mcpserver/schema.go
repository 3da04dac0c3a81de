package mcpserver

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
)

// ToolSchema is whose tools/list the server reproduces (--tool-schema).
type ToolSchema string

// The tool schemas. JSR is upstream's last JSR release, which the drop-in
// keeps byte for byte; PyPI is its last PyPI release (0.0.22), whose
// run_python_code also lists global_variables and a title.
const (
	SchemaJSR  ToolSchema = "jsr"
	SchemaPyPI ToolSchema = "pypi"
)

// structuredOutput gives run_python_code, in JSON mode, its outputSchema
// and every result its structuredContent (DESIGN 1.4), derived from the
// text item that leads every result, so that the two never disagree and no
// way of answering, error or not, is left without it. XML mode keeps
// upstream's tool and results: no schema, no structured content.
func structuredOutput(t tool, mode render.ReturnMode) tool {
	if mode != render.ReturnJSON {
		return t
	}
	t.def.RawOutputSchema = render.OutputSchema()
	handle := t.handle
	t.handle = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := handle(ctx, req)
		if err != nil || res == nil {
			return res, err
		}
		// Every result leads with its text: JSON mode's object, or a tool
		// error's message. Without one there is nothing to say, and
		// nothing is better than a structuredContent that is not JSON.
		if len(res.Content) > 0 {
			if text, ok := res.Content[0].(mcp.TextContent); ok {
				res.StructuredContent = render.Structured(text.Text, res.IsError)
			}
		}
		return res, nil
	}
	return t
}
