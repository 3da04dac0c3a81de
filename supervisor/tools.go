package supervisor

import (
	"context"
	"encoding/json"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
)

// Tools are the tools of other MCP servers that code may call (code mode):
// Python's mcp_tools module calls them through the bridge, and the
// supervisor calls Tools for it. The front end provides them (it is the
// MCP client of those servers); the supervisor only relays, counts and
// bounds the calls.
type Tools interface {
	// List returns the tools code may call now, in a stable order.
	List() []ToolSpec
	// Call checks args, a JSON object from untrusted code, against the
	// tool's input schema and then calls the tool. An error is a failure
	// to call it (unknown or disallowed tool, invalid arguments, server
	// down, cancelled), and its text is what the code sees; a tool that ran
	// and failed is a ToolResult with IsError set. It returns when ctx
	// ends, with its error.
	Call(ctx context.Context, server, tool string, args json.RawMessage) (ToolResult, error)
}

// ToolSpec describes a callable tool, or a server that is down.
type ToolSpec struct {
	Server      string          `json:"server"` // its server's name in the tools configuration
	Name        string          `json:"name"`   // the tool's name on that server
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"` // a JSON Schema object
	// Down, set with no Name, stands for a server that has listed no tools
	// yet (down since the start) and says why: code that calls any tool of
	// it gets ToolError with the reason, not an AttributeError.
	Down string `json:"down,omitempty"`
}

// ToolResult is what a tool call returned: its structured content when it
// has some, else its text content joined.
type ToolResult struct {
	Structured json.RawMessage // the result's structuredContent; nil when none
	Text       string
	IsError    bool // the tool reported a failure, explained by Text
}

// runnerModules are the top-level modules that workers' runners make
// themselves, which no package provides: mcp_tools in code mode.
func (c Config) runnerModules() map[string]bool {
	if c.Tools == nil {
		return nil
	}
	return map[string]bool{"mcp_tools": true}
}

// install is what the installer takes of c.
func (c Config) install() install.Config {
	return install.Config{CacheDir: c.CacheDir, IndexURL: c.IndexURL, PyodideIndexURL: c.PyodideIndexURL, Offline: c.Offline,
		Deps: c.Deps, Made: c.runnerModules()}
}
