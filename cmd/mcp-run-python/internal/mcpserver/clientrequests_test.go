package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// sentRequests is a Notifier that hands on what it is sent.
type sentRequests chan []byte

// Notify implements Notifier.
func (s sentRequests) Notify(_ context.Context, msg []byte) error {
	s <- msg
	return nil
}

// TestClientRequestsDeliver sends an elicitation on a call's stream: a
// response from another MCP session, or with an id that is not the
// request's, is not the call's (the transport hands it to mcp-go), and the
// client's own response is.
func TestClientRequestsDeliver(t *testing.T) {
	r := NewClientRequests()
	sent := make(sentRequests, 1)
	ctx := WithClientRequests(WithNotifier(t.Context(), sent), r, "s1")
	done := make(chan *mcp.ElicitationResult, 1)
	go func() {
		res, err := clientRequestsFrom(ctx).elicit(ctx, mcp.ElicitationParams{Message: "name?"})
		if err != nil {
			t.Errorf("elicit: %v", err)
		}
		done <- res
	}()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(<-sent, &req); err != nil || req.Method != string(mcp.MethodElicitationCreate) {
		t.Fatalf("sent %+v, %v", req, err)
	}
	response := []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"action":"accept","content":{"answer":"Ada"}}}`)
	for _, tc := range []struct {
		name    string
		session string
		id      json.RawMessage
	}{
		{"another session's", "s2", req.ID},
		{"another id", "s1", json.RawMessage(`"ask-other"`)},
		{"a number", "s1", json.RawMessage(`7`)},
	} {
		if r.Deliver(tc.session, tc.id, response) {
			t.Errorf("%s response was delivered", tc.name)
		}
	}
	if !r.Deliver("s1", req.ID, response) {
		t.Fatal("the client's response was not delivered")
	}
	if res := <-done; res == nil || res.Action != mcp.ElicitationResponseActionAccept {
		t.Errorf("result %+v", res)
	}
	if r.Deliver("s1", req.ID, response) {
		t.Error("a second response was delivered")
	}
}
