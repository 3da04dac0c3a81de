package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// TestAskOverSSE is an older client of the SSE transport, which mcp-go's
// client cannot be (it answers no server request), written out: code asks
// the model, the sampling request comes on the session's stream, the
// client POSTs its answer, which the front end takes before mcp-go (that
// sends no such request over SSE, and would refuse the response), and the
// call's result follows with the answer.
func TestAskOverSSE(t *testing.T) {
	o := testOptions(mcptest.AskRunner{})
	o.Ask = &mcpserver.AskOptions{Model: true, ParkTimeout: mcptest.Timeout}
	fe := newSSEFrontEnd(o)
	ts := httptest.NewServer(fe.handler)
	t.Cleanup(func() {
		fe.closeSessions(context.Background())
		ts.Close()
	})
	req, _ := http.NewRequestWithContext(mcptest.Context(t), http.MethodGet, ts.URL+sseStreamPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	stream := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := stream.ReadString('\n')
		if err != nil {
			t.Fatalf("read the endpoint event: %v", err)
		}
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			endpoint = data
		}
	}
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(ts.URL+endpoint, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %.60s: %s", body, resp.Status)
		}
	}
	// next returns the next message on the stream.
	next := func() map[string]json.RawMessage {
		t.Helper()
		for {
			line, err := stream.ReadString('\n')
			if err != nil {
				t.Fatalf("read the stream: %v", err)
			}
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				var msg map[string]json.RawMessage
				if err := json.Unmarshal([]byte(data), &msg); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				return msg
			}
		}
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	next()
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"model hi"}}}`)
	ask := next()
	if string(ask["method"]) != `"`+string(mcp.MethodSamplingCreateMessage)+`"` || !strings.Contains(string(ask["params"]), `"text":"hi"`) {
		t.Fatalf("the stream sent %s, want the sampling request", ask)
	}
	post(`{"jsonrpc":"2.0","id":` + string(ask["id"]) + `,"result":{"role":"assistant","content":{"type":"text","text":"re: hi"},"model":"m"}}`)
	result := next()
	if string(result["id"]) != "2" || !strings.Contains(string(result["result"]), `re: hi`) {
		t.Errorf("the stream sent %s, want the call's result with the answer", result)
	}
}
