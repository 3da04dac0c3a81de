// Package mcpserver is the MCP surface of the server (DESIGN 1.2): its
// tools, their handlers and the log notifications of a call. The transport
// package serves it; adding a tool is adding a file with its constructor,
// and a line in tools below.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// The server's part of the MCP surface of DESIGN 1.2.
const (
	serverName         = "MCP Run Python"
	serverInstructions = `Call the "run_python_code" tool with the Python code to run.`
)

// Runner runs Python code; *supervisor.Supervisor implements it, and tests
// pass fakes.
type Runner interface {
	// Run runs code in a fresh interpreter, calling onLine (when not nil)
	// for each printed line, in order, before it returns.
	Run(ctx context.Context, code string, onLine func(supervisor.Line)) (supervisor.Result, error)
	// PythonVersion returns the major.minor version of the Python that runs calls.
	PythonVersion() string
}

// Options is what every transport's MCP server is built from.
type Options struct {
	Version    string // serverInfo.version
	Runner     Runner
	ReturnMode render.ReturnMode
	Log        *zap.Logger
	// Calls admits the tool calls and stops them at shutdown.
	Calls *CallGate
}

// tool is one tool of the server: its definition, its handler, and, when
// its description depends on the runtime, how to describe it when listed.
type tool struct {
	def    mcp.Tool
	handle server.ToolHandlerFunc
	// describe, when not nil, returns the description; it is called each
	// time the tools are listed, so that building the server (and
	// answering initialize) never waits for the runtime.
	describe func() string
}

// tools returns the server's tools, in the order tools/list sends them.
func tools(o Options, levels *LevelStore) []tool {
	return []tool{
		runPythonCode(o, levels),
	}
}

// New returns the MCP server with its tools. levels keeps the sessions' log
// levels; hooks, which may already hold a transport's own hooks, gets the
// level hooks added.
func New(o Options, levels *LevelStore, hooks *server.Hooks) *server.MCPServer {
	levels.install(hooks)
	ts := tools(o, levels)
	s := server.NewMCPServer(serverName, o.Version,
		server.WithInstructions(serverInstructions),
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithToolFilter(describeTools(ts)),
	)
	for _, t := range ts {
		s.AddTool(t.def, t.handle)
	}
	return s
}

// describeTools sets the descriptions that depend on the runtime on the
// copies of the tool definitions that mcp-go lists.
func describeTools(ts []tool) server.ToolFilterFunc {
	describe := map[string]func() string{}
	for _, t := range ts {
		if t.describe != nil {
			describe[t.def.Name] = t.describe
		}
	}
	return func(_ context.Context, listed []mcp.Tool) []mcp.Tool {
		for i := range listed {
			if d, ok := describe[listed[i].Name]; ok {
				listed[i].Description = d()
			}
		}
		return listed
	}
}

// jsonType names the JSON type of a decoded value, for the errors of bad
// arguments.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
