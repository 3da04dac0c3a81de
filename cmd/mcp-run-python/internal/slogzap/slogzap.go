// Package slogzap gives mcp-go, which logs with log/slog, the server's zap
// logger: its servers and clients then log to stderr at the configured
// level, like the rest of the server.
package slogzap

import (
	"log/slog"
	"math"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// New returns an slog logger that writes to log's core under log's name.
// zapslog maps the levels (below Info to Debug, Warn, Error), writes a
// group's attributes in a zap namespace and a group attribute as an object.
// It adds no stack traces: mcp-go logs a peer that went away as an error,
// which is not the server's fault, and log adds none either.
func New(log *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(log.Core(),
		zapslog.WithName(log.Name()),
		zapslog.AddStacktraceAt(slog.Level(math.MaxInt)),
	))
}
