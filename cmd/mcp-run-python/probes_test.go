package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

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
			false, "not ready: no warm worker (0 warm, 0 busy, 2 starting workers, 0 calls waiting)"},
		{"all busy", supervisor.Health{Busy: 2, Waiting: 3}, false,
			false, "not ready: no warm worker (0 warm, 2 busy, 0 starting workers, 3 calls waiting)"},
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

// get requests url and returns the status, the content type and the body.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// testCallsMetric is a metric that the tests register in place of the
// supervisor's.
func testCallsMetric(reg prometheus.Registerer) {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_run_python_calls_total",
		Help: "Calls by status.",
	}, []string{"status"})
	reg.MustRegister(calls)
	calls.WithLabelValues("success").Add(3)
}

// checkMetrics checks the answer of url, a /metrics endpoint: the
// Prometheus text format, the test metric, the Go and process collectors.
func checkMetrics(t *testing.T, url string) {
	t.Helper()
	status, contentType, body := get(t, url)
	if status != http.StatusOK {
		t.Errorf("metrics: status %d", status)
	}
	if !strings.HasPrefix(contentType, "text/plain; version=0.0.4") {
		t.Errorf("metrics content type %q, want the Prometheus text format", contentType)
	}
	for _, want := range []string{
		"\nmcp_run_python_calls_total{status=\"success\"} 3\n",
		"# TYPE mcp_run_python_calls_total counter\n",
		"\ngo_goroutines ",
		"\nprocess_start_time_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// TestProbeEndpoints serves the probes in front of a stand-in MCP handler.
func TestProbeEndpoints(t *testing.T) {
	e := &fakeEngine{}
	reg := newMetricsRegistry()
	testCallsMetric(reg)
	calls := newCallGate(time.Second, time.Second)
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "mcp "+r.Method+" "+r.URL.Path)
	})
	ts := httptest.NewServer(probes{health: e.Health, metrics: reg, calls: calls, log: zap.NewNop()}.handler(mcpHandler))
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
			"not ready: no warm worker (0 warm, 0 busy, 2 starting workers, 0 calls waiting)\n", true},
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
				calls.close()
			}
			e.setHealth(tt.health)
			status, contentType, body := get(t, ts.URL+tt.path)
			if status != tt.status || body != tt.body {
				t.Errorf("GET %s: %d %q, want %d %q", tt.path, status, body, tt.status, tt.body)
			}
			if tt.textOnly && contentType != "text/plain; charset=utf-8" {
				t.Errorf("GET %s: content type %q", tt.path, contentType)
			}
		})
	}
	t.Run("metrics", func(t *testing.T) {
		checkMetrics(t, ts.URL+metricsPath)
	})
}

// TestRunServesProbes runs the program in each HTTP mode: the probes answer
// beside MCP, from the engine's health, and /metrics serves the registry
// the engine was given.
func TestRunServesProbes(t *testing.T) {
	for _, mode := range []Mode{ModeStreamableHTTP, ModeStreamableHTTPStateless, ModeSSE} {
		t.Run(string(mode), func(t *testing.T) {
			e := &fakeEngine{fakeRunner: fakeRunner{lines: 1}}
			e.onNew = func(cfg supervisor.Config) {
				if cfg.Metrics == nil {
					t.Errorf("the engine got no metrics registry")
					return
				}
				testCallsMetric(cfg.Metrics)
			}
			p := startProgram(t, mode, e)
			if status, _, body := get(t, p.url+healthzPath); status != 200 || body != "ok\n" {
				t.Errorf("healthz: %d %q", status, body)
			}
			e.setHealth(supervisor.Health{Starting: 2})
			if status, _, body := get(t, p.url+readyzPath); status != 503 || !strings.HasPrefix(body, "not ready: no warm worker") {
				t.Errorf("readyz while starting: %d %q", status, body)
			}
			e.setHealth(supervisor.Health{Err: "cannot run deno"})
			if status, _, body := get(t, p.url+readyzPath); status != 503 || body != "not ready: workers cannot start: cannot run deno\n" {
				t.Errorf("readyz while workers fail: %d %q", status, body)
			}
			e.setHealth(supervisor.Health{Warm: 2, Ready: true})
			if status, _, body := get(t, p.url+readyzPath); status != 200 || !strings.HasPrefix(body, "ready: 2 warm") {
				t.Errorf("readyz when ready: %d %q", status, body)
			}
			checkMetrics(t, p.url+metricsPath)
			// MCP is still served.
			c := p.connect(t)
			if text, isError, err := c.call(testContext(t), map[string]any{codeArgument: "x"}); err != nil || isError || text != expectedXML("x", 1) {
				t.Errorf("call: err %v, isError %v, %q", err, isError, text)
			}
			p.stop()
			if code := p.wait(t); code != exitOK {
				t.Errorf("exit %d", code)
			}
		})
	}
}

// TestProbesAreHTTPOnly checks that stdio mode, where stdout is the
// protocol, still hands the engine a registry (the supervisor counts
// everywhere) and needs no port.
func TestProbesAreHTTPOnly(t *testing.T) {
	e := &fakeEngine{fakeRunner: fakeRunner{lines: 1}}
	var got prometheus.Registerer
	e.onNew = func(cfg supervisor.Config) { got = cfg.Metrics }
	p := startProgram(t, ModeStdio, e)
	c := p.connect(t)
	if _, isError, err := c.call(testContext(t), map[string]any{codeArgument: "x"}); err != nil || isError {
		t.Fatalf("call: %v %v", err, isError)
	}
	p.stop()
	if code := p.wait(t); code != exitOK {
		t.Errorf("exit %d", code)
	}
	if got == nil {
		t.Errorf("the engine got no metrics registry")
	}
}
