package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// The MCP surface of DESIGN 1.2.
const (
	serverName         = "MCP Run Python"
	serverInstructions = `Call the "run_python_code" tool with the Python code to run.`
	toolName           = "run_python_code"
	codeArgument       = "python_code"
	// toolInputSchema is sent byte for byte as upstream's zod-generated schema.
	toolInputSchema = `{"type":"object","properties":{"python_code":{"type":"string","description":"Python code to run"}},"required":["python_code"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`
)

// toolDescription is the tool's description for a Python version such as
// "3.14", with upstream's trailing newline.
func toolDescription(pythonVersion string) string {
	return `Tool to execute Python code and return stdout, stderr, and return value.

The code may be async, and the value on the last line will be returned as the return value.

The code will be executed with Python ` + pythonVersion + `.

Dependencies may be defined via PEP 723 script metadata, e.g. to install "pydantic", the script should start
with a comment of the form:

# /// script
# dependencies = ['pydantic']
# ///
print('python code here')
`
}

// runner runs Python code; *supervisor.Supervisor implements it.
type runner interface {
	// Run runs code in a fresh interpreter, calling onLine (when not nil)
	// for each printed line, in order, before it returns.
	Run(ctx context.Context, code string, onLine func(supervisor.Line)) (supervisor.Result, error)
	// PythonVersion returns the major.minor version of the Python that runs calls.
	PythonVersion() string
}

// serverOptions is what every transport's MCP server is built from.
type serverOptions struct {
	Version    string // serverInfo.version
	Runner     runner
	ReturnMode ReturnMode
	Log        *zap.Logger
	// CodeLimit is the supervisor's largest code, in bytes (0: none): the
	// default request limit leaves room for it. The supervisor enforces it.
	CodeLimit int
	// Calls admits the tool calls and stops them at shutdown.
	Calls *callGate
	// Limits bound what callers can make the front end hold; nil means the
	// defaults for CodeLimit.
	Limits *FrontEndLimits
}

// frontEndLimits returns o.Limits, or the defaults when it is nil.
func (o serverOptions) frontEndLimits() FrontEndLimits {
	if o.Limits != nil {
		return *o.Limits
	}
	return defaultFrontEndLimits(int64(o.CodeLimit))
}

// newMCPServer returns the MCP server with its one tool. levels keeps the
// sessions' log levels; hooks, which may already hold a transport's own
// hooks, gets the level hooks added.
func newMCPServer(o serverOptions, levels *levelStore, hooks *server.Hooks) *server.MCPServer {
	levels.install(hooks)
	s := server.NewMCPServer(serverName, o.Version,
		server.WithInstructions(serverInstructions),
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithToolFilter(describeTool(o.Runner)),
	)
	s.AddTool(runPythonCodeTool(&toolHandler{
		runner: o.Runner, mode: o.ReturnMode, levels: levels, log: o.Log,
		calls: o.Calls,
	}))
	return s
}

// runPythonCodeTool returns the run_python_code tool and its handler. The
// description is filled in by describeTool when the tool is listed, so that
// building the server (and answering initialize) never waits for the runtime
// to know its Python version.
func runPythonCodeTool(h *toolHandler) (mcp.Tool, server.ToolHandlerFunc) {
	return mcp.NewToolWithRawSchema(toolName, "", json.RawMessage(toolInputSchema)), h.handle
}

// describeTool sets the tool's description, with the Python version, on the
// copies of the tool definitions that mcp-go lists.
func describeTool(r runner) server.ToolFilterFunc {
	return func(_ context.Context, tools []mcp.Tool) []mcp.Tool {
		for i := range tools {
			if tools[i].Name == toolName {
				tools[i].Description = toolDescription(r.PythonVersion())
			}
		}
		return tools
	}
}

// toolHandler serves run_python_code.
type toolHandler struct {
	runner runner
	mode   ReturnMode
	levels *levelStore
	log    *zap.Logger
	calls  *callGate
}

// handle runs the code of one call. Bad arguments, calls refused at
// shutdown and failures to run (code over the size limit among them, which
// the runner checks) give a tool error (isError) rather than a protocol
// error, so the model sees why.
func (h *toolHandler) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	code, err := pythonCode(req.Params.Arguments)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	ctx, leave, err := h.calls.enter(ctx)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	defer leave()
	ctx, cancel := withSessionCancel(ctx)
	defer cancel()
	res, err := h.runner.Run(ctx, code, h.lineSink(ctx))
	if err != nil {
		if ctx.Err() != nil {
			h.log.Info("call cancelled", zap.Error(err), zap.NamedError("cause", context.Cause(ctx)))
		} else {
			h.log.Warn("run failed", zap.Error(err))
		}
		return mcp.NewToolResultError(runErrorText(ctx, err)), nil
	}
	text, err := render(h.mode, res)
	if err != nil {
		h.log.Error("render result", zap.Error(err))
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// lineSink returns the onLine callback of a call: each line at or above the
// request's level goes out as a notification before Run returns. It returns
// nil when the request wants no notifications.
func (h *toolHandler) lineSink(ctx context.Context) func(supervisor.Line) {
	minLevel, ok := h.levels.callLevel(ctx)
	if !ok {
		return nil
	}
	n := notifierFrom(ctx)
	if n == nil {
		n = fallbackNotifier{}
	}
	var failed atomic.Bool
	return func(line supervisor.Line) {
		level := lineLevel(line)
		if failed.Load() || !level.ShouldSendTo(minLevel) {
			return
		}
		if err := n.notify(ctx, logNotification(level, line.Text)); err != nil {
			// The client is gone or stalled; stop trying for this call.
			failed.Store(true)
			h.log.Debug("log notification not delivered", zap.Error(err))
		}
	}
}

// pythonCode extracts the python_code argument.
func pythonCode(arguments any) (string, error) {
	args, ok := arguments.(map[string]any)
	if !ok && arguments != nil {
		return "", fmt.Errorf("invalid arguments: expected an object with a %q string, got %s", codeArgument, jsonType(arguments))
	}
	value, ok := args[codeArgument]
	if !ok {
		return "", fmt.Errorf("missing required argument %q: the Python code to run", codeArgument)
	}
	code, ok := value.(string)
	if !ok {
		return "", fmt.Errorf("invalid argument %q: expected a string, got %s", codeArgument, jsonType(value))
	}
	return code, nil
}

// runErrorText is the tool error for a call that Run could not run: a full
// pool says to try again later, a cancellation says why.
func runErrorText(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, supervisor.ErrQueueFull), errors.Is(err, supervisor.ErrQueueTimeout):
		return fmt.Sprintf("the server is busy: %v; try again later", err)
	case ctx.Err() != nil:
		return "the call was cancelled: " + context.Cause(ctx).Error()
	}
	return err.Error()
}

// jsonType names the JSON type of a decoded value.
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

// sessionDoneKey is the context key of a channel closed when the call's
// session ends.
type sessionDoneKey struct{}

// withSessionDone returns ctx carrying done.
func withSessionDone(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, sessionDoneKey{}, done)
}

// withSessionCancel returns ctx cancelled also when the session carried in
// it ends. The SSE transport runs each call on a context detached from every
// connection, so without this a call would run on after its client left.
func withSessionCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	done, _ := ctx.Value(sessionDoneKey{}).(<-chan struct{})
	ctx, cancel := context.WithCancelCause(ctx)
	if done == nil {
		return ctx, func() { cancel(nil) }
	}
	go func() {
		select {
		case <-done:
			cancel(errSessionEnded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// errSessionEnded is the cause of a call's cancellation when its client left.
var errSessionEnded = errors.New("the client's session ended")
