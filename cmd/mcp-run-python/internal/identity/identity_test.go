package identity

import (
	"context"
	"testing"
)

// A request's principal is its authenticated caller's whatever its MCP
// session, else its MCP session's id, else no one.
func TestOf(t *testing.T) {
	authed := WithPrincipal(context.Background(), "x|y")
	tests := []struct {
		name       string
		ctx        context.Context
		mcpSession string
		want       Principal
	}{
		{"authenticated", authed, "", "x|y"},
		{"authenticated in an MCP session", authed, "mcp-1", "x|y"},
		{"MCP session", context.Background(), "mcp-1", "mcp-1"},
		{"no one", context.Background(), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.ctx, tt.mcpSession); got != tt.want {
				t.Errorf("Of(%q) = %q, want %q", tt.mcpSession, got, tt.want)
			}
		})
	}
}
