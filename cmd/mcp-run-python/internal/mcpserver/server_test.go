package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
)

// testOptions returns Options around r, in XML mode.
func testOptions(r Runner) Options {
	return Options{
		Version: "1.2.3-test", Runner: r, ReturnMode: render.ReturnXML, Log: zap.NewNop(),
		Calls: NewCallGate(mcptest.Timeout, mcptest.Timeout),
	}
}

// serveStdio serves the MCP server of o with mcp-go's own stdio transport on
// in and out until ctx ends or in does. (The transport package's adds the
// front end's notifiers and limits, which these tests do not need.)
func serveStdio(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	err := server.NewStdioServer(New(o, true, &server.Hooks{})).Listen(ctx, in, out)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// stdioServer serves r over stdio and returns a connect function; it may be
// called once.
func stdioServer(t *testing.T, r Runner) mcptest.ConnectFunc {
	t.Helper()
	o := testOptions(r)
	return mcptest.Stdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return serveStdio(ctx, o, in, out)
	})
}

// rawStdio serves r over pipes and exchanges raw JSON-RPC lines with it.
type rawStdio struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

// newRawStdio starts a stdio server with the options o.
func newRawStdio(t *testing.T, o Options) *rawStdio {
	t.Helper()
	fromServer, toServer := mcptest.StdioPipes(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return serveStdio(ctx, o, in, out)
	})
	return &rawStdio{t: t, in: toServer, out: bufio.NewReader(fromServer)}
}

// send writes one message.
func (s *rawStdio) send(msg string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// recv reads one message line, without its newline.
func (s *rawStdio) recv() string {
	s.t.Helper()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := s.out.ReadString('\n')
		got <- result{line, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			s.t.Fatalf("recv: %v", r.err)
		}
		return strings.TrimSuffix(r.line, "\n")
	case <-time.After(mcptest.Timeout):
		s.t.Fatal("recv: timed out")
		return ""
	}
}

// TestInitialize checks the MCP surface of DESIGN 1.2 on the wire: server
// info, instructions and capabilities. TestToolsnaps checks the tool.
func TestInitialize(t *testing.T) {
	s := newRawStdio(t, testOptions(&mcptest.FakeRunner{}))
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	var init struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string                     `json:"protocolVersion"`
			ServerInfo      map[string]any             `json:"serverInfo"`
			Instructions    string                     `json:"instructions"`
			Capabilities    map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(s.recv()), &init); err != nil {
		t.Fatalf("decode initialize result: %v", err)
	}
	if init.ID != 1 || init.Result.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize answered id %d with protocol %q", init.ID, init.Result.ProtocolVersion)
	}
	if name, version := init.Result.ServerInfo["name"], init.Result.ServerInfo["version"]; name != "MCP Run Python" || version != "1.2.3-test" {
		t.Errorf("serverInfo = %v", init.Result.ServerInfo)
	}
	if want := `Call the "run_python_code" tool with the Python code to run.`; init.Result.Instructions != want {
		t.Errorf("instructions = %q, want %q", init.Result.Instructions, want)
	}
	for _, capability := range []string{"tools", "logging"} {
		if _, ok := init.Result.Capabilities[capability]; !ok {
			t.Errorf("capability %q missing from %v", capability, init.Result.Capabilities)
		}
	}
}
