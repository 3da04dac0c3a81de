package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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

// TestClientRequestsCancelled ends the call while its request waits: the
// client is told, with a notifications/cancelled that names the request,
// and the wait ends with the call's cause.
func TestClientRequestsCancelled(t *testing.T) {
	r := NewClientRequests()
	sent := make(sentRequests, 2)
	ctx, cancel := context.WithCancelCause(WithClientRequests(WithNotifier(t.Context(), sent), r, ""))
	done := make(chan error, 1)
	go func() {
		_, err := clientRequestsFrom(ctx).sample(ctx, mcp.CreateMessageParams{MaxTokens: 1})
		done <- err
	}()
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(<-sent, &req); err != nil {
		t.Fatal(err)
	}
	cancel(errors.New("the call's time is up"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the call's time is up") {
		t.Errorf("sample: %v", err)
	}
	var note struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		} `json:"params"`
	}
	if err := json.Unmarshal(<-sent, &note); err != nil || note.Method != string(mcp.MethodNotificationCancelled) ||
		string(note.Params.RequestID) != string(req.ID) || note.Params.Reason != "the call's time is up" {
		t.Errorf("sent %+v, %v; want the request's cancellation", note, err)
	}
	if r.Deliver("", req.ID, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)) {
		t.Error("a response after the cancellation was delivered")
	}
}
