package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/pool"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	"github.com/mcp-run-python/mcp-run-python/supervisor/proc"
)

// Config is what the supervisor needs to know; the front end fills it from flags.
type Config struct {
	Deno        string        // path of the deno executable
	CacheDir    string        // runtime files, the Pyodide install and snapshots live here
	Workers     int           // live worker limit; also the number of calls run at once
	Timeout     time.Duration // wall-time limit of one call; 0 means none
	OutputLimit int           // bytes of output kept per call; 0 means no limit
	MemoryLimit int64         // resident bytes a worker may use; 0 means no limit
	Deps        []string      // requirements installed into every interpreter
	Networking  bool          // user code may use the network
	AllowNet    []string      // with Networking, the only hosts user code may reach (permissions.ParseHost); nil: all
	// PrivateNetworks lets user code with Networking and no AllowNet reach
	// the private networks (10/8, 172.16/12, 192.168/16, 100.64/10) too;
	// this host's own addresses stay out of reach.
	PrivateNetworks bool

	// IndexURL is the package index (a PyPI-style simple API, as an http(s)
	// URL or a local directory); "" means packages.DefaultIndexURL.
	IndexURL string
	// PyodideIndexURL is where the files of Pyodide's built-in packages are
	// (URL or directory); "" means the host of the pinned Pyodide release.
	PyodideIndexURL string
	// Offline installs packages from the package cache only.
	Offline bool

	// Warm is how many idle workers are kept ready; 0 means Workers.
	Warm int
	// Queue is how many calls may wait for a worker when all are busy; a
	// call beyond it fails at once with ErrQueueFull. 0 means
	// DefaultQueuePerWorker × Workers. It is a backstop: QueueTimeout is
	// what bounds the queue.
	Queue int
	// QueueTimeout is how long a call may wait for a worker before it fails
	// with ErrQueueTimeout; 0 means no limit. A call whose wait, estimated
	// from the recent ones, would be longer fails at once, saying so.
	QueueTimeout time.Duration
	// MaxCallsPerPrincipal is how many of the pool's workers the calls of
	// one Request.Principal may hold at once; the rest of its calls wait
	// their turn. 0 means no limit. (The command line's default is half
	// the workers, rounded up, so that one caller leaves room for the
	// others.)
	MaxCallsPerPrincipal int
	// CodeLimit is the largest code accepted, in bytes; 0 means no limit.
	CodeLimit int
	// Grace is how long code may take to stop after it is interrupted (time
	// limit, cancellation) before its worker is killed; 0 means DefaultGrace.
	Grace time.Duration
	// StartTimeout bounds a worker's start: process, bridge connection and
	// Pyodide load; 0 means DefaultStartTimeout. A plain load takes about
	// 3 s on two cores.
	StartTimeout time.Duration
	// SessionIdleCPU is the share of one core a session's worker may use,
	// on average, while no call runs, with up to sessionCPUWindow's worth
	// at once; past it the session ends. 0 means no bound. (MemoryLimit
	// holds between calls too.)
	SessionIdleCPU float64
	// Metrics, if not nil, receives the supervisor's Prometheus metrics.
	Metrics prometheus.Registerer

	// Files returns the files a call leaves under WorkDir with its result.
	Files bool
	// FilesLimit bounds the bytes of the files a call sends back, returned
	// or written back to a mount, and of its figures; 0 means
	// DefaultFilesLimit.
	FilesLimit int64
	// Mounts are host folders whose files every interpreter starts with.
	Mounts []mount.Mount
	// MountLimits bound what a mount copies in; zero fields get defaults.
	MountLimits mount.Limits

	// Tools, if not nil, are the tools of other MCP servers that code may
	// call (code mode); ToolCalls bounds how many one run may make: 0
	// means no limit.
	Tools     Tools
	ToolCalls int

	// AskLimits bound what running code asks of the model or the person
	// through Request.Ask (llm_query, llm_query_batched, ask_user).
	AskLimits AskLimits

	// CacheLimit bounds the total size of the cache directory's entries
	// (worker programs, Pyodide installs, memory snapshots, package files
	// and index pages: see package cachedir). Past it the supervisor
	// removes the least recently used, never one that this or another
	// server uses (see runtimefiles.Cache). 0 means no limit.
	CacheLimit int64

	// Fatal, if not nil, hears why the runtime's first preparation failed
	// for good, an error wrapping ErrDeps: no call could run, so a server
	// should end with it rather than fail every call.
	Fatal func(error)
}

