package supervisor

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// metrics are the supervisor's Prometheus metrics. They exist whether or not
// a registry was given, so recording them needs no checks.
type metrics struct {
	calls    *prometheus.CounterVec // by status
	duration prometheus.Histogram
	restarts prometheus.Counter
	poolWait prometheus.Histogram
}

func newMetrics(s *Supervisor, reg prometheus.Registerer, log *zap.Logger) metrics {
	m := metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_run_python_calls_total",
			Help: "Calls by status: success, run-error, install-error, or error when the call could not run.",
		}, []string{"status"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcp_run_python_call_duration_seconds",
			Help:    "Time from a call's arrival to its result, waiting for a worker included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12), // 5 ms to 2 min
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_run_python_worker_restarts_total",
			Help: "Workers replaced for a reason other than retirement: failed starts, deaths while idle or during a call.",
		}),
		poolWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcp_run_python_pool_wait_seconds",
			Help:    "Time a call waited for a warm worker.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12), // 1 ms to 3 min
		}),
	}
	if reg == nil {
		return m
	}
	workers := func(state string, count func(Health) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcp_run_python_workers",
			Help:        "Workers by state.",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 { return float64(count(s.Health())) })
	}
	for _, c := range []prometheus.Collector{
		m.calls, m.duration, m.restarts, m.poolWait,
		workers("warm", func(h Health) int { return h.Warm }),
		workers("busy", func(h Health) int { return h.Busy }),
		workers("starting", func(h Health) int { return h.Starting }),
		workers("session", func(h Health) int { return h.Sessions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_run_python_calls_waiting",
			Help: "Calls waiting for a worker.",
		}, func() float64 { return float64(s.Health().Waiting) }),
	} {
		if err := reg.Register(c); err != nil {
			log.Warn("metric not registered", zap.Error(err))
		}
	}
	return m
}
