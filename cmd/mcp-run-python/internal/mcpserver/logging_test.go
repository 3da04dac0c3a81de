package mcpserver

import (
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

func TestLogNotificationBytes(t *testing.T) {
	got := string(logNotification("warning", "a \"<b>\" & \u2028 \x01"))
	want := "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"warning\",\"data\":\"a \\\"<b>\\\" & \u2028 \\u0001\"}}"
	if got != want {
		t.Errorf("logNotification = %s, want %s", got, want)
	}
}

func TestLineLevel(t *testing.T) {
	for stream, want := range map[supervisor.Stream]mcp.LoggingLevel{
		supervisor.Stdout:   mcp.LoggingLevelInfo,
		supervisor.Stderr:   mcp.LoggingLevelWarning,
		supervisor.Progress: mcp.LoggingLevelDebug,
		supervisor.Failure:  mcp.LoggingLevelError,
	} {
		if got := LineLevel(supervisor.Line{Stream: stream, Text: "x"}); got != want {
			t.Errorf("LineLevel(%s) = %s, want %s", stream, got, want)
		}
	}
}

// TestInProcessClientGetsNotifications covers fallbackNotifier: a transport
// that installs no notifier (mcp-go's in-process one) still gets the
// notifications, through mcp-go's channel.
func TestInProcessClientGetsNotifications(t *testing.T) {
	const lines = 4
	mcpServer := New(testOptions(&mcptest.FakeRunner{Lines: lines}), true, &server.Hooks{})
	want := mcptest.ExpectedLog("inproc", lines, mcp.LoggingLevelDebug)
	got := make(chan mcptest.LogEntry, len(want))
	c := client.NewClient(transport.NewInProcessTransport(mcpServer), client.WithLegacyProtocolOnly())
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationMessage) {
			level, _ := n.Params.AdditionalFields["level"].(string)
			data, _ := n.Params.AdditionalFields["data"].(string)
			got <- mcptest.LogEntry{Level: level, Data: data}
		}
	})
	ctx := mcptest.Context(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatalf("set level: %v", err)
	}
	if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{codeArgument: "inproc"}}}); err != nil {
		t.Fatalf("call: %v", err)
	}
	// This path does not order notifications before the result: wait.
	for i, w := range want {
		select {
		case e := <-got:
			if e != w {
				t.Errorf("notification %d = %v, want %v", i, e, w)
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d notifications", i, len(want))
		}
	}
}
