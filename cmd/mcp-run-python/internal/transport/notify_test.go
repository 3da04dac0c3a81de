package transport

import (
	"context"
	"errors"
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
