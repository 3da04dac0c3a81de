package transport_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
)

// cancelRequestID is the JSON-RPC ID of the calls that TestClientCancelStopsRun
// cancels by notification; mcp-go's client numbers its own from 1.
const cancelRequestID = 4242

// cancelHow is how a client cancels a running call.
type cancelHow string

const (
	// byNotification: the client sends notifications/cancelled itself.
	// mcp-go's client sends none over HTTP when a call's context ends.
	byNotification cancelHow = "notification"
	// byContext: the client cancels the context of CallTool. Over stdio
	// mcp-go's client then sends notifications/cancelled; over Streamable
	// HTTP it closes the request, which protocol 2026-07-28 defines as the
	// cancellation and which ends the request context on the server.
	byContext cancelHow = "context"
)

// TestClientCancelStopsRun checks that a client's cancellation of a running
// call cancels the context Run got, so that the supervisor stops the code,
// and that the server keeps serving.
func TestClientCancelStopsRun(t *testing.T) {
	// The HTTP transports by the name of their mode; stdio is not one.
	kinds := map[string]transport.Kind{
		"sse":                       transport.SSE,
		"streamable_http":           transport.StreamableHTTP,
		"streamable_http_stateless": transport.StreamableHTTPStateless,
	}
	tests := []struct {
		mode string
		era  mcptest.Era
		how  cancelHow
	}{
		{"stdio", mcptest.Legacy, byContext},
		{"stdio", mcptest.Modern, byContext},
		{"stdio", mcptest.Legacy, byNotification},
		{"sse", mcptest.Legacy, byNotification},
		{"sse", mcptest.Modern, byNotification},
		{"streamable_http", mcptest.Legacy, byNotification},
		{"streamable_http", mcptest.Legacy, byContext},
		{"streamable_http", mcptest.Modern, byContext},
		{"streamable_http_stateless", mcptest.Legacy, byContext},
		{"streamable_http_stateless", mcptest.Modern, byContext},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+string(tt.era)+"/"+string(tt.how), func(t *testing.T) {
			b := mcptest.NewBlocker()
			r := &mcptest.FakeRunner{Lines: 1, Block: b.Block}
			var c *mcptest.Client
			if kind, ok := kinds[tt.mode]; ok {
				connect, _ := transporttest.HTTP(t, kind, r)
				c = connect(t, tt.era)
			} else {
				c = transporttest.Stdio(t, r, 2)(t, tt.era)
			}
			ctx := mcptest.Context(t)
			switch tt.how {
			case byContext:
				callCtx, cancel := context.WithCancel(ctx)
				result := c.CallAsync(callCtx, mcptest.BlockCode)
				b.WaitStarted(t)
				cancel()
				if r := mcptest.Wait(t, result); !errors.Is(r.Err, context.Canceled) {
					t.Errorf("cancelled CallTool returned %v", r.Err)
				}
			case byNotification:
				tr := c.GetTransport()
				go func() {
					// Its answer, if any, does not matter.
					_, _ = tr.SendRequest(ctx, clienttransport.JSONRPCRequest{
						JSONRPC: mcp.JSONRPC_VERSION,
						ID:      mcp.NewRequestId(int64(cancelRequestID)),
						Method:  string(mcp.MethodToolsCall),
						Params:  callParams(c, mcptest.BlockCode),
						Header: http.Header{
							mcp.HeaderMethod: {string(mcp.MethodToolsCall)},
							mcp.HeaderName:   {mcptest.ToolName},
						},
					})
				}()
				b.WaitStarted(t)
				err := tr.SendNotification(ctx, mcp.JSONRPCNotification{
					JSONRPC: mcp.JSONRPC_VERSION,
					Notification: mcp.Notification{
						Method: string(mcp.MethodNotificationCancelled),
						Params: mcp.NotificationParams{AdditionalFields: map[string]any{
							"requestId": cancelRequestID, "reason": "the user gave up",
						}},
					},
				})
				if err != nil {
					t.Fatalf("send notifications/cancelled: %v", err)
				}
			}
			if got := b.WaitCancelled(t); !errors.Is(got.Cause, context.Canceled) {
				t.Errorf("Run's context ended with cause %v, want context.Canceled", got.Cause)
			}
			text, isError, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: "after"})
			if err != nil || isError || text != mcptest.ExpectedXML("after", 1) {
				t.Errorf("call after the cancellation: err %v, isError %v, %q", err, isError, text)
			}
		})
	}
}

// callParams returns the params of a tools/call of code as c's protocol
// wants them: a 2026-07-28 request carries its protocol version, client
// identity and capabilities in _meta (and its method and tool name in
// headers), which mcp-go's client otherwise adds.
func callParams(c *mcptest.Client, code string) map[string]any {
	params := map[string]any{
		"name":      mcptest.ToolName,
		"arguments": map[string]any{mcptest.CodeArgument: code},
	}
	if mcp.IsModernProtocol(c.ProtocolVersion()) {
		params["_meta"] = map[string]any{
			mcp.MetaKeyProtocolVersion:    c.ProtocolVersion(),
			mcp.MetaKeyClientInfo:         map[string]any{"name": "test", "version": "1"},
			mcp.MetaKeyClientCapabilities: map[string]any{},
		}
	}
	return params
}