// Defaults of the fields of Config that are left zero.
const (
	DefaultQueuePerWorker = 64 // Queue is this many times Workers
	DefaultGrace          = 2 * time.Second
	DefaultStartTimeout   = 60 * time.Second
	DefaultFilesLimit     = 32 << 20
	DefaultMountBytes     = 64 << 20
	DefaultMountFiles     = 10_000
)

// WithDefaults returns c with the defaults of the fields whose 0 means a
// default filled in: what New runs with. Front ends show it; New is its one
// user that matters. A field whose 0 means no limit keeps it.
func (c Config) WithDefaults() Config {
	c.Workers = max(c.Workers, 1)
	if c.Warm <= 0 || c.Warm > c.Workers {
		c.Warm = c.Workers
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueuePerWorker * c.Workers
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.FilesLimit <= 0 {
		c.FilesLimit = DefaultFilesLimit
	}
	if c.MountLimits.MaxBytes <= 0 {
		c.MountLimits.MaxBytes = DefaultMountBytes
	}
	if c.MountLimits.MaxFiles <= 0 {
		c.MountLimits.MaxFiles = DefaultMountFiles
	}
	return c
}

// CancelWait is how long a cancelled call may take to end: the grace its
// code gets to stop, and a moment to report.
func (c Config) CancelWait() time.Duration { return c.WithDefaults().Grace + time.Second }

// Errors of calls that could not get a worker. Only the first two mean
// that the server is busy.
var (
	ErrQueueFull    = pool.ErrQueueFull
	ErrQueueTimeout = pool.ErrQueueTimeout
	// ErrUnavailable is what calls get, at once, while workers cannot start
	// (deno is gone, the runtime cannot be rebuilt): no worker is warm or
	// starting and the last start failed. It wraps why.
	ErrUnavailable = pool.ErrUnavailable
	// ErrDeps marks the runtime's preparation failing because Deps cannot
	// be installed (see Config.Fatal); the error wraps the reason too.
	ErrDeps = errors.New("--deps cannot be installed")
	// ErrCodeTooLarge is what code longer than Config.CodeLimit gets.
	ErrCodeTooLarge = errors.New("the code is too large")
)

// Health is a snapshot of the pool's state.
type Health struct {
	Warm     int // idle workers ready for a call, restored or on standby
	Busy     int // workers running a call
	Starting int // workers booting, or being restored from standby
	Waiting  int // calls waiting for a worker
	Sessions int // workers of live sessions, outside the pool
	// Wait is how long a new call would wait for a worker, estimated from
	// the recent waits; 0 when one is warm.
	Wait time.Duration
	// Ready reports that the pool serves calls: a worker has started,
	// workers can start, and a new call would wait no longer than
	// Config.QueueTimeout.
	Ready bool
	// Err says why workers cannot be started, while none can.
	Err string
}

// Supervisor runs Python code in a pool of sandboxed workers. Each call
// gets a fresh interpreter, so no state survives from call to call: a new
// runner in a worker process that served calls before it, where the
// process can be checked for leftovers (worker/recycle.go), else a new process;
// the pool keeps interpreters warm so calls do not wait for Pyodide to boot.
//
// The Supervisor keeps the lifecycle (New, Start, Warmup, Close, and the
// tracker of what runs); a call goes through the steps of pipeline.go, in
// a pooled worker or a Session's; the runtime is its Keeper's (package runtimefiles).
type Supervisor struct {
	cfg     Config
	log     *zap.Logger
	python  atomic.Value // string: major.minor
	metrics metrics

	ctx    context.Context // ends when the supervisor closes
	cancel context.CancelFunc
	// wg counts the calls in the supervisor and every goroutine it
	// starts, and admits no call once Close has begun: Close waits for it.
	wg tracker.Tracker

	runtime *runtimefiles.Keeper[*install.Installer] // prepares, repairs and hands out the runtime
	maker   *runtimefiles.Maker                      // makes the runtime's files and snapshots
	workers *worker.Starter                          // starts workers: the bridge, the run directory, the sandbox
	pool    *workerPool
	learn   *install.Learner
	memOnce sync.Once // the first worker's memory has been read

	sessions sessionSet

	cache *runtimefiles.Cache // the cache entries held, and their pruning

	files *callFiles // the mounts, and what calls send back
}

// errClosed is what calls get once Close has begun: the pool's, which
// calls waiting for a worker get.
var errClosed = pool.ErrClosed

// New returns a supervisor for cfg. It starts nothing: see Start and Warmup.
func New(cfg Config, log *zap.Logger) *Supervisor {
	cfg = cfg.WithDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:    cfg,
		log:    log,
		ctx:    ctx,
		cancel: cancel,

		sessions: sessionSet{live: map[*Session]struct{}{}},
	}
	s.files = &callFiles{cfg: cfg, log: log}
	for _, m := range cfg.Mounts {
		s.files.mounts = append(s.files.mounts, mount.Pin(m))
	}
	s.runtime = runtimefiles.NewKeeper(ctx, &s.wg, log, runtimefiles.Builds[*install.Installer]{
		Build: s.buildRuntime,
		// What needs the runtime published: the hold on its cache entries,
		// the pool, and the watch of this host's addresses.
		Started: func(rt *readyRuntime) {
			s.cache.HoldRuntime(rt.Files)
			s.pool.Begin()
			if s.workers.Addrs != nil {
				s.wg.Go(func() { s.workers.Addrs.Watch(s.ctx, worker.AddrPoll) })
			}
		},
		// A repair makes the runtime's files again.
		Rebuild: func(ctx context.Context, pkgs *install.Installer, progress func(string)) (*runtimefiles.Files, error) {
			files, err := s.maker.Prepare(ctx, progress)
			if err != nil {
				return nil, err
			}
			return s.withDeps(ctx, files, pkgs, progress)
		},
		Remake: func(rt *runtimefiles.Files) { s.maker.RemakeSnapshot(ctx, rt) },
	})
	s.cache = runtimefiles.NewCache(ctx, &s.wg, log, cfg.CacheDir, cfg.CacheLimit, s.runtime.Files)
	s.metrics = newMetrics(s, cfg.Metrics, log)
	s.workers = &worker.Starter{Config: worker.Config{Deno: cfg.Deno, StartTimeout: cfg.StartTimeout, OutputLimit: cfg.OutputLimit,
		ErrorLimit: cfg.errorLimit(), CodeLimit: cfg.CodeLimit, FilesLimit: cfg.FilesLimit, Watch: cfg.watched(),
		Networking: cfg.Networking, AllowNet: cfg.AllowNet, PrivateNetworks: cfg.PrivateNetworks},
		Ctx: ctx, WG: &s.wg, Log: log, Launch: worker.PlatformLauncher(cfg.MemoryLimit),
		Recycles: func() bool { return s.pool.Recycles() },
		Remake:   s.runtime.RemakeSnapshot,
		Current: func(rt *runtimefiles.Files, kind string) bool {
			return rt == s.runtime.Files() || rt == s.learn.Runtime(kind)
		},
	}
	s.maker = &runtimefiles.Maker{Deno: cfg.Deno, CacheDir: cfg.CacheDir, Log: log, Snapshot: s.workers.Snapshot,
		Check: func(rt *runtimefiles.Files) error {
			policy, _ := s.workers.Policy(rt, false)
			return policy.Validate(runtime.GOOS)
		}}
	s.learn = install.NewLearner(install.Background{Ctx: ctx, WG: &s.wg, Log: log, Cache: s.cache, Maker: s.maker,
		StartTimeout: cfg.StartTimeout, MemoryLimit: cfg.MemoryLimit})
	hooks := pool.Hooks[*worker.Worker]{
		Start: func(ctx context.Context, kind string) (*worker.Worker, error) {
			return s.startWorker(ctx, worker.RoleCall, kind)
		},
		Restore: s.workers.Restore,
		Hot:     s.learn.Hot,
	}
	if proc.HasThreads {
		// A worker process serves several calls, a runner each (worker/recycle.go).
		hooks.Recycle = s.workers.Recycle
	}
	if cfg.Networking && len(cfg.AllowNet) == 0 {
		s.workers.Addrs = worker.NewAddrWatch(net.InterfaceAddrs, log, func() { s.pool.RetireStale() })
		hooks.Stale = s.workers.Stale
	}
	s.pool = pool.New(ctx, pool.Config{Workers: cfg.Workers, Warm: cfg.Warm, Queue: cfg.Queue, QueueTimeout: cfg.QueueTimeout,
		PerPrincipal: max(cfg.MaxCallsPerPrincipal, 0)}, hooks, &s.wg, log, s.metrics.restarts, s.metrics.poolWait)
	return s
}

