package transport

import (
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
)

// testOptions returns Options around r, in XML mode, with the default
// limits; transporttest serves its servers with the same.
func testOptions(r mcpserver.Runner) Options {
	return Options{Options: mcpserver.Options{
		Version: "1.2.3-test", Runner: r, ReturnMode: render.ReturnXML, Log: zap.NewNop(),
		Calls: mcpserver.NewCallGate(mcptest.Timeout, mcptest.Timeout),
	}}
}
