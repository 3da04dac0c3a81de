package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// mcpGoModule is the module path of mcp-go.
const mcpGoModule = "github.com/mark3labs/mcp-go"

// TestMCPGoPinned fails when go.mod requires another mcp-go than the one
// mcpGo was checked against, or replaces it: its behaviours are not part of
// mcp-go's API.
func TestMCPGoPinned(t *testing.T) {
	version := requiredVersion(t, mcpGoModule)
	if version != mcpGoVersion {
		t.Fatalf("go.mod requires %s %s, but mcpgo.go was checked against %s. Re-check each "+
			"behaviour listed on mcpGo in mcpgo.go against the new release (SSE: the 202, one Write "+
			"per event then a flush, the \"event queue full\" error, request IDs encoded again; "+
			"Streamable HTTP: the upgrade to SSE; stdio: the pool cap of 100, one Write per message), "+
			"run this package's tests and the end-to-end tests, then set mcpGoVersion to %s",
			mcpGoModule, version, mcpGoVersion, version)
	}
}

// requiredVersion returns the version of module that the main module's
// go.mod requires; a replace of it fails the test. (Test binaries carry no
// dependencies in their build information.)
func requiredVersion(t *testing.T, module string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for {
		if data, err = os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	version := ""
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, module+" ") && strings.Contains(line, "=>") {
			t.Fatalf("go.mod replaces %s: mcpGo's behaviours were checked against the release itself", module)
		}
		// "MODULE VERSION" in a require block, or "require MODULE VERSION".
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) >= 2 && fields[0] == module {
			version = fields[1]
		}
	}
	if version == "" {
		t.Fatalf("go.mod does not require %s", module)
	}
	return version
}

// openSSEStream serves an SSE front end, opens a stream and returns the
// front end, its server's URL, the stream's session ID and the stream.
func openSSEStream(t *testing.T) (*HTTPFrontEnd, string, string, *bufio.Reader) {
	t.Helper()
	fe := newSSEFrontEnd(testOptions(&mcptest.FakeRunner{}))
	ts := httptest.NewServer(fe.handler)
	t.Cleanup(func() {
		fe.closeSessions(context.Background())
		ts.Close()
	})
	req, err := http.NewRequestWithContext(mcptest.Context(t), http.MethodGet, ts.URL+sseStreamPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	stream := bufio.NewReader(resp.Body)
	for {
		line, err := stream.ReadString('\n')
		if err != nil {
			t.Fatalf("read endpoint event: %v", err)
		}
		if _, after, ok := strings.Cut(line, "sessionId="); ok {
			return fe, ts.URL, strings.TrimSpace(after), stream
		}
	}
}

// TestMCPGoSSEResponseFlushed checks what the SSE shutdown relies on: mcp-go
// accepts a POST with 202 and writes its response to the stream as one
// event that mcpGo.responseEvent recognises, flushed, with the request's ID
// encoded again (7.0 comes back as 7).
func TestMCPGoSSEResponseFlushed(t *testing.T) {
	fe, url, sessionID, stream := openSSEStream(t)
	resp, err := http.Post(url+sseMessagesPath+"?sessionId="+sessionID, "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":7.0,"method":"ping"}`))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	resp.Body.Close()
	if !(mcpGo{}).sseAccepted(resp.StatusCode) {
		t.Fatalf("mcp-go answered the POST %d, which mcpGo.sseAccepted does not take for accepted: re-check mcpGo's SSE behaviours", resp.StatusCode)
	}
	// The response was pending from the POST on, and is done once an event
	// carrying it has been flushed.
	if err := fe.pending.wait(mcptest.Context(t)); err != nil {
		t.Fatalf("the response to the ping was never marked delivered (%v): mcp-go's SSE writes no longer match mcpGo.responseEvent", err)
	}
	var event strings.Builder
	for !strings.HasSuffix(event.String(), "\n\n") {
		line, err := stream.ReadString('\n')
		if err != nil {
			t.Fatalf("read the response event: %v (so far %q)", err, event.String())
		}
		if event.Len() > 0 || strings.TrimSpace(line) != "" { // the endpoint event's end
			event.WriteString(line)
		}
	}
	if key, ok := (mcpGo{}).responseEvent([]byte(event.String())); !ok || key != "n:7" {
		t.Errorf("mcp-go's response event %q has key %q %v, want n:7", event.String(), key, ok)
	}
}

// TestMCPGoSSEQueueFull checks the error of mcp-go's SendEventToSession on a
// full event queue, which sseNotifier waits on: a client that stops reading
// fills the socket buffers and then the queue.
func TestMCPGoSSEQueueFull(t *testing.T) {
	fe, _, sessionID, _ := openSSEStream(t)
	// From here on the client reads nothing.
	handler, ok := fe.handler.(*sseHandler)
	if !ok {
		t.Fatalf("SSE handler is %T, not an *sseHandler", fe.handler)
	}
	var sender eventSender = handler.sse
	event := json.RawMessage(`"` + strings.Repeat("x", 256<<10) + `"`)
	for i := range 4000 {
		err := sender.SendEventToSession(sessionID, event)
		if err == nil {
			continue
		}
		if !(mcpGo{}).queueFull(err) {
			t.Fatalf("event %d: mcpGo.queueFull does not take mcp-go's error %q for a full queue", i, err)
		}
		return
	}
	t.Fatal("the event queue never filled")
}