// startWorker boots a worker for r (the pool's or a session's), first
// rebuilding the runtime if any of its files has gone missing under the
// server, and again when they go missing as the worker starts (see
// startAttempts). A kind names a learned set of packages (see install.Learner) to
// start the worker from; one that is gone or broken gives a plain worker.
func (s *Supervisor) startWorker(ctx context.Context, r worker.Role, kind string) (*worker.Worker, error) {
	w, err := s.startOnce(ctx, r, kind)
	for try := 1; errors.Is(err, runtimefiles.ErrGone) && try < startAttempts && ctx.Err() == nil; try++ {
		s.log.Warn("a worker could not start for a file of the Python runtime gone; rebuilding it and starting again", zap.Error(err))
		w, err = s.startOnce(ctx, r, kind)
	}
	if err != nil {
		return nil, err
	}
	if s.cfg.MemoryLimit > 0 {
		// Said once, at start: a limit this platform cannot watch must not
		// be skipped in silence.
		s.memOnce.Do(func() {
			if _, err := w.Proc.Memory(ctx); err != nil {
				s.log.Warn("the memory limit cannot be enforced here: a worker's memory cannot be read", zap.Error(err))
			}
		})
	}
	return w, nil
}

// startAttempts bounds how often startWorker starts a worker whose start
// failed for a file of the runtime gone as it began: the cache directory
// removed under the server (rm -rf takes a while, and can undo a rebuild
// that races it), or a code cache template found damaged and dropped.
const startAttempts = 3

