package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/sessions"
)

// The session tools (--sessions).
const (
	sessionIDSchema    = `{"type":"object","properties":{"session_id":{"type":"string","description":"The id create_session gave","x-mcp-header":"` + sessionHeader + `"}},"required":["session_id"],"additionalProperties":false}`
	createOutputSchema = `{"type":"object","properties":{"session_id":{"type":"string"},"idle_timeout_s":{"type":"integer"}},"required":["session_id","idle_timeout_s"]}`
	filesOutputSchema  = `{"type":"object","properties":{"files":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"size":{"type":"integer"},"mime_type":{"type":"string"},"uri":{"type":"string"}},"required":["path","size","mime_type","uri"]}}},"required":["files"]}`
)

// sessionTools returns create_session, list_session_files and close_session.
func sessionTools(o Options, principals principals) []tool {
	h := sessionHandler{registry: o.Sessions, files: o.Files, calls: o.Calls, principals: principals}
	create := mcp.NewToolWithRawSchema("create_session",
		"Start a Python session: an interpreter whose globals, imports, installed packages and files persist "+
			"between the run_python_code calls given its session_id. It ends after idle_timeout_s seconds without a call, "+
			"or with close_session.",
		json.RawMessage(withoutArguments))
	create.RawOutputSchema = json.RawMessage(createOutputSchema)
	list := mcp.NewToolWithRawSchema("list_session_files",
		"List the files that code in a Python session wrote under its working directory: path, size, MIME type, and the URI resources/read answers.",
		json.RawMessage(sessionIDSchema))
	list.RawOutputSchema = json.RawMessage(filesOutputSchema)
	closeTool := mcp.NewToolWithRawSchema("close_session",
		"End a Python session, freeing its interpreter and files.",
		json.RawMessage(sessionIDSchema))
	return []tool{
		{def: create, handle: h.create},
		{def: list, handle: h.list},
		{def: closeTool, handle: h.close},
	}
}

// sessionHandler serves the session tools.
type sessionHandler struct {
	registry   *sessions.Registry
	files      *filestore.Store // nil: files are off
	calls      *CallGate
	principals principals
}

func (h sessionHandler) create(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, leave, err := h.calls.enter(ctx)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	defer leave()
	id, err := h.registry.Create(ctx, h.principals.of(ctx), h.principals.mcpSession(ctx))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return structured(map[string]any{"session_id": id, "idle_timeout_s": int64(h.registry.Idle().Seconds())})
}

func (h sessionHandler) list(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, owner, err := h.session(ctx, req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	files := []render.File{}
	if h.files != nil {
		for _, e := range h.files.List(owner, filestore.SessionScope(id)) {
			files = append(files, listed(e))
		}
	}
	return structured(map[string]any{"files": files})
}

func (h sessionHandler) close(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, owner, err := h.session(ctx, req)
	if err == nil {
		err = h.registry.Close(owner, id)
	}
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("session %s closed", id)), nil
}

// session reads the session_id argument and checks that the caller may
// use it.
func (h sessionHandler) session(ctx context.Context, req mcp.CallToolRequest) (id string, owner identity.Principal, err error) {
	args, _ := req.Params.Arguments.(map[string]any)
	if id, err = sessionID(args[sessionArgument]); err != nil {
		return "", "", err
	}
	owner = h.principals.of(ctx)
	return id, owner, h.registry.Check(owner, id)
}

// structured is a result with v as structuredContent and as its text, for
// clients that read only text.
func structured(v any) (*mcp.CallToolResult, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(v, string(text)), nil
}
