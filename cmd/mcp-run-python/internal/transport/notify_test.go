package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// queueFullSender fails with mcp-go's queue-full error a number of times.
type queueFullSender struct {
	full int
	sent []any
}

func (s *queueFullSender) SendEventToSession(_ string, event any) error {
	if s.full > 0 {
		s.full--
		return errors.New("event queue full")
	}
	s.sent = append(s.sent, event)
	return nil
}

func TestSSENotifierWaitsForRoom(t *testing.T) {
	s := &queueFullSender{full: 3}
	n := sseNotifier{events: s, sessionID: "x"}
	if err := n.Notify(mcptest.Context(t), []byte(`{"a":1}`)); err != nil {
		t.Fatalf("notify: %v", err)
	}
	if len(s.sent) != 1 || s.full != 0 {
		t.Errorf("sent %v after %d refusals left", s.sent, s.full)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (sseNotifier{events: &queueFullSender{full: 1 << 30}}).Notify(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("notify on a full queue after cancel = %v, want context.Canceled", err)
	}
	if err := (sseNotifier{events: failingSender{}}).Notify(mcptest.Context(t), []byte(`{}`)); err == nil {
		t.Errorf("notify to a gone session must fail")
	}
}

// failingSender reports a session that is gone.
type failingSender struct{}

func (failingSender) SendEventToSession(string, any) error { return errors.New("session not found: x") }

// TestSSEQueueFullMessage pins the text of mcp-go's error for a full SSE
// event queue, which sseNotifier waits on: a client that stops reading
// fills the socket buffers and then the queue.
func TestSSEQueueFullMessage(t *testing.T) {
	fe := newSSEFrontEnd(testOptions(&mcptest.FakeRunner{}))
	ts := httptest.NewServer(fe.handler)
	t.Cleanup(func() {
		fe.closeSessions(context.Background())
		ts.Close()
	})
	ctx := mcptest.Context(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+sseStreamPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	var sessionID string
	for sessionID == "" {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("read endpoint event: %v", err)
		}
		if _, after, ok := strings.Cut(line, "sessionId="); ok {
			sessionID = strings.TrimSpace(after)
		}
	}
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
		if !strings.Contains(err.Error(), "queue full") {
			t.Fatalf("event %d: error %q does not say the queue is full", i, err)
		}
		return
	}
	t.Fatal("the event queue never filled")
}
