package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/toolbox"
)

// describeLimit bounds what code mode adds to run_python_code's
// description: every client sends it to its model with each request.
const describeLimit = 4000

// codeTools is code mode (--tools-config): the tools of the MCP servers the
// file names, which code calls through the supervisor.
type codeTools struct {
	box     *toolbox.Toolbox
	started chan struct{} // closed once every server has connected or failed its first try
}

// openCodeTools reads the configuration and connects to its servers in the
// background: a server that is down is retried, not a failed start.
func openCodeTools(ctx context.Context, cfg config.Tools, log *zap.Logger) (*codeTools, error) {
	servers, err := toolbox.Load(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("--tools-config: %w", err)
	}
	allow, err := toolbox.ParseAllow(cfg.Allow)
	if err != nil {
		return nil, fmt.Errorf("--tools-allow: %w", err)
	}
	ct := &codeTools{
		box:     toolbox.New(ctx, servers, allow, log, toolbox.Options{ResultLimit: cfg.ResultLimit}),
		started: make(chan struct{}),
	}
	go func() {
		defer close(ct.started)
		if err := ct.box.Start(ctx); err != nil {
			log.Debug("tool servers not started", zap.Error(err)) // the server is closing
		}
	}()
	return ct, nil
}

// describe is the text that tells the model which tools code may call. It
// waits for the first connections (as long as the toolbox's start takes,
// bounded) so that the first tools/list already has them.
func (ct *codeTools) describe() string {
	<-ct.started
	return toolbox.Describe(ct.box.List(), describeLimit)
}

// close ends the connections, and the tool servers started over stdio.
func (ct *codeTools) close(log *zap.Logger) {
	if err := ct.box.Close(); err != nil {
		log.Warn("close the tool servers", zap.Error(err))
	}
}
