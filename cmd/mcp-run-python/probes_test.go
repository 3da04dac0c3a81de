package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// TestRunServesProbes runs the program in each HTTP mode: the probes answer
// beside MCP, from the engine's health, and /metrics serves the registry
// the engine was given.
func TestRunServesProbes(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeStreamableHTTP, config.ModeStreamableHTTPStateless, config.ModeSSE} {
		t.Run(string(mode), func(t *testing.T) {
			e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 1}}
			e.onNew = func(cfg supervisor.Config) {
				if cfg.Metrics == nil {
					t.Errorf("the engine got no metrics registry")
					return
				}
				mcptest.RegisterCallsMetric(cfg.Metrics)
			}
			p := startProgram(t, mode, e)
			if status, _, body := mcptest.Get(t, p.url+"/healthz"); status != 200 || body != "ok\n" {
				t.Errorf("healthz: %d %q", status, body)
			}
			e.SetHealth(supervisor.Health{Starting: 2})
			if status, _, body := mcptest.Get(t, p.url+"/readyz"); status != 503 || !strings.HasPrefix(body, "not ready: no worker has started yet") {
				t.Errorf("readyz while starting: %d %q", status, body)
			}
			e.SetHealth(supervisor.Health{Err: "cannot run deno"})
			if status, _, body := mcptest.Get(t, p.url+"/readyz"); status != 503 || body != "not ready: workers cannot start: cannot run deno\n" {
				t.Errorf("readyz while workers fail: %d %q", status, body)
			}
			e.SetHealth(supervisor.Health{Warm: 2, Ready: true})
			if status, _, body := mcptest.Get(t, p.url+"/readyz"); status != 200 || !strings.HasPrefix(body, "ready: 2 warm") {
				t.Errorf("readyz when ready: %d %q", status, body)
			}
			mcptest.CheckMetrics(t, p.url+"/metrics")
			// MCP is still served.
			c := p.connect(t)
			if text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "x"}); err != nil || isError || text != mcptest.ExpectedXML("x", 1) {
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
// protocol, needs no port and makes no registry, which nothing would serve.
func TestProbesAreHTTPOnly(t *testing.T) {
	e := &fakeEngine{FakeRunner: mcptest.FakeRunner{Lines: 1}}
	var got prometheus.Registerer
	e.onNew = func(cfg supervisor.Config) { got = cfg.Metrics }
	p := startProgram(t, config.ModeStdio, e)
	c := p.connect(t)
	if _, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "x"}); err != nil || isError {
		t.Fatalf("call: %v %v", err, isError)
	}
	p.stop()
	if code := p.wait(t); code != exitOK {
		t.Errorf("exit %d", code)
	}
	if got != nil {
		t.Errorf("the engine got a metrics registry over stdio")
	}
}
