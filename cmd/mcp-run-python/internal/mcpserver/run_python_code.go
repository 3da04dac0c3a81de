package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/sessions"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// The run_python_code tool of DESIGN 1.2.
const (
	toolName         = "run_python_code"
	codeArgument     = "python_code"
	globalsArgument  = "global_variables"
	sessionArgument  = "session_id"
	sessionHeader    = "Session-Id" // x-mcp-header: a gateway routes a session's calls by it
	schemaDraft      = `"$schema":"http://json-schema.org/draft-07/schema#"`
	codeProperty     = `"python_code":{"type":"string","description":"Python code to run"}`
	globalsProperty  = `"global_variables":{"type":"object","additionalProperties":{},"default":{},"description":"Map of global variables in context when the code is executed"}`
	sessionProperty  = `"session_id":{"type":"string","description":"Run in this session, made by create_session, whose globals, imports, installed packages and files persist between calls; without it the code runs in a fresh interpreter","x-mcp-header":"` + sessionHeader + `"}`
	pypiTitle        = "Run Python code"
	pypiDescription  = "Tool to execute Python code and return stdout, stderr, and return value.\n\nThe code may be async, and the value on the last line will be returned as the return value.\n\nThe code will be executed with Python "
	withoutArguments = `{"type":"object","properties":{},"additionalProperties":false}`
)

// toolInputSchema is run_python_code's input schema: byte for byte the
// schema upstream's zod generated, for its JSR release or with
// global_variables for its PyPI one, and with session_id when sessions are
// on.
func toolInputSchema(schema ToolSchema, sessions bool) string {
	props := codeProperty
	if schema == SchemaPyPI {
		props += "," + globalsProperty
	}
	if sessions {
		props += "," + sessionProperty
	}
	return `{"type":"object","properties":{` + props + `},"required":["python_code"],"additionalProperties":false,` + schemaDraft + `}`
}

// toolDescription is the tool's description for a Python version such as
// "3.14", with upstream's trailing newline: its JSR release's, or its PyPI
// release's, which says nothing of PEP 723.
func toolDescription(schema ToolSchema, pythonVersion string) string {
	if schema == SchemaPyPI {
		return pypiDescription + pythonVersion + ".\n"
	}
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
func runPythonCode(o Options, levels *LevelStore, principals principals) tool {
	h := &runPythonCodeHandler{
		runner: o.Runner, mode: o.ReturnMode, levels: levels, log: o.Log,
		calls: o.Calls, sessions: o.Sessions, principals: principals,
		files: fileResults{store: o.Files, imageLimit: o.ImageLimit, log: o.Log},
		ask:   o.Ask,
	}
	if o.Ask != nil && (o.Ask.Model || o.Ask.Person) {
		h.parking = newParking(o.Ask, o.Calls)
	}
	def := mcp.NewToolWithRawSchema(toolName, "", json.RawMessage(toolInputSchema(o.Schema, o.Sessions != nil)))
	if o.Schema == SchemaPyPI {
		def.Title = pypiTitle
	}
	return tool{
		def:    def,
		handle: h.handle,
		describe: func() string {
			d := toolDescription(o.Schema, o.Runner.PythonVersion()) + askDescription(o.Ask)
			if o.CodeTools != nil {
				if tools := o.CodeTools(); tools != "" {
					d += "\n" + tools
				}
			}
			return d
		},
	}
}

// runPythonCodeHandler serves run_python_code.
type runPythonCodeHandler struct {
	runner     Runner
	mode       render.ReturnMode
	levels     *LevelStore
	log        *zap.Logger
	calls      *CallGate
	sessions   *sessions.Registry // nil without --sessions
	principals principals
	files      fileResults
	ask        *AskOptions // nil without --sampling and --elicitation
	parking    *parking    // nil without them
}

// handle runs the code of one call. Bad arguments, calls refused at
// shutdown, sessions that cannot be used and failures to run (code over the
// size limit among them, which the runner checks) give a tool error
// (isError) rather than a protocol error, so the model sees why. With
// --sampling or --elicitation, a 2026-07-28 client's call whose code asks
// is parked (park.go), and its retries resume it.
func (h *runPythonCodeHandler) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if h.parking != nil && (req.Params.RequestState != "" || len(req.Params.InputResponses) > 0) {
		return h.parking.resume(ctx, req, h.principals.of(ctx), h.principals.mcpSession(ctx), h.sinks(ctx, req)), nil
	}
	args, err := runArguments(req.Params.Arguments, h.sessions != nil)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if h.parking != nil && parks(ctx, h.ask, req) {
		run := func(runCtx context.Context, park supervisor.Asker, onLine func(supervisor.Line), onProgress func(supervisor.ProgressEvent)) *mcp.CallToolResult {
			return h.call(runCtx, args, askFor(ctx, h.ask, req, park, !h.principals.perSession, h.log), onLine, onProgress)
		}
		return h.parking.start(ctx, h.principals.of(ctx), h.principals.mcpSession(ctx), h.sinks(ctx, req), run), nil
	}
	// Its last notification goes before the result, which mcp-go writes
	// once the handler returns.
	progress := h.progressSink(ctx, req)
	defer progress.close()
	return h.call(ctx, args, askFor(ctx, h.ask, req, nil, !h.principals.perSession, h.log), h.lineSink(ctx), progress.onProgress()), nil
}

