package transport

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/slogzap"
)

func TestUnaddressableCancel(t *testing.T) {
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`
	modernCancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	modernHeader := http.Header{mcp.HeaderProtocolVersion: {"2026-07-28"}}
	legacyHeader := http.Header{mcp.HeaderProtocolVersion: {"2025-06-18"}}
	tests := []struct {
		name      string
		stateless bool
		header    http.Header
		body      string
		want      bool
	}{
		{"stateless cancel", true, legacyHeader, cancel, true},
		{"stateful mcptest.Legacy cancel goes to its session", false, legacyHeader, cancel, false},
		{"stateful cancel by header version", false, modernHeader, cancel, true},
		{"stateful cancel by _meta version", false, http.Header{}, modernCancel, true},
		{"other notification", true, http.Header{}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{"request", true, http.Header{}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"not JSON", true, http.Header{}, `nope`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unaddressableCancel(tt.stateless, tt.header, decodeMessage([]byte(tt.body))); got != tt.want {
				t.Errorf("unaddressableCancel = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMessage checks what the front end reads of a POSTed message.
func TestMessage(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		id         string // requestID, "" for nil
		initialize bool
	}{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "1", true},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":[1]}`, `"a"`, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"initialize"}`, "", true},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, "", false},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":1}`, "", false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, "", false},
		{"not JSON", `{"id":1,`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeMessage([]byte(tt.body))
			if got := string(m.requestID()); got != tt.id {
				t.Errorf("requestID = %q, want %q", got, tt.id)
			}
			if got := m.isInitialize(); got != tt.initialize {
				t.Errorf("isInitialize = %v, want %v", got, tt.initialize)
			}
		})
	}
}

// TestResponseMatching checks that the SSE shutdown, and the end of stdin,
// match the responses mcp-go writes to the requests they answer, and
// nothing else (TestMCPGoSSEResponseFlushed checks mcp-go's own bytes).
func TestResponseMatching(t *testing.T) {
	requests := []struct {
		name string
		body string
		key  string // "" when not a request
	}{
		{"numeric id", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, "n:7"},
		{"float spelling", `{"jsonrpc":"2.0","id":7.0,"method":"tools/call"}`, "n:7"},
		{"string id", `{"jsonrpc":"2.0","id":"7","method":"tools/list"}`, "s:7"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, ""},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, ""},
		{"response from the client", `{"jsonrpc":"2.0","id":7,"result":{}}`, ""},
		{"a method and a result, which mcp-go does not answer", `{"jsonrpc":"2.0","id":7,"method":"ping","result":1}`, ""},
		{"a method and a null result", `{"jsonrpc":"2.0","id":7,"method":"ping","result":null}`, "n:7"},
		{"minus zero, which mcp-go answers as 0", `{"jsonrpc":"2.0","id":-0,"method":"ping"}`, "n:0"},
		{"batch", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, ""},
		{"not JSON", `{`, ""},
	}
	for _, tt := range requests {
		t.Run("request/"+tt.name, func(t *testing.T) {
			key, ok := decodeMessage([]byte(tt.body)).requestKey()
			if key != tt.key || ok != (tt.key != "") {
				t.Errorf("requestKey = %q %v, want %q", key, ok, tt.key)
			}
		})
	}
	events := []struct {
		name  string
		event string
		key   string // "" when not a response
	}{
		{"result", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n", "n:7"},
		{"error", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32600,\"message\":\"x\"}}\n\n", "s:a"},
		{"log notification", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n", ""},
		{"ping from the server", "event: message\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n", ""},
		{"endpoint", "event: endpoint\ndata: /messages?sessionId=abc\r\n\r\n", ""},
	}
	messages := []struct {
		name string
		msg  string
		key  string // "" when not a response
	}{
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, "n:7"},
		{"result, then id", `{"result":{"content":[]},"jsonrpc":"2.0","id":"a"}`, "s:a"},
		{"error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, ""},
		{"request", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, ""},
		{"notification, spelled otherwise", `{"method":"notifications/message","jsonrpc":"2.0","params":{}}`, ""},
		{"not an object", `[{"jsonrpc":"2.0","id":7,"result":{}}]`, ""},
		{"cut", `{"jsonrpc":"2.0","result":{"content":`, ""},
	}
	for _, tt := range messages {
		t.Run("message/"+tt.name, func(t *testing.T) {
			key, ok := mcpGo{}.responseKey([]byte(tt.msg))
			if key != tt.key || ok != (tt.key != "") {
				t.Errorf("responseKey = %q %v, want %q", key, ok, tt.key)
			}
		})
	}
	for _, tt := range events {
		t.Run("event/"+tt.name, func(t *testing.T) {
			key, ok := mcpGo{}.responseEvent([]byte(tt.event))
			if key != tt.key || ok != (tt.key != "") {
				t.Errorf("responseEvent = %q %v, want %q", key, ok, tt.key)
			}
		})
	}
}

func TestPendingResponses(t *testing.T) {
	p := newPendingResponses()
	p.add("s1", "n:1")
	p.add("s1", "n:1") // the same request twice counts once
	p.add("s1", "n:2")
	p.add("s2", "n:1")
	waited := make(chan error, 1)
	go func() { waited <- p.wait(mcptest.Context(t)) }()
	p.done("s1", "n:1")
	p.done("s1", "n:9") // unknown: ignored
	p.done("s1", "n:2")
	if !p.has("s2") || p.has("s1") {
		t.Errorf("has: s1 %v, s2 %v; want only s2", p.has("s1"), p.has("s2"))
	}
	select {
	case err := <-waited:
		t.Fatalf("wait returned %v with a response pending", err)
	default:
	}
	p.dropGroup("s2")
	if err := <-waited; err != nil {
		t.Errorf("wait: %v", err)
	}
	p.add("s3", "n:1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 response(s) not delivered") {
		t.Errorf("wait with a response pending and an ended context = %v", err)
	}
}

// TestSlogLoggerReachesZap checks that mcp-go's slog records reach the zap
// core: under the logger's name, at the mapped level, with a group's keys
// inside the group and no stack trace.
func TestSlogLoggerReachesZap(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := slogzap.New(zap.New(core).Named("mcp-run-python"))

	log.Debug("below the level")
	log.With("session", "s1").WithGroup("request").Error("failed to write", "err", "broken pipe", slog.Int("n", 2))
	log.Warn("odd", slog.Group("peer", "addr", "127.0.0.1"))
	log.WithGroup("empty").Info("no attributes")

	type entry struct {
		Level   zapcore.Level
		Name    string
		Message string
		Context map[string]any
		Stack   string
	}
	var got []entry
	for _, e := range logs.AllUntimed() {
		got = append(got, entry{e.Level, e.LoggerName, e.Message, e.ContextMap(), e.Stack})
	}
	want := []entry{
		{zapcore.ErrorLevel, "mcp-run-python", "failed to write", map[string]any{
			"session": "s1",
			"request": map[string]any{"err": "broken pipe", "n": int64(2)},
		}, ""},
		{zapcore.WarnLevel, "mcp-run-python", "odd", map[string]any{
			"peer": map[string]any{"addr": "127.0.0.1"},
		}, ""},
		{zapcore.InfoLevel, "mcp-run-python", "no attributes", map[string]any{}, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("zap entries\n got %#v\nwant %#v", got, want)
	}
}
