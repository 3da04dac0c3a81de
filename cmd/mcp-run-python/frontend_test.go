package main

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// TestRunFrontEndFlags: the front end's flags reach the front end the
// program serves, in each HTTP mode, before any worker: a body past
// --request-limit gets 413, a foreign page (Origin) and a rebound name
// (Host) get 403 on the MCP endpoint and on /metrics, and the preflight of
// the --allow-origin page gets its CORS answer. What each limit does in
// full is internal/transport's (TestLargeBodyEveryMode,
// TestOriginEveryEndpoint); the end-to-end limit tests checked the wiring
// with Pyodide workers booted for nothing.
func TestRunFrontEndFlags(t *testing.T) {
	const allowed = "https://app.example"
	// A body just past this limit, well within the default one, which a
	// flag that did not reach the front end would leave in force.
	const limit = 128 << 10
	for _, tt := range []struct {
		mode            config.Mode
		post            string // where a body goes
		method, path    string // MCP's endpoint, as a page would reach it
		preflightTarget string
	}{
		{config.ModeStreamableHTTP, "/mcp", http.MethodPost, "/mcp", "/mcp"},
		{config.ModeStreamableHTTPStateless, "/mcp", http.MethodPost, "/mcp", "/mcp"},
		{config.ModeSSE, "/messages?sessionId=any", http.MethodGet, "/sse", "/messages"},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			p := startProgram(t, tt.mode, &fakeEngine{}, "--allow-origin", allowed, "--code-limit", "64KiB", "--request-limit", "128KiB")
			// The large body waits for the server's 100 Continue, which a
			// refusal never sends: a client still writing it when the server
			// closes after its 413 would meet a reset rather than the answer.
			client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: mcptest.Timeout}}
			defer client.CloseIdleConnections()
			send := func(method, path string, body []byte, header map[string]string, host string) (int, []byte) {
				t.Helper()
				req, err := http.NewRequestWithContext(mcptest.Context(t), method, p.url+path, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range header {
					req.Header.Set(k, v)
				}
				if host != "" {
					req.Host = host
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				if resp.StatusCode < 300 {
					return resp.StatusCode, nil // perhaps a stream, which would not end
				}
				got, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, got
			}
			large := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"`),
				bytes.Repeat([]byte("x"), limit)...)
			status, body := send(http.MethodPost, tt.post, large, map[string]string{"Expect": "100-continue"}, "")
			mcptest.WantRefusal(t, "a body just past --request-limit", status, body, http.StatusRequestEntityTooLarge, -32600, "--request-limit")

			ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			for _, r := range []struct{ method, path string }{{tt.method, tt.path}, {http.MethodGet, "/metrics"}} {
				status, body := send(r.method, r.path, ping, map[string]string{"Origin": "https://evil.example"}, "")
				mcptest.WantRefusal(t, "a foreign page: "+r.method+" "+r.path, status, body, http.StatusForbidden, -32000, "Forbidden")
				status, body = send(r.method, r.path, ping, nil, "evil.example:3001")
				mcptest.WantRefusal(t, "a rebound name: "+r.method+" "+r.path, status, body, http.StatusForbidden, -32000, "Forbidden")
			}

			req, err := http.NewRequestWithContext(mcptest.Context(t), http.MethodOptions, p.url+tt.preflightTarget, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Origin", allowed)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode >= 300 || got != allowed {
				t.Errorf("preflight from %s: %d, Access-Control-Allow-Origin %q", allowed, resp.StatusCode, got)
			}
		})
	}
}