// sinks returns where the notifications of the request of ctx go.
func (h *runPythonCodeHandler) sinks(ctx context.Context, req mcp.CallToolRequest) *requestSinks {
	return &requestSinks{onLine: h.lineSink(ctx), progress: h.progressSink(ctx, req)}
}

// parks reports whether the call of req parks when its code asks: its
// client speaks protocol 2026-07-28 and can answer a kind of question the
// call may ask, and the call is not a task, whose result cannot ask.
func parks(ctx context.Context, o *AskOptions, req mcp.CallToolRequest) bool {
	if req.Params.Task != nil || !mcp.IsModernProtocol(server.RequestProtocolVersion(ctx)) {
		return false
	}
	sampling, elicitation := clientCapabilities(ctx, req)
	return (o.Model && sampling) || (o.Person && elicitation)
}

// call runs a call with ask, sending its lines to onLine and its progress
// to onProgress, and returns its result.
func (h *runPythonCodeHandler) call(ctx context.Context, args runArgs, ask supervisor.Ask, onLine func(supervisor.Line), onProgress func(supervisor.ProgressEvent)) *mcp.CallToolResult {
	ctx, leave, err := h.calls.enter(ctx)
	if err != nil {
		return mcp.NewToolResultError(err.Error())
	}
	defer leave()
	ctx, cancel := withSessionCancel(ctx)
	defer cancel()
	// The pool shares its workers per authenticated caller only: an MCP
	// session does not stand in for one there.
	run := supervisor.Request{Code: args.code, Globals: args.globals, OnLine: onLine, OnProgress: onProgress, Principal: string(identity.Of(ctx, "")), Ask: ask}
	owner := h.principals.of(ctx)
	var res supervisor.Result
	if args.session != "" {
		res, err = h.sessions.Run(ctx, owner, args.session, run)
	} else {
		res, err = h.runner.Run(ctx, run)
	}
	if err != nil {
		if ctx.Err() != nil {
			h.log.Info("call cancelled", zap.Error(err), zap.NamedError("cause", context.Cause(ctx)))
		} else {
			h.log.Warn("run failed", zap.Error(err))
		}
		return mcp.NewToolResultError(runErrorText(ctx, err))
	}
	scope := filestore.NewCallScope()
	if args.session != "" {
		scope = filestore.SessionScope(args.session)
	}
	kept, extra := h.files.keep(owner, scope, res)
	text, err := render.Text(h.mode, res, kept)
	if err != nil {
		h.log.Error("render result", zap.Error(err))
		return mcp.NewToolResultError(err.Error())
	}
	return &mcp.CallToolResult{Content: append([]mcp.Content{mcp.NewTextContent(text)}, extra...)}
}

// maxBeyondCode bounds what a run_python_code request carries, as written,
// besides its python_code and global_variables: the transport keeps the
// whole request while the call waits for a worker and runs, and the rest
// (its name, session_id, _meta, task) takes a few kilobytes at most.
const maxBeyondCode = 64 << 10

