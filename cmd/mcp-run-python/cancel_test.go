package main

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
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
	tests := []struct {
		mode Mode
		era  era
		how  cancelHow
	}{
		{ModeStdio, legacy, byContext},
		{ModeStdio, modern, byContext},
		{ModeStdio, legacy, byNotification},
		{ModeSSE, legacy, byNotification},
		{ModeSSE, modern, byNotification},
		{ModeStreamableHTTP, legacy, byNotification},
		{ModeStreamableHTTP, legacy, byContext},
		{ModeStreamableHTTP, modern, byContext},
		{ModeStreamableHTTPStateless, legacy, byContext},
		{ModeStreamableHTTPStateless, modern, byContext},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+string(tt.era)+"/"+string(tt.how), func(t *testing.T) {
			b := newBlocker()
			r := &fakeRunner{lines: 1, block: b.block}
			var c *testClient
			if tt.mode == ModeStdio {
				c = stdioServer(t, r, 2)(t, tt.era)
			} else {
				connect, _ := httpServer(t, tt.mode, r)
				c = connect(t, tt.era)
			}
			ctx := testContext(t)
			switch tt.how {
			case byContext:
				callCtx, cancel := context.WithCancel(ctx)
				result := c.callAsync(callCtx, blockCode)
				b.waitStarted(t)
				cancel()
				if r := wait(t, result); !errors.Is(r.err, context.Canceled) {
					t.Errorf("cancelled CallTool returned %v", r.err)
				}
			case byNotification:
				tr := c.GetTransport()
				go func() {
					// Its answer, if any, does not matter.
					_, _ = tr.SendRequest(ctx, transport.JSONRPCRequest{
						JSONRPC: mcp.JSONRPC_VERSION,
						ID:      mcp.NewRequestId(int64(cancelRequestID)),
						Method:  string(mcp.MethodToolsCall),
						Params:  callParams(c, blockCode),
						Header: http.Header{
							mcp.HeaderMethod: {string(mcp.MethodToolsCall)},
							mcp.HeaderName:   {toolName},
						},
					})
				}()
				b.waitStarted(t)
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
			if got := b.waitCancelled(t); !errors.Is(got.cause, context.Canceled) {
				t.Errorf("Run's context ended with cause %v, want context.Canceled", got.cause)
			}
			text, isError, err := c.call(ctx, map[string]any{codeArgument: "after"})
			if err != nil || isError || text != expectedXML("after", 1) {
				t.Errorf("call after the cancellation: err %v, isError %v, %q", err, isError, text)
			}
		})
	}
}

// callParams returns the params of a tools/call of code as c's protocol
// wants them: a 2026-07-28 request carries its protocol version, client
// identity and capabilities in _meta (and its method and tool name in
// headers), which mcp-go's client otherwise adds.
func callParams(c *testClient, code string) map[string]any {
	params := map[string]any{
		"name":      toolName,
		"arguments": map[string]any{codeArgument: code},
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