// startOnce is one attempt of startWorker.
func (s *Supervisor) startOnce(ctx context.Context, r worker.Role, kind string) (*worker.Worker, error) {
	ready := s.runtime.Current()
	if what := ready.Files.Missing(); what != "" {
		var err error
		if ready, err = s.runtime.Repair(ctx, ready, what); err != nil {
			return nil, err
		}
	}
	rt := ready.Files
	if kind != "" {
		learned := s.learn.Runtime(kind)
		if learned != nil && learned.Missing() != "" {
			s.learn.Forget(kind) // its next uses make it again
			learned = nil
		}
		if learned != nil {
			rt = learned
		} else {
			kind = ""
		}
	}
	// A plain worker of the pool starts on standby (see worker/standby.go).
	w, err := s.workers.Start(ctx, rt, r, "", r == worker.RoleCall && kind == "")
	if err == nil {
		w.Kind = kind
		if rt.Deps != nil {
			w.Installed = rt.Deps.Files
		}
		return w, nil
	}
	if errors.Is(err, runtimefiles.ErrBadTemplate) {
		// Made again: by repair for the runtime's, by the set's next uses
		// for a learned set's. Meanwhile the set's calls get plain workers.
		s.log.Warn("a code cache template is damaged; it is dropped and made again", zap.String("path", rt.CodeCache), zap.Error(err))
		if err := os.RemoveAll(rt.CodeCache); err != nil {
			s.log.Error("cannot remove a damaged code cache template", zap.Error(err))
		}
		if kind != "" {
			s.learn.Forget(kind)
		}
	}
	if what := rt.Missing(); what != "" {
		return nil, fmt.Errorf("%w (%s): %w", runtimefiles.ErrGone, what, err)
	}
	return nil, err
}

// pythonVersion reads the Python version ("3.14") from an installed
// Pyodide's lock file.
func pythonVersion(pyodideDir string) (string, error) {
	lock, err := packages.ReadLock(filepath.Join(pyodideDir, "pyodide-lock.json"))
	if err != nil {
		return "", err
	}
	if v := lock.PythonVersion(); v != "" {
		return v, nil
	}
	return "", errors.New("pyodide-lock.json names no Python version")
}

// knownPythonVersion answers without starting anything: from the lock file
// of an installed Pyodide, else from the pinned Pyodide version, whose
// number starts with Python's (314.0.7 is built for Python 3.14).
func knownPythonVersion(cacheDir string) string {
	pin, err := js.PyodideVersion()
	if err != nil {
		return "3"
	}
	pkg := filepath.Join(runtimefiles.Layout{Root: cacheDir}.Install(pin), "node_modules", "pyodide")
	if v, err := pythonVersion(pkg); err == nil {
		return v
	}
	major, _, _ := strings.Cut(pin, ".")
	if len(major) >= 2 {
		return major[:1] + "." + major[1:]
	}
	return "3"
}

