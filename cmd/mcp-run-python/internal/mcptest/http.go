package mcptest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Get requests url and returns the status, the content type and the body.
func Get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(Context(t), http.MethodGet, url, nil)
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

// RegisterCallsMetric registers in reg a metric that stands for the
// supervisor's, with a value that CheckMetrics looks for.
func RegisterCallsMetric(reg prometheus.Registerer) {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_run_python_calls_total",
		Help: "Calls by status.",
	}, []string{"status"})
	reg.MustRegister(calls)
	calls.WithLabelValues("success").Add(3)
}

// CheckMetrics checks the answer of url, a /metrics endpoint: the
// Prometheus text format, the metric of RegisterCallsMetric, the Go and
// process collectors.
func CheckMetrics(t *testing.T, url string) {
	t.Helper()
	status, contentType, body := Get(t, url)
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

// WantRefusal checks the answer to a refused request: its status, and a
// JSON-RPC error with code wantCode whose message names mention (the flag
// that set the limit, or why).
func WantRefusal(t *testing.T, what string, status int, body []byte, wantStatus, wantCode int, mention string) {
	t.Helper()
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != wantStatus || json.Unmarshal(body, &msg) != nil || msg.Error.Code != wantCode || !strings.Contains(msg.Error.Message, mention) {
		t.Errorf("%s: %d %q, want %d and a JSON-RPC error %d naming %s", what, status, body, wantStatus, wantCode, mention)
	}
}
