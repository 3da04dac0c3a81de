package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/sessions"
)

// sweepEvery is how often the files of calls past --files-ttl are removed;
// reads remove those they come across at once.
const sweepEvery = time.Minute

// state is what outlives a call: the Python sessions (--sessions) and the
// files calls return (--files). Either is nil when off.
type state struct {
	sessions *sessions.Registry
	files    *filestore.Store
	stop     context.CancelFunc
}

// openState opens the file store under the cache directory and the session
// registry, and registers their metrics in metrics unless it is nil.
func openState(cfg config.Config, eng engine, metrics prometheus.Registerer, log *zap.Logger) (*state, error) {
	st := &state{stop: func() {}}
	if cfg.Supervisor.Files {
		files, err := filestore.OpenFree(filepath.Join(cfg.Supervisor.CacheDir, "files"), filestore.Config{
			MaxBytes:             cfg.FilesStoreLimit,
			MaxFiles:             cfg.MaxFiles,
			MaxBytesPerPrincipal: perCaller(cfg.Mode, cfg.FilesStoreLimitPerPrincipal),
			MaxFilesPerPrincipal: perCaller(cfg.Mode, cfg.MaxFilesPerPrincipal),
			TTL:                  cfg.FilesTTL,
		}, log)
		if err != nil {
			return nil, err
		}
		st.files = files
		ctx, stop := context.WithCancel(context.Background())
		st.stop = stop
		go func() {
			tick := time.NewTicker(sweepEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					files.Sweep()
				}
			}
		}()
		register(metrics, log, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_run_python_stored_file_bytes",
			Help: "Bytes of the files calls returned that the server keeps for resources/read.",
		}, func() float64 { return float64(files.Bytes()) }))
	}
	if cfg.Sessions {
		st.sessions = sessions.New(sessions.Config{
			Idle:            cfg.SessionIdle,
			Max:             cfg.MaxSessions,
			MaxPerPrincipal: perCaller(cfg.Mode, cfg.MaxSessionsPerPrincipal),
			OnEnd: func(id string) {
				if st.files != nil {
					st.files.Drop(filestore.SessionScope(id))
				}
			},
		}, func(ctx context.Context) (sessions.Interpreter, error) {
			ss, err := eng.NewSession(ctx)
			if err != nil {
				return nil, err
			}
			return ss, nil
		}, log)
		register(metrics, log, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_run_python_sessions",
			Help: "Live Python sessions (create_session); each has a worker of its own.",
		}, func() float64 { return float64(st.sessions.Len()) }))
	}
	return st, nil
}

// perCaller is the cap n of one principal, or of one MCP session where
// there is no authentication; none over stdio, whose one client's share is
// the whole.
func perCaller[T int | int64](mode config.Mode, n T) T {
	if mode == config.ModeStdio {
		return 0
	}
	return n
}

// close ends the sessions and removes the files.
func (st *state) close(log *zap.Logger) {
	st.stop()
	if st.sessions != nil {
		st.sessions.Shutdown()
	}
	if st.files != nil {
		if err := st.files.Close(); err != nil {
			log.Warn("remove the files calls returned", zap.Error(err))
		}
	}
}

// register adds c to the metrics, if any; a failure is only logged.
func register(metrics prometheus.Registerer, log *zap.Logger, c prometheus.Collector) {
	if metrics == nil {
		return
	}
	if err := metrics.Register(c); err != nil {
		log.Warn("metric not registered", zap.Error(err))
	}
}
