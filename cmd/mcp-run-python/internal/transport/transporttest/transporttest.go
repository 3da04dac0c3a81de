// Package transporttest serves MCP through each of the transport package's
// transports, around a runner, for the tests of that package and of the
// program (the tool snapshots).
package transporttest

import (
	"context"
	"io"
	"net"
	"testing"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
)

// Option changes the options of a server under test, such as to offer
// sessions or another tool schema.
type Option func(*mcpserver.Options)

// options returns the options of a server around r, in XML mode, changed by
// opts.
func options(r mcpserver.Runner, opts []Option) transport.Options {
	o := transport.Options{Options: mcpserver.Options{
		Version: "1.2.3-test", Runner: r, ReturnMode: render.ReturnXML, Log: zap.NewNop(),
		Calls: mcpserver.NewCallGate(mcptest.Timeout, mcptest.Timeout),
	}}
	for _, opt := range opts {
		opt(&o.Options)
	}
	return o
}

// Stdio serves r over stdio with workers tool workers and returns a connect
// function. The stdio transport has one client; connect may be called once.
func Stdio(t *testing.T, r mcpserver.Runner, workers int, opts ...Option) mcptest.ConnectFunc {
	t.Helper()
	o := options(r, opts)
	return mcptest.Stdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return transport.ServeStdio(ctx, o, workers, in, out)
	})
}

// HTTP serves kind with r on a loopback port, as the program does, and
// returns a connect function and the server's URL.
func HTTP(t *testing.T, kind transport.Kind, r mcpserver.Runner, opts ...clienttransport.StreamableHTTPCOption) (mcptest.ConnectFunc, string) {
	t.Helper()
	return HTTPWith(t, kind, r, nil, opts...)
}

// HTTPWith is HTTP with the server's options changed by server.
func HTTPWith(t *testing.T, kind transport.Kind, r mcpserver.Runner, server []Option, opts ...clienttransport.StreamableHTTPCOption) (mcptest.ConnectFunc, string) {
	t.Helper()
	fe, err := transport.NewHTTPFrontEnd(kind, options(r, server))
	if err != nil {
		t.Fatalf("front end: %v", err)
	}
	url := mcptest.ServeHTTP(t, func(ctx context.Context, ln net.Listener) error {
		return transport.ServeHTTP(ctx, ln, fe, zap.NewNop())
	})
	return func(t *testing.T, e mcptest.Era) *mcptest.Client {
		t.Helper()
		var tr clienttransport.Interface
		var err error
		if kind == transport.SSE {
			tr, err = clienttransport.NewSSE(url + kind.Path())
		} else {
			tr, err = clienttransport.NewStreamableHTTP(url+kind.Path(), opts...)
		}
		if err != nil {
			t.Fatalf("client transport: %v", err)
		}
		return mcptest.NewClient(t, tr, e)
	}, url
}

// Case is one way of serving MCP under test.
type Case struct {
	Name string
	// Serve serves r, with the server's options changed by opts.
	Serve func(t *testing.T, r mcpserver.Runner, opts ...Option) mcptest.ConnectFunc
	Eras  []mcptest.Era
	// LegacyLevels reports whether legacy clients keep the level they set
	// with logging/setLevel (not in stateless mode, as upstream).
	LegacyLevels bool
	// Shared reports whether several clients can use one server.
	Shared bool
}

// Cases lists every transport, and the standalone GET stream.
func Cases() []Case {
	both := []mcptest.Era{mcptest.Legacy, mcptest.Modern}
	httpCase := func(kind transport.Kind, client ...clienttransport.StreamableHTTPCOption) func(*testing.T, mcpserver.Runner, ...Option) mcptest.ConnectFunc {
		return func(t *testing.T, r mcpserver.Runner, opts ...Option) mcptest.ConnectFunc {
			c, _ := HTTPWith(t, kind, r, opts, client...)
			return c
		}
	}
	return []Case{
		{
			Name: "stdio",
			Serve: func(t *testing.T, r mcpserver.Runner, opts ...Option) mcptest.ConnectFunc {
				return Stdio(t, r, 2, opts...)
			},
			Eras:         both,
			LegacyLevels: true,
		},
		{
			Name:  "sse",
			Serve: httpCase(transport.SSE),
			Eras:  both, LegacyLevels: true, Shared: true,
		},
		{
			Name:  "streamable_http",
			Serve: httpCase(transport.StreamableHTTP),
			Eras:  both, LegacyLevels: true, Shared: true,
		},
		{
			// The client also holds the standalone GET stream, which mcp-go
			// feeds from the same session channel as the POST responses.
			Name:  "streamable_http_with_get_stream",
			Serve: httpCase(transport.StreamableHTTP, clienttransport.WithContinuousListening()),
			Eras:  []mcptest.Era{mcptest.Legacy}, LegacyLevels: true, Shared: true,
		},
		{
			Name:  "streamable_http_stateless",
			Serve: httpCase(transport.StreamableHTTPStateless),
			Eras:  both, LegacyLevels: false, Shared: true,
		},
	}
}

// WantLevel is the level a client of era e on c gets after setting level.
func (c Case) WantLevel(e mcptest.Era, level mcp.LoggingLevel) mcp.LoggingLevel {
	if e == mcptest.Legacy && !c.LegacyLevels {
		return ""
	}
	return level
}
