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

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/sessions"
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
	// Run runs a call in a fresh interpreter, calling req.OnLine (when not
	// nil) for each printed line, in order, before it returns.
	Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error)
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
	// Schema is whose tools/list run_python_code follows; "" is SchemaJSR.
	Schema ToolSchema
	// Sessions, when not nil, adds the session tools (--sessions).
	Sessions *sessions.Registry
	// Files, when not nil, keeps the files calls return and serves them as
	// resources; nil returns none, nor any image (--files=false).
	Files *filestore.Store
	// ImageLimit is the largest image sent inline; larger ones are only
	// linked. 0 sends every image inline.
	ImageLimit int64
	// CodeTools, when not nil, returns the text that tells the model which
	// tools of other MCP servers code may call (--tools-config), appended
	// to run_python_code's description each time the tools are listed.
	CodeTools func() string
	// Tasks, when not nil, makes run_python_code task-capable (--tasks;
	// tasks.go).
	Tasks *TaskOptions
	// Ask, when not nil, lets code ask the client's model and the person
	// at the client (--sampling, --elicitation; ask.go).
	Ask *AskOptions
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
func tools(o Options, levels *LevelStore, principals principals) []tool {
	ts := []tool{structuredOutput(runPythonCode(o, levels, principals), o.ReturnMode)}
	if o.Sessions != nil {
		ts = append(ts, sessionTools(o, principals)...)
	}
	return ts
}

// New returns the MCP server with its tools, and its resources when files
// come back. perSession is false where clients share one MCP session (the
// stateless transport): log levels are then per call, and Python sessions
// and files belong to whoever holds their id. hooks, which may already hold
// a transport's own hooks, gets the server's added.
func New(o Options, perSession bool, hooks *server.Hooks) *server.MCPServer {
	s, _ := NewWithTasks(o, perSession, hooks)
	return s
}

// NewWithTasks is New, and returns as well the server's tasks, for the
// transport to ask whose they are; nil without o.Tasks.
func NewWithTasks(o Options, perSession bool, hooks *server.Hooks) (*server.MCPServer, *Tasks) {
	levels := newLevelStore(perSession)
	levels.install(hooks)
	refuseUnbounded(hooks)
	slimCalls(hooks)
	principals := principals{perSession: perSession}
	if o.Sessions != nil && perSession {
		// Python sessions end with the MCP session that made them.
		hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
			o.Sessions.CloseMCPSession(session.SessionID())
		})
	}
	ts := tools(o, levels, principals)
	var tasks *taskStore
	if o.Tasks != nil {
		tasks = newTaskStore(*o.Tasks)
		tasks.install(hooks, toolName, o.Calls, principals)
	}
	opts := []server.ServerOption{
		server.WithInstructions(serverInstructions),
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithToolFilter(describeTools(ts)),
	}
	if o.Files != nil {
		opts = append(opts, server.WithResourceCapabilities(false, false))
	}
	if tasks != nil {
		opts = append(opts, server.WithTaskCapabilities(true, true, true), server.WithToolFilter(offerTasks(toolName, principals)))
	}
	s := server.NewMCPServer(serverName, o.Version, opts...)
	for _, t := range ts {
		if tasks != nil && t.def.Name == toolName {
			t.def.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
			t.handle = tasks.handler(t.handle)
		}
		s.AddTool(t.def, t.handle)
	}
	if o.Files != nil {
		addFileResources(s, hooks, o.Files, principals)
	}
	if tasks == nil {
		return s, nil
	}
	return s, &Tasks{store: tasks}
}

// principals says whose a request's Python sessions and files are.
type principals struct{ perSession bool }

// of is the owner of the request in ctx (identity.Of): its authenticated
// caller whatever the transport and protocol; else its MCP session
// ("stdio" over stdio); else "", where the id of a session or file is its
// own capability: the stateless transport, whose clients can claim any
// session id, and clients of the 2026-07-28 protocol, whose MCP session
// has the id "" (so that it must never be an owner).
func (o principals) of(ctx context.Context) identity.Principal {
	return identity.Of(ctx, o.mcpSession(ctx))
}

// mcpSession is the id of the request's MCP session, "" for none.
func (o principals) mcpSession(ctx context.Context) string {
	if o.perSession {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			return s.SessionID()
		}
	}
	return ""
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

// describe names a bad argument's value: its JSON type, or "an empty string".
func describe(v any) string {
	if v == "" {
		return "an empty string"
	}
	return jsonType(v)
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
