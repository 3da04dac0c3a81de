package supervisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/js"
)

// Config is what the supervisor needs to know; the front end fills it from flags.
type Config struct {
	Deno        string        // path of the deno executable
	CacheDir    string        // runtime files, the Pyodide install and snapshots live here
	Workers     int           // live worker limit; also the number of calls run at once
	Timeout     time.Duration // wall-time limit of one call; 0 means none
	OutputLimit int           // bytes of output kept per call; 0 means no limit
	MemoryLimit int64         // resident bytes a worker may use; 0 means no limit
	Deps        []string      // installed into every interpreter
	Networking  bool          // user code may use the network
}

// Supervisor runs Python code in a pool of sandboxed workers. Each worker
// serves one call and is retired, so no state survives from call to call;
// the pool keeps replacements warm so calls do not wait for Pyodide to boot.
type Supervisor struct {
	cfg    Config
	log    *zap.Logger
	python atomic.Value // string: major.minor

	ctx    context.Context // ends when the supervisor closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // slots and retiring workers

	prep   chan struct{} // held while the runtime is being prepared
	rt     *runtime      // set once prepared; guarded by prep
	bridge *bridge.Server
	ready  chan *worker // a slot offers its warm worker here until a call takes it
}

// New returns a supervisor for cfg. It starts nothing: see Start and Warmup.
func New(cfg Config, log *zap.Logger) *Supervisor {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:    cfg,
		log:    log,
		ctx:    ctx,
		cancel: cancel,
		prep:   make(chan struct{}, 1),
		ready:  make(chan *worker),
	}
	s.python.Store(knownPythonVersion(cfg.CacheDir))
	return s
}

// knownPythonVersion answers without starting anything: from the lock file
// of an installed Pyodide, else from the pinned Pyodide version, whose
// number starts with Python's (314.0.7 is built for Python 3.14).
func knownPythonVersion(cacheDir string) string {
	pin, err := js.PyodideVersion()
	if err != nil {
		return "3"
	}
	pkg := filepath.Join(layout{cacheDir}.install(pin), "node_modules", "pyodide")
	if v, err := pythonVersion(pkg); err == nil && v != "" {
		return v
	}
	major, _, _ := strings.Cut(pin, ".")
	if len(major) >= 2 {
		return major[:1] + "." + major[1:]
	}
	return "3"
}

// Start prepares the runtime and warms the pool in the background and returns
// at once, so that a server can answer initialize before Pyodide is loaded.
// A failure is logged; calls retry the preparation.
func (s *Supervisor) Start(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if _, err := s.ensure(ctx, func(step string) { s.log.Info(step) }); err != nil {
			s.log.Error("cannot prepare the Python runtime", zap.Error(err))
		}
	}()
}

// Warmup prepares everything a first call needs (runtime files, Pyodide, the
// memory snapshot), reporting each step to progress, and starts the pool.
func (s *Supervisor) Warmup(ctx context.Context, progress func(step string)) error {
	_, err := s.ensure(ctx, progress)
	return err
}

// ensure prepares the runtime once and starts the pool's slots.
func (s *Supervisor) ensure(ctx context.Context, progress func(string)) (*runtime, error) {
	select {
	case s.prep <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the runtime: %w", ctx.Err())
	case <-s.ctx.Done():
		return nil, errors.New("supervisor closed")
	}
	defer func() { <-s.prep }()
	if s.rt != nil {
		return s.rt, nil
	}
	if s.bridge == nil {
		// Big enough for the memory snapshot (about 30 MB) and a call's
		// output, which the output limit bounds.
		limit := int64(64<<20) + int64(s.cfg.OutputLimit)
		b, err := bridge.Listen(s.log, limit)
		if err != nil {
			return nil, err
		}
		s.bridge = b
	}
	rt, err := s.prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	if v, err := pythonVersion(rt.pyodide); err == nil && v != "" {
		s.python.Store(v)
	}
	s.rt = rt
	for range s.cfg.Workers {
		s.wg.Add(1)
		go s.slot(rt)
	}
	return rt, nil
}

// slot keeps one worker alive: it starts one, offers it until a call takes
// it or it dies, waits for the call to retire it, and starts the next.
// Failed starts are retried with exponential backoff.
func (s *Supervisor) slot(rt *runtime) {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for s.ctx.Err() == nil {
		w, err := s.spawn(s.ctx, rt, false)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Error("worker failed to start", zap.Error(err), zap.Duration("retry_in", backoff))
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		select {
		case s.ready <- w:
			<-w.exited // the call retires it
		case <-w.exited:
			s.log.Warn("idle worker died", zap.String("status", w.exitStatus()), zap.String("stderr", w.stderrTail()))
		case <-s.ctx.Done():
			w.kill()
			return
		}
	}
}

// Run runs code in a fresh interpreter. onLine, if not nil, is called for each
// line the code prints, in order, before Run returns. Failures of the code
// itself, its time limit and crashes of its worker are reported in the Result;
// the error is for calls that could not be run at all.
func (s *Supervisor) Run(ctx context.Context, code string, onLine func(bridge.Line)) (bridge.Result, error) {
	if len(s.cfg.Deps) > 0 {
		// Packages are resolved on the trusted side, which is not built yet:
		// say so on every call rather than run without what was asked for.
		return bridge.Result{
			Status: bridge.StatusInstallError,
			Error:  "cannot install " + strings.Join(s.cfg.Deps, ", ") + ": installing packages (--deps) is not supported by this version yet",
		}, nil
	}
	if _, err := s.ensure(ctx, func(step string) { s.log.Info(step) }); err != nil {
		return bridge.Result{}, err
	}
	var w *worker
	select {
	case w = <-s.ready:
	case <-ctx.Done():
		return bridge.Result{}, fmt.Errorf("waiting for a free worker: %w", ctx.Err())
	case <-s.ctx.Done():
		return bridge.Result{}, errors.New("supervisor closed")
	}
	s.wg.Add(1)
	defer func() {
		go func() { // retire: one call per interpreter
			defer s.wg.Done()
			w.kill()
		}()
	}()
	return s.call(ctx, w, code, onLine)
}

// PythonVersion returns the major.minor version of the Python that runs calls.
func (s *Supervisor) PythonVersion() string { return s.python.Load().(string) }

// Close stops all workers, cancelling the calls they run, and waits for them
// to be gone.
func (s *Supervisor) Close(ctx context.Context) error {
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.bridge != nil {
		return s.bridge.Close()
	}
	return nil
}
