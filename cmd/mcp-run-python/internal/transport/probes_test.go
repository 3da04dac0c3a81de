package transport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

func TestReadiness(t *testing.T) {
	tests := []struct {
		name         string
		health       supervisor.Health
		shuttingDown bool
		ready        bool
		text         string
	}{
		{"ready", supervisor.Health{Warm: 2, Busy: 1, Ready: true}, false,
			true, "ready: 2 warm, 1 busy, 0 starting workers, 0 calls waiting"},
		{"starting", supervisor.Health{Starting: 2}, false,
			false, "not ready: no worker has started yet (0 warm, 0 busy, 2 starting workers, 0 calls waiting)"},
		{"all busy", supervisor.Health{Busy: 2, Waiting: 3, Wait: 4 * time.Second, Ready: true}, false,
			true, "ready: 0 warm, 2 busy, 0 starting workers, 3 calls waiting"},
		{"overloaded", supervisor.Health{Busy: 2, Waiting: 40, Wait: 41234 * time.Millisecond}, false,
			false, "not ready: a call would wait about 41.2s (0 warm, 2 busy, 0 starting workers, 40 calls waiting)"},
		{"workers cannot start", supervisor.Health{Err: "start worker: exec: \"deno\": executable file not found in $PATH"}, false,
			false, `not ready: workers cannot start: start worker: exec: "deno": executable file not found in $PATH`},
		{"error on several lines", supervisor.Health{Err: "worker exited: signal: killed\nstderr:\n  out of memory\n"}, false,
			false, "not ready: workers cannot start: worker exited: signal: killed stderr: out of memory"},
		{"ready wins over a stale error", supervisor.Health{Warm: 1, Ready: true, Err: "earlier failure"}, false,
			true, "ready: 1 warm, 0 busy, 0 starting workers, 0 calls waiting"},
		{"shutting down", supervisor.Health{Warm: 2, Ready: true}, true,
			false, "not ready: shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, text := readiness(tt.health, tt.shuttingDown)
			if ready != tt.ready || text != tt.text {
				t.Errorf("readiness = %v %q, want %v %q", ready, text, tt.ready, tt.text)
			}
			if strings.Contains(text, "\n") {
				t.Errorf("reason %q is not one line", text)
			}
		})
	}
}

// TestProbeEndpoints serves the probes in front of a stand-in MCP handler.
func TestProbeEndpoints(t *testing.T) {
	var health mcptest.FakeHealth
	reg := NewMetricsRegistry()
	mcptest.RegisterCallsMetric(reg)
	calls := mcpserver.NewCallGate(time.Second, time.Second)
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "mcp "+r.Method+" "+r.URL.Path)
	})
	ts := httptest.NewServer(Probes{Health: health.Health, Metrics: reg, Calls: calls, Log: zap.NewNop()}.handler(mcpHandler, nil))
	t.Cleanup(ts.Close)

	tests := []struct {
		name     string
		path     string
		health   supervisor.Health
		closed   bool // the gate is closed, as at shutdown
		status   int
		body     string
		textOnly bool
	}{
		{"healthy while starting", healthzPath, supervisor.Health{Starting: 1}, false, 200, "ok\n", true},
		{"healthy while workers fail", healthzPath, supervisor.Health{Err: "no deno"}, false, 200, "ok\n", true},
		{"ready", readyzPath, supervisor.Health{Warm: 2, Ready: true}, false, 200,
			"ready: 2 warm, 0 busy, 0 starting workers, 0 calls waiting\n", true},
		{"not ready while starting", readyzPath, supervisor.Health{Starting: 2}, false, 503,
			"not ready: no worker has started yet (0 warm, 0 busy, 2 starting workers, 0 calls waiting)\n", true},
		{"not ready with the error", readyzPath, supervisor.Health{Err: "deno: exec format error\nmore"}, false, 503,
			"not ready: workers cannot start: deno: exec format error more\n", true},
		{"MCP paths reach MCP", streamablePath, supervisor.Health{}, false, 200, "mcp GET /mcp", false},
		{"other paths reach MCP", "/sse", supervisor.Health{}, false, 200, "mcp GET /sse", false},
		{"not ready at shutdown", readyzPath, supervisor.Health{Warm: 2, Ready: true}, true, 503, "not ready: shutting down\n", true},
		{"healthy at shutdown", healthzPath, supervisor.Health{}, true, 200, "ok\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.closed {
				calls.Close()
			}
			health.SetHealth(tt.health)
			status, contentType, body := mcptest.Get(t, ts.URL+tt.path)
			if status != tt.status || body != tt.body {
				t.Errorf("GET %s: %d %q, want %d %q", tt.path, status, body, tt.status, tt.body)
			}
			if tt.textOnly && contentType != "text/plain; charset=utf-8" {
				t.Errorf("GET %s: content type %q", tt.path, contentType)
			}
		})
	}
	t.Run("metrics", func(t *testing.T) {
		mcptest.CheckMetrics(t, ts.URL+metricsPath)
	})
}