// CurrentCacheEntries returns the paths, in the cache directory cacheDir,
// of the entries that this build's runtime needs and that are known without
// running deno: its worker program and its Pyodide install. Prunes keep
// them (cachedir.PruneOptions.Keep), whether or not a server runs.
func CurrentCacheEntries(cacheDir string) []string { return runtimefiles.CurrentEntries(cacheDir) }

// Fetch resolves reqs and --deps as a call would, against Pyodide's package
// host and the index of the configuration, and downloads every file of the
// plan, hash-checked, into the package cache, where a later server with the
// same cache directory finds them: with --offline, or with the host and the
// index behind a firewall (a built-in package's file found in the cache is
// never downloaded again). It installs Pyodide if needed, for its lock file,
// but starts no worker and makes no snapshot. With mirror not "", the files
// of Pyodide's built-in packages and its lock file are also copied into that
// directory, which then serves as --pyodide-index-url (see
// [packages.WriteMirror]). Progress lines go to progress.
func (s *Supervisor) Fetch(ctx context.Context, reqs []string, mirror string, progress func(string)) ([]packages.LocalFile, error) {
	pyodide, err := s.maker.Pyodide(ctx, progress)
	if err != nil {
		return nil, err
	}
	return install.Fetch(ctx, s.cfg.install(), pyodide, reqs, mirror, progress, s.log)
}

// Start prepares the runtime and warms the pool in the background and returns
// at once, so that a server can answer initialize before Pyodide is loaded.
// The preparation is the supervisor's, not ctx's: Close stops it, so that a
// server that fails to start (its address is taken) ends at once, without a
// second, misleading error about the runtime. A failure is logged; calls
// retry the preparation.
func (s *Supervisor) Start(ctx context.Context) {
	if !s.wg.Enter() {
		return
	}
	defer s.wg.Leave()
	s.runtime.Start()
}

// Warmup prepares everything a first call needs (runtime files, Pyodide, the
// memory snapshot), reporting each step to progress, and starts the pool.
// Returning early when ctx ends, it leaves the preparation running: Close
// stops it.
func (s *Supervisor) Warmup(ctx context.Context, progress func(step string)) error {
	if !s.wg.Enter() {
		return errClosed
	}
	defer s.wg.Leave()
	_, err := s.runtime.Ensure(ctx, progress)
	return err
}

// Run runs a call in a fresh interpreter. Failures of the code itself, its
// time limit and crashes of its worker are reported in the Result; the
// error is for calls that could not be run at all.
func (s *Supervisor) Run(ctx context.Context, req Request) (Result, error) {
	if !s.wg.Enter() {
		return Result{}, errClosed
	}
	defer s.wg.Leave()
	return s.serve(ctx, req, pooled{s})
}

// Health reports the pool's state, for readiness checks.
func (s *Supervisor) Health() Health {
	h := s.pool.Health()
	return Health{Warm: h.Warm, Busy: h.Busy, Starting: h.Starting, Waiting: h.Waiting, Sessions: s.sessions.count(),
		Wait: h.Wait, Ready: h.Ready, Err: h.Err}
}

// PythonVersion returns the major.minor version of the Python that runs calls.
//
// Before the runtime is prepared it is read from the cache, on first use
// rather than in New: parsing Pyodide's lock file would delay a server's
// first answer by milliseconds.
func (s *Supervisor) PythonVersion() string {
	if v, ok := s.python.Load().(string); ok {
		return v
	}
	v := knownPythonVersion(s.cfg.CacheDir)
	s.python.CompareAndSwap(nil, v)
	return s.python.Load().(string)
}

// Close stops all workers, cancelling the calls they run and the
// preparation of the runtime, and refuses new calls with an error. It
// waits, within ctx, for the calls to return and for every goroutine of the
// supervisor to end, and then closes the bridge, removes the run directory
// and lets go of the cache entries it holds: once it returns nil, nothing
// of the supervisor is left.
func (s *Supervisor) Close(ctx context.Context) error {
	s.cancel()
	// Before shut: their kills run on goroutines of the tracker, which
	// starts none once shut with nothing running.
	s.pool.Close()
	s.sessions.closeAll()
	select {
	case <-s.wg.Shut():
	case <-ctx.Done():
		return ctx.Err()
	}
	s.cache.Release()
	return s.workers.Close()
}
