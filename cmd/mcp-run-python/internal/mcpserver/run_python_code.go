package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// The run_python_code tool of DESIGN 1.2.
const (
	toolName     = "run_python_code"
	codeArgument = "python_code"
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

// runPythonCode returns the run_python_code tool. Its description, which
// names the runner's Python version, is filled in when the tool is listed.
func runPythonCode(o Options, levels *LevelStore) tool {
	h := &runPythonCodeHandler{
		runner: o.Runner, mode: o.ReturnMode, levels: levels, log: o.Log,
		calls: o.Calls,
	}
	return tool{
		def:      mcp.NewToolWithRawSchema(toolName, "", json.RawMessage(toolInputSchema)),
		handle:   h.handle,
		describe: func() string { return toolDescription(o.Runner.PythonVersion()) },
	}
}

// runPythonCodeHandler serves run_python_code.
type runPythonCodeHandler struct {
	runner Runner
	mode   render.ReturnMode
	levels *LevelStore
	log    *zap.Logger
	calls  *CallGate
}

// handle runs the code of one call. Bad arguments, calls refused at
// shutdown and failures to run (code over the size limit among them, which
// the runner checks) give a tool error (isError) rather than a protocol
// error, so the model sees why.
func (h *runPythonCodeHandler) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
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
	text, err := render.Text(h.mode, res)
	if err != nil {
		h.log.Error("render result", zap.Error(err))
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// lineSink returns the onLine callback of a call: each line at or above the
// request's level goes out as a notification before Run returns. It returns
// nil when the request wants no notifications.
func (h *runPythonCodeHandler) lineSink(ctx context.Context) func(supervisor.Line) {
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
		level := LineLevel(line)
		if failed.Load() || !level.ShouldSendTo(minLevel) {
			return
		}
		if err := n.Notify(ctx, logNotification(level, line.Text)); err != nil {
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
