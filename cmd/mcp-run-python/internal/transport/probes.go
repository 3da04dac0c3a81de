package transport

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// Paths of the service endpoints of the HTTP modes.
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
	metricsPath = "/metrics"
)

// NewMetricsRegistry returns the process's Prometheus registry with the Go
// runtime's and the process's own metrics: the program makes one, gives it
// to the supervisor for its own and serves it at /metrics.
func NewMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Probes are the endpoints that a service manager, a load balancer or
// Prometheus use beside MCP in the HTTP modes (HTTPFrontEnd.AddProbes).
type Probes struct {
	Health  func() supervisor.Health // the pool's state
	Metrics *prometheus.Registry
	Calls   *mcpserver.CallGate // closed at shutdown
	Log     *zap.Logger
}

// handler returns next with /healthz, /readyz and /metrics added, /metrics
// wrapped by protect when it is not nil. The metrics of next's own (those
// of an HTTP front end's limits) join the others.
func (p Probes) handler(next http.Handler, protect func(http.Handler) http.Handler) http.Handler {
	if m, ok := next.(interface{ collectors() []prometheus.Collector }); ok {
		for _, c := range m.collectors() {
			if err := p.Metrics.Register(c); err != nil {
				p.Log.Warn("register metrics", zap.Error(err))
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+healthzPath, p.healthz)
	mux.HandleFunc("GET "+readyzPath, p.readyz)
	var metrics http.Handler = promhttp.HandlerFor(p.Metrics, promhttp.HandlerOpts{
		ErrorLog:      zap.NewStdLog(p.Log),
		ErrorHandling: promhttp.ContinueOnError,
	})
	if protect != nil {
		metrics = protect(metrics)
	}
	mux.Handle("GET "+metricsPath, metrics)
	mux.Handle("/", next)
	return mux
}

// healthz answers 200 while the process serves HTTP.
func (p Probes) healthz(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, "ok")
}

// readyz answers 200 while the server takes calls (see
// supervisor.Health.Ready: busy workers are no reason to send calls
// elsewhere, a queue past its bound is), else 503 with the reason.
func (p Probes) readyz(w http.ResponseWriter, _ *http.Request) {
	if ready, text := readiness(p.Health(), isClosed(p.Calls.Closed())); ready {
		writeProbe(w, http.StatusOK, text)
	} else {
		writeProbe(w, http.StatusServiceUnavailable, text)
	}
}

// readiness returns whether the server is ready for calls and a one-line
// text that says so or why not.
func readiness(h supervisor.Health, shuttingDown bool) (bool, string) {
	pool := fmt.Sprintf("%d warm, %d busy, %d starting workers, %d calls waiting", h.Warm, h.Busy, h.Starting, h.Waiting)
	switch {
	case shuttingDown:
		return false, "not ready: shutting down"
	case h.Ready:
		return true, "ready: " + pool
	case h.Err != "":
		return false, "not ready: workers cannot start: " + oneLine(h.Err)
	case h.Warm+h.Busy == 0:
		return false, "not ready: no worker has started yet (" + pool + ")"
	}
	return false, fmt.Sprintf("not ready: a call would wait about %s (%s)", h.Wait.Round(100*time.Millisecond), pool)
}

// oneLine joins the lines of s, and collapses its runs of white space, so
// that it fits on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// writeProbe writes a one-line plain-text answer that no cache keeps.
func writeProbe(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, text)
}
