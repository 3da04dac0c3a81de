package transport

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// TestLargeBodyOverTCP sends a 50 MB chunked body over a real loopback
// socket, as http.Transport does, and requires the 413 to reach it. The
// in-memory twin (TestLargeBodyEveryMode) cannot see this: closing a TCP
// socket with unread bytes resets it, and the reset can overtake the
// answer, unless net/http lingers, which it does only when its own
// MaxBytesReader stops the body on the ResponseWriter net/http made (a
// ResponseWriter wrapped before guard lost it: every such client got
// "connection reset by peer").
func TestLargeBodyOverTCP(t *testing.T) {
	const size = 50 << 20
	for _, kind := range []Kind{StreamableHTTP, SSE} {
		t.Run(kindNames[kind], func(t *testing.T) {
			fe, err := NewHTTPFrontEnd(kind, testOptions(&mcptest.FakeRunner{}))
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serveOn(t, ln, fe)
			path := "/mcp"
			if kind == SSE {
				path = sseMessagesPath + "?sessionId=any"
			}
			for range 3 {
				body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"`),
					io.LimitReader(endless{}, size))
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ln.Addr().String()+path, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("POST %d MB: %v", size>>20, err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if _, code, msg := jsonRPCErrorOf(t, got); resp.StatusCode != http.StatusRequestEntityTooLarge || code != codeInvalidRequest || !strings.Contains(msg, "--request-limit") {
					t.Errorf("POST %d MB: %d %q, want 413 and a JSON-RPC error -32600 naming --request-limit", size>>20, resp.StatusCode, got)
				}
			}
		})
	}
}
