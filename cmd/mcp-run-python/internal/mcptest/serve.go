package mcptest

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Stdio returns a function that connects the one client of a stdio server:
// serve serves MCP on in and out until ctx ends or in does.
func Stdio(t *testing.T, serve func(ctx context.Context, in io.Reader, out io.Writer) error) ConnectFunc {
	t.Helper()
	return func(t *testing.T, e Era) *Client {
		t.Helper()
		clientIn, clientOut := StdioPipes(t, serve)
		return NewClient(t, transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))), e)
	}
}

// StdioPipes runs serve on pipes until the test ends and returns the
// client's ends: what the server writes, and where to write to it.
func StdioPipes(t testing.TB, serve func(ctx context.Context, in io.Reader, out io.Writer) error) (io.ReadCloser, io.WriteCloser) {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, serverIn, serverOut) }()
	t.Cleanup(func() {
		// End the server's input, and fail its writes rather than let them
		// wait for a client that stopped reading.
		cancel()
		_ = clientOut.Close()
		_ = clientIn.Close()
		waitServed(t, done, "stdio")
	})
	return clientIn, clientOut
}

// waitServed waits for a server that the test's cleanup stopped to return,
// and reports its error or that it did not stop.
func waitServed(t testing.TB, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve %s: %v", what, err)
		}
	case <-time.After(Timeout):
		t.Errorf("the %s server did not stop", what)
	}
}

// ServeHTTP runs serve on a loopback listener until the test ends, as the
// program serves its HTTP modes, and returns the base URL. serve must
// return once ctx ends.
func ServeHTTP(t *testing.T, serve func(ctx context.Context, ln net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		waitServed(t, done, "HTTP")
	})
	return "http://" + ln.Addr().String()
}