// refuseUnbounded makes mcp-go refuse, before it serves it, a request
// whose progressToken is not a string of at most maxProgressTokenBytes or
// an integer (MCP allows only those), or a run_python_code call that carries
// more than maxBeyondCode besides its code, with an error naming the bound:
// a queued call keeps its request, and a running one sends its token back
// every second.
func refuseUnbounded(hooks *server.Hooks) {
	hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
		raw, ok := message.(json.RawMessage)
		if !ok {
			return nil
		}
		return checkRequest(raw)
	})
}

// checkRequest checks the request raw, decoded as mcp-go decodes it. A
// request that does not decode so is left to mcp-go, or to the tool's
// handler, to refuse at once.
func checkRequest(raw json.RawMessage) error {
	var req struct {
		Method string `json:"method"`
		Params struct {
			Name           string                     `json:"name"`
			Arguments      map[string]json.RawMessage `json:"arguments"`
			Meta           *mcp.Meta                  `json:"_meta"`
			InputResponses json.RawMessage            `json:"inputResponses"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return nil
	}
	if req.Params.Meta != nil {
		if err := checkProgressToken(req.Params.Meta.ProgressToken); err != nil {
			return err
		}
	}
	if req.Method != string(mcp.MethodToolsCall) || req.Params.Name != toolName {
		return nil
	}
	args := req.Params.Arguments
	// A retry's answers to its call's questions are bounded by the
	// request limit, as its code is, and the supervisor's AskLimits.
	if beyond := len(raw) - len(args[codeArgument]) - len(args[globalsArgument]) - len(req.Params.InputResponses); beyond > maxBeyondCode {
		return fmt.Errorf("invalid %s call: %d bytes besides %q and %q, more than the %d a call may carry beyond its code", toolName, beyond, codeArgument, globalsArgument, maxBeyondCode)
	}
	return nil
}

// slimCalls makes a run_python_code call keep, while it waits for a worker
// and runs, only the arguments it reads: mcp-go keeps the decoded request
// for the life of the call, and with it a raw copy of its arguments
// (RawArguments, which nothing here reads) and any argument the tool does
// not take (which upstream ignores too, and so does runArguments).
func slimCalls(hooks *server.Hooks) {
	hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) {
		if req.Params.Name != toolName {
			return
		}
		req.Params.RawArguments = nil
		args, _ := req.Params.Arguments.(map[string]any)
		for name := range args {
			if name != codeArgument && name != globalsArgument && name != sessionArgument {
				delete(args, name)
			}
		}
	})
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

// runArgs are the arguments of a run_python_code call.
type runArgs struct {
	code    string
	globals json.RawMessage // an object, or nil
	session string          // "" for a fresh interpreter
}

// runArguments checks and extracts the arguments. global_variables is
// taken whatever the tool schema lists, as upstream's PyPI release took it;
// session_id only with sessions on.
func runArguments(arguments any, sessions bool) (runArgs, error) {
	args, ok := arguments.(map[string]any)
	if !ok && arguments != nil {
		return runArgs{}, fmt.Errorf("invalid arguments: expected an object with a %q string, got %s", codeArgument, jsonType(arguments))
	}
	var r runArgs
	value, ok := args[codeArgument]
	if !ok {
		return runArgs{}, fmt.Errorf("missing required argument %q: the Python code to run", codeArgument)
	}
	if r.code, ok = value.(string); !ok {
		return runArgs{}, fmt.Errorf("invalid argument %q: expected a string, got %s", codeArgument, jsonType(value))
	}
	if value, ok := args[globalsArgument]; ok && value != nil {
		globals, ok := value.(map[string]any)
		if !ok {
			return runArgs{}, fmt.Errorf("invalid argument %q: expected an object of global names and their values, got %s", globalsArgument, jsonType(value))
		}
		if len(globals) > 0 {
			// Decoded from JSON, so it encodes.
			r.globals, _ = json.Marshal(globals)
		}
	}
	if value, ok := args[sessionArgument]; ok && value != nil && sessions {
		var err error
		if r.session, err = sessionID(value); err != nil {
			return runArgs{}, err
		}
	}
	return r, nil
}

// sessionID checks a session_id argument: the non-empty string
// create_session gave.
func sessionID(value any) (string, error) {
	id, ok := value.(string)
	if !ok || id == "" {
		return "", fmt.Errorf("invalid argument %q: expected the id create_session gave, got %s", sessionArgument, describe(value))
	}
	return id, nil
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
