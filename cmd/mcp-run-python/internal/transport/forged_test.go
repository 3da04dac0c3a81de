package transport_test

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
)

// TestForgedNotifications checks that the notifications/progress and
// notifications/cancelled a client forges while another's call runs (from
// another MCP session where the transport has them, else from the caller
// itself, for requests it did not make) neither cancel that call, nor
// reach its client, nor stop the server: ids of every JSON type, huge ones,
// and the running call's own id from another session.
func TestForgedNotifications(t *testing.T) {
	huge := strings.Repeat("9", 64<<10)
	for _, tc := range transporttest.Cases() {
		if !slices.Contains([]string{"stdio", "sse", "streamable_http", "streamable_http_stateless"}, tc.Name) {
			continue
		}
		for _, era := range tc.Eras {
			t.Run(tc.Name+"/"+string(era), func(t *testing.T) {
				b := mcptest.NewBlocker()
				connect := tc.Serve(t, &mcptest.FakeRunner{Lines: 1, Block: b.Block})
				victim := connect(t, era)
				var relayed atomic.Int32
				victim.OnNotification(func(n mcp.JSONRPCNotification) {
					if n.Method == string(mcp.MethodNotificationProgress) {
						relayed.Add(1)
					}
				})
				ctx := mcptest.Context(t)
				answered := make(chan error, 1)
				go func() {
					resp, err := victim.GetTransport().SendRequest(ctx, clienttransport.JSONRPCRequest{
						JSONRPC: mcp.JSONRPC_VERSION,
						ID:      mcp.NewRequestId(int64(cancelRequestID)),
						Method:  string(mcp.MethodToolsCall),
						Params:  callParams(victim, mcptest.BlockCode),
						Header:  http.Header{mcp.HeaderMethod: {string(mcp.MethodToolsCall)}, mcp.HeaderName: {mcptest.ToolName}},
					})
					if err == nil && resp.Error != nil {
						err = resp.Error.AsError()
					}
					answered <- err
				}()
				b.WaitStarted(t)
				// The call's own id is another caller's only from another
				// session; over stdio the one client may cancel its calls.
				ids := []any{cancelRequestID + 1, "x", 1e300, huge, nil, true, map[string]any{"id": cancelRequestID}, []any{cancelRequestID}}
				forger := victim
				if tc.Shared {
					forger = connect(t, era)
					ids = append(ids, cancelRequestID, "4242", 4242.0)
				}
				for _, params := range []map[string]any{
					{"progressToken": cancelRequestID, "progress": 1, "total": 2, "message": "forged"},
					{"progressToken": huge, "progress": "x"},
					nil,
				} {
					send(t, forger, mcp.MethodNotificationProgress, params)
				}
				send(t, forger, mcp.MethodNotificationCancelled, nil)
				for _, id := range ids {
					send(t, forger, mcp.MethodNotificationCancelled, map[string]any{"requestId": id, "reason": "forged"})
				}
				// Answered once the notifications before it are handled.
				if err := forger.Ping(ctx); err != nil {
					t.Fatalf("ping after the forged notifications: %v", err)
				}
				close(b.Release)
				if err := b.WaitReleased(t); err != nil {
					t.Errorf("the call's context ended with %v, want it intact", err)
				}
				if err := <-answered; err != nil {
					t.Errorf("the call: %v", err)
				}
				if n := relayed.Load(); n != 0 {
					t.Errorf("%d forged progress notifications reached the caller", n)
				}
				text, isError, err := forger.Call(ctx, map[string]any{mcptest.CodeArgument: "after"})
				if err != nil || isError || text != mcptest.ExpectedXML("after", 1) {
					t.Errorf("call after the forged notifications: err %v, isError %v, %q", err, isError, text)
				}
			})
		}
	}
}

// send sends a notification of method with params from c, with the _meta
// that a 2026-07-28 notification carries.
func send(t *testing.T, c *mcptest.Client, method mcp.MCPMethod, params map[string]any) {
	t.Helper()
	p := mcp.NotificationParams{AdditionalFields: params}
	if mcp.IsModernProtocol(c.ProtocolVersion()) {
		p.Meta = map[string]any{mcp.MetaKeyProtocolVersion: c.ProtocolVersion()}
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: string(method), Params: p}}
	err := c.GetTransport().SendNotification(mcptest.Context(t), n)
	if err != nil {
		t.Fatalf("send %s %v: %v", method, params, err)
	}
}
