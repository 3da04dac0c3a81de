package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/permissions"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/proc"
)

// stderrLines is how many of a worker's last stderr lines are kept to
// explain its failures; the rest is only logged.
const stderrLines = 20

// Process is a started worker Process: the seam between the pool and the
// platform. proc.Process is the real one.
type Process interface {
	Pid() int
	// Wait waits for the exit; it is called once.
	Wait() error
	// Kill ends the process at once.
	Kill() error
	// usage reads its memory and CPU time.
	Usage
}

// Launcher starts a worker's command. The supervisor's is the platform's;
// tests wrap it.
type Launcher func(cmd *exec.Cmd) (Process, error)

// PlatformLauncher starts workers with the platform's guards and memory cap.
func PlatformLauncher(memoryLimit int64) Launcher {
	return func(cmd *exec.Cmd) (Process, error) {
		return proc.Start(cmd, proc.Options{MemoryLimit: memoryLimit})
	}
}

// Worker is one deno process and its bridge connection.
type Worker struct {
	Proc     Process      // its process
	stdin    io.Closer    // the worker's lifeline: it exits when stdin ends
	Conn     *bridge.Conn // its bridge connection
	python   string       // Python version the worker reported, such as "3.14.2"
	restored bool         // Pyodide came from the memory snapshot
	// Kind names the learned set of packages the worker's snapshot holds
	// loaded, with their files installed (see install.Learner); "" for none.
	Kind      string
	Installed map[string]bool // the files of the packages it was started with
	// standby is set for a worker started lazily: its interpreter is made
	// when a call, or the pool ahead of one, asks (see standby.go).
	standby *standby
	// netGen is the generation of this host's addresses its --deny-net
	// was made with (see AddrWatch); 0 for a worker without such a list.
	netGen uint64
	// rt is the runtime it was started from, and lazy whether each of its
	// runners starts on standby: a recycled worker's next runner starts as
	// its first did.
	rt   *runtimefiles.Files
	lazy bool
	// args is the command line it was started with, in rt.Dir(): a call
	// that changed either leaves a process that is not recycled.
	args []string
	// others is what a worker that is recycled must come back to between
	// its runners, made what it held resident as its last interpreter was
	// made and baseline as its first recycled runner's was, and calls how
	// many calls it served (see recycle.go).
	others         int
	made, baseline int64
	calls          int
	// Spent is set when its call was stopped from outside (time limit,
	// memory limit, cancellation, shutdown) or failed: it is not recycled.
	Spent bool

	exited   chan struct{} // closed when the process has been reaped
	exitErr  error         // set before exited is closed
	released chan struct{} // closed after exited, once cleanup has run

	mu     sync.Mutex
	stderr []string // last lines, for error messages
}

// New watches a started process on a goroutine of g: it collects its
// stderr, reaps it and then runs cleanup.
func New(g *tracker.Tracker, p Process, stdin io.Closer, stderr io.Reader, log *zap.Logger, cleanup func()) *Worker {
	w := &Worker{Proc: p, stdin: stdin, exited: make(chan struct{}), released: make(chan struct{})}
	watch := func() {
		w.collectStderr(stderr, log) // Wait closes the pipe: read it all first
		w.exitErr = p.Wait()
		// Dead before cleanup: removing a few MiB of DENO_DIR takes a while
		// on a loaded machine, and meanwhile the pool must not hand the
		// worker to a call.
		close(w.exited)
		cleanup()
		close(w.released)
	}
	if !g.Go(watch) {
		// Started by none of g's: a process is reaped, come what may.
		go watch()
	}
	return w
}

// Config is what starting workers and serving calls with them take of the
// supervisor's configuration.
type Config struct {
	Deno         string        // path of the deno executable
	StartTimeout time.Duration // bounds a worker's start
	OutputLimit  int           // bytes of output kept per call; 0 for none
	ErrorLimit   int           // bytes of a run's error text; 0 for none
	CodeLimit    int           // bytes of code; 0 for none
	FilesLimit   int64         // bytes of the files a call sends back
	Watch        []string      // the directories whose changes a run sends back
	// Networking, AllowNet and PrivateNetworks are the runners' network:
	// see supervisor.Config.
	Networking      bool
	AllowNet        []string
	PrivateNetworks bool
}

// Starter starts workers, and makes and recycles their interpreters: the
// one value that holds the bridge they connect to, the run directory of
// their DENO_DIRs, their sandbox (Policy) and the launcher of their
// processes.
type Starter struct {
	Config
	Ctx    context.Context  // the supervisor's: restores end when it closes
	WG     *tracker.Tracker // the supervisor's: every goroutine a worker needs
	Log    *zap.Logger
	Launch Launcher
	// Addrs follows this host's addresses for the default network's deny
	// list (netdeny.go); nil for other networks.
	Addrs *AddrWatch
	// Bridge and Run are set by Listen, in the runtime's first build,
	// before any worker starts; Close closes them.
	Bridge *bridge.Server
	Run    *runtimefiles.RunDir
	// Recycles reports whether worker processes serve several calls (see
	// recycle.go), whose growth is then read.
	Recycles func() bool
	// Remake is told of a snapshot a worker could not restore from.
	Remake func(rt *runtimefiles.Files)
	// Current reports whether rt is still what workers of kind start from:
	// a worker of a runtime replaced is not recycled.
	Current func(rt *runtimefiles.Files, kind string) bool
}

// Listen makes the run directory and the bridge, unless they are there.
func (s *Starter) Listen() error {
	if s.Run == nil {
		run, err := runtimefiles.OpenRunDir(s.Log)
		if err != nil {
			return err
		}
		s.Run = run
	}
	if s.Bridge == nil {
		b, err := bridge.Listen(s.Log, s.bridgeReadLimit(), s.Run.BridgeSocket())
		if err != nil {
			return err
		}
		s.Bridge = b
	}
	return nil
}

// Close closes the bridge and removes the run directory, once no worker
// is left.
func (s *Starter) Close() error {
	var err error
	if s.Bridge != nil {
		err = s.Bridge.Close()
	}
	if s.Run != nil {
		err = errors.Join(err, s.Run.Close())
	}
	return err
}

// bridgeReadLimit is the largest frame read from a worker until it serves
// (see ServingReadLimit): big enough for the memory snapshot (about 30 MB)
// and a call's output.
func (s *Starter) bridgeReadLimit() int64 { return 64<<20 + int64(s.OutputLimit) }

// Stale reports whether w's --deny-net predates a change of this host's
// addresses.
func (s *Starter) Stale(w *Worker) bool { return s.Addrs.Stale(w.netGen) }

// Snapshot starts a worker of rt that makes the memory snapshot, with
// DENO_DIR denoDir, and returns the snapshot (see runtimefiles.Maker).
func (s *Starter) Snapshot(ctx context.Context, rt *runtimefiles.Files, denoDir string) ([]byte, error) {
	w, err := s.Start(ctx, rt, RoleSnapshot, denoDir, false)
	if err != nil {
		return nil, err
	}
	var modules []string
	if rt.Deps != nil {
		if err := w.Conn.Install(ctx, rt.Deps.Wheels); err != nil {
			w.Kill()
			return nil, fmt.Errorf("install --deps for the snapshot: %w (%s)", err, w.StderrTail())
		}
		modules = rt.Deps.Modules
	}
	data, err := w.Conn.Snapshot(ctx, modules)
	w.Kill()
	if err != nil {
		return nil, fmt.Errorf("make snapshot: %w (%s)", err, w.StderrTail())
	}
	return data, nil
}

// workerConfig is what worker.ts reads from stdin, as one line of JSON.
type workerConfig struct {
	Secret      string                        `json:"secret"`
	Bridge      string                        `json:"bridge"`
	Socket      string                        `json:"socket,omitempty"` // the bridge's Unix socket, if it has one
	Init        workerInit                    `json:"init"`
	Permissions permissions.RunnerPermissions `json:"permissions"`
}

type workerInit struct {
	Type         string `json:"type"`
	Pyodide      string `json:"pyodide"`
	Snapshot     string `json:"snapshot,omitempty"`
	MakeSnapshot bool   `json:"makeSnapshot,omitempty"`
	OutputLimit  int    `json:"outputLimit,omitempty"`
	ErrorLimit   int    `json:"errorLimit,omitempty"`
	Session      bool   `json:"session,omitempty"`
	Lazy         bool   `json:"lazy,omitempty"`
	// Watch is what every run frame's watch will be (see watched): a fresh
	// interpreter scans it ahead of its run.
	Watch []string `json:"watch,omitempty"`
}

// Role is what a worker is started for.
type Role int

const (
	RoleCall     Role = iota // one call in a fresh interpreter, from the pool
	RoleSession              // the calls of a session, keeping their state
	RoleSnapshot             // making the memory snapshot
	RoleCompile              // compiling packages to bytecode (the supervisor's bytecode.go); never runs user code
)

// Policy is the sandbox of a worker: it reads the runtime files it needs and
// reaches the bridge; its runner reaches the network only if allowed, and
// with the default network never this host, the private networks (unless
// allowed) or its neighbours' metadata services (see deniedNets). With the
// default network it also returns the generation of this host's addresses
// it denies (see addrWatch); else 0.
func (s *Starter) Policy(rt *runtimefiles.Files, makeSnapshot bool) (permissions.Policy, uint64) {
	p := permissions.Policy{
		Read:    []string{rt.Pyodide},
		Program: filepath.Dir(rt.Entry),
		Bridge:  permissions.Bridge{Addr: s.Bridge.Addr(), Socket: s.Bridge.Socket()},
	}
	if !makeSnapshot && rt.Snapshot != "" {
		p.Read = append(p.Read, rt.Snapshot)
	}
	var gen uint64
	switch {
	case makeSnapshot || !s.Networking:
	case len(s.AllowNet) > 0:
		p.Network = permissions.Network{Hosts: s.AllowNet}
	default:
		// Read per worker: a laptop's addresses change as it moves.
		var own []netip.Addr
		own, gen = s.Addrs.current()
		p.Network = permissions.Network{All: true, Deny: deniedNets(s.Bridge.Socket() == "", !s.PrivateNetworks, own)}
	}
	return p, gen
}

// Start starts a worker for r and waits until it is connected and has loaded
// Pyodide. A snapshot worker is returned once connected: it sends its
// snapshot instead of a ready frame. A lazy one is returned on standby,
// with Pyodide's module compiled and no interpreter yet: see standby.go.
// denoDir is the worker's DENO_DIR; "" gives it a private copy of the
// runtime's code cache, removed when it exits, or none when there is no
// code cache.
func (s *Starter) Start(ctx context.Context, rt *runtimefiles.Files, r Role, denoDir string, lazy bool) (*Worker, error) {
	makeSnapshot := r == RoleSnapshot
	ctx, cancel := context.WithTimeout(ctx, s.StartTimeout)
	defer cancel()

	secret := bridge.NewSecret()
	connected, withdraw := s.Bridge.Expect(secret)
	defer withdraw()

	policy, netGen := s.Policy(rt, makeSnapshot)
	if r == RoleCompile {
		policy.Network, netGen = permissions.Network{}, 0 // a compile reaches nothing
	}
	private := ""
	if denoDir == "" {
		denoDir = rt.NoDenoDir
		if rt.CodeCache != "" {
			var err error
			if private, err = runtimefiles.PrivateDenoDir(s.Run, rt.CodeCache); err != nil {
				return nil, err
			}
			denoDir = private
		}
	}
	policy.CodeCache = denoDir != rt.NoDenoDir
	removePrivate := func() {
		if private != "" {
			_ = os.RemoveAll(private)
		}
	}
	init := workerInit{Type: "init", Pyodide: rt.Pyodide, MakeSnapshot: makeSnapshot, OutputLimit: s.OutputLimit, ErrorLimit: s.ErrorLimit, Session: r == RoleSession, Lazy: lazy}
	if !makeSnapshot {
		init.Snapshot = rt.Snapshot
	}
	if r == RoleCall || r == RoleSession {
		init.Watch = s.Watch
	}
	config, err := json.Marshal(workerConfig{
		Secret:      secret,
		Bridge:      s.Bridge.URL(),
		Socket:      s.Bridge.Socket(),
		Init:        init,
		Permissions: permissions.Runner(policy),
	})
	if err != nil {
		return nil, err
	}

	args := append([]string{"run", v8Flags}, permissions.Flags(policy)...)
	cmd := exec.Command(s.Deno, append(args, rt.Entry)...)
	cmd.Env = runtimefiles.DenoEnv(denoDir)
	cmd.Dir = rt.Dir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		removePrivate()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		removePrivate()
		return nil, err
	}
	p, err := s.Launch(cmd)
	if err != nil {
		removePrivate()
		return nil, fmt.Errorf("start deno: %w", err)
	}
	log := s.Log.With(zap.Int("pid", p.Pid()))
	if r == RoleCompile {
		// A compile is background work: calls come first (the supervisor's bytecode.go).
		if err := proc.Background(p.Pid()); err != nil {
			log.Debug("a compile worker keeps its CPU priority", zap.Error(err))
		}
	}
	w := New(s.WG, p, stdin, stderr, log, removePrivate)
	w.netGen = netGen
	// The config is one line; the pipe stays open as the worker's lifeline.
	// A worker that died at once fails the write: its exit says why.
	_, _ = stdin.Write(append(config, '\n'))

	select {
	case w.Conn = <-connected:
	case <-w.exited:
		<-w.released
		return nil, fmt.Errorf("worker exited before connecting: %s (%s)", w.ExitStatus(), w.StderrTail())
	case <-ctx.Done():
		w.Kill()
		return nil, fmt.Errorf("worker did not connect: %w (%s)", context.Cause(ctx), w.StderrTail())
	}
	w.rt, w.lazy, w.args = rt, lazy, cmd.Args
	if r == RoleCall || r == RoleSession {
		if err := s.awaitRunner(ctx, w); err != nil {
			return nil, err
		}
		return w, nil
	}
	ready, err := w.Conn.Ready(ctx)
	if err != nil {
		w.Kill()
		return nil, fmt.Errorf("worker did not get ready: %w (%s)", err, w.StderrTail())
	}
	if makeSnapshot {
		w.python = ready.Python
		// Its one big frame is the snapshot: the whole wasm memory, which
		// imports of --deps can grow past the bridge's limit. No user code
		// runs in this worker.
		w.Conn.SetReadLimit(maxSnapshotSize)
		return w, nil
	}
	// A compile worker's one big frame is a wheel's bytecode, which
	// bytecodeLimit bounds; it needs none of a serving worker's packages.
	w.python = ready.Python
	w.Conn.SetReadLimit(MaxBytecode + 1<<20)
	_ = proc.Background(w.Proc.Pid()) // the threads made since its start too
	return w, nil
}

// awaitRunner waits for w's runner, new in its process or recycled (see
// recycle.go), to be on standby, or ready and then fit for calls (see
// serving). On error w is killed.
func (s *Starter) awaitRunner(ctx context.Context, w *Worker) error {
	if w.lazy {
		if err := w.Conn.Standby(ctx); err != nil {
			w.Kill()
			return fmt.Errorf("worker did not get ready: %w (%s)", err, w.StderrTail())
		}
		w.standby = &standby{done: make(chan struct{})}
		return nil
	}
	ready, err := w.Conn.Ready(ctx)
	if err != nil {
		w.Kill()
		return fmt.Errorf("worker did not get ready: %w (%s)", err, w.StderrTail())
	}
	return s.serving(ctx, w, ready)
}

// serving makes a worker whose interpreter is ready fit for calls: the
// limits of a serving worker, and the --deps files. On error w is killed.
func (s *Starter) serving(ctx context.Context, w *Worker, ready bridge.ReadyFrame) error {
	rt := w.rt
	w.python, w.restored = ready.Python, ready.Snapshot
	if !w.restored && rt.Snapshot != "" {
		s.Remake(rt) // the restore failed: the snapshot is stale or damaged
	}
	w.Conn.SetReadLimit(s.ServingReadLimit())
	s.Log.Debug("worker ready", zap.Int("pid", w.Proc.Pid()), zap.Bool("snapshot", ready.Snapshot), zap.String("python", ready.Python))
	if s.Recycles() {
		w.made, _ = w.Proc.Memory(ctx) // 0, and no bound, if it cannot be read
	}
	if rt.Deps != nil {
		// Restored, the interpreter has the packages loaded but not their
		// files, which are no part of the wasm memory (see runtimefiles.Deps).
		if err := w.Conn.Install(ctx, rt.Deps.Wheels); err != nil {
			w.Kill()
			return fmt.Errorf("worker could not install --deps: %w (%s)", err, w.StderrTail())
		}
	}
	return nil
}

// v8Flags raises the work a wasm function does before V8 optimises it.
// Each worker is a new process that serves one call, and with V8's default
// budget it spent 0.4-0.8 s of CPU in its first seconds compiling
// Pyodide's functions again (the keep-warm tick and the restore made them
// look hot), more than its whole start: it halved the calls a machine
// serves. With this budget a call's really hot loops are still optimised
// within milliseconds and run as fast (a 2M-iteration loop: 214 → 222 ms),
// and an idle worker costs nothing. (--liftoff-only, which never
// optimises, made such loops 2.4× slower.)
//
// Code generation from strings (eval, new Function, and so Pyodide's run_js)
// is off: user code gets no way to make JavaScript out of its strings, and
// Pyodide needs none of it. It costs nothing measurable.
const v8Flags = "--v8-flags=--wasm-tiering-budget=100000000,--disallow-code-generation-from-strings"

// MaxBytecode bounds the bytecode of one wheel that a compile worker
// sends: a hostile package's could be any size.
const MaxBytecode = 256 << 20

// maxSnapshotSize bounds a memory snapshot: a wasm32 memory's 4 GiB, and
// Pyodide's header.
const maxSnapshotSize = 4<<30 + 1<<20

// ServingReadLimit is the largest frame read from a worker that serves
// calls, which is what user code could send with the worker's own
// connection. The runner cuts output and return value to the output limit
// and error text to errorLimit, at least as much; JSON writes such text in
// up to 6 bytes a byte (\u0001). An imports frame holds names from the
// code, and a files frame one file. Without either limit, the bridge's own.
func (s *Starter) ServingReadLimit() int64 {
	if s.OutputLimit <= 0 || s.CodeLimit <= 0 {
		return s.bridgeReadLimit()
	}
	limit := int64(max(6*s.ErrorLimit, 3*s.CodeLimit)) + 1<<20
	if len(s.Watch) > 0 {
		// A changed file or a figure comes whole in one binary frame.
		limit = max(limit, s.FilesLimit+1<<20)
	}
	return limit
}

// WatchMemory calls over once w's resident size passes limit.
// A reading that fails while the worker lives leaves the call unwatched and
// says so: the limit is not silently skipped.
func (w *Worker) WatchMemory(ctx context.Context, limit int64, log *zap.Logger, over func()) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.exited:
			return
		case <-tick.C:
		}
		resident, err := w.Proc.Memory(ctx)
		if err != nil {
			// Reaped a moment before exited is closed, or unreadable.
			select {
			case <-w.exited:
			case <-ctx.Done():
			case <-time.After(time.Second):
				log.Warn("cannot read a worker's memory: the memory limit is not enforced for this call", zap.Int("pid", w.Proc.Pid()), zap.Error(err))
			}
			return
		}
		if resident > limit {
			over()
			return
		}
	}
}

// maxStderrLine is how much of one stderr line is kept and logged.
const maxStderrLine = 1000

// collectStderr logs what deno prints and keeps the last lines, until the
// pipe ends. User code can print there too (through `import js`), so lines
// are logged at debug level only, and cut to maxStderrLine bytes.
func (w *Worker) collectStderr(r io.Reader, log *zap.Logger) {
	for line := range stderrLinesOf(r, maxStderrLine) {
		log.Debug("worker stderr", zap.String("line", line))
		w.mu.Lock()
		w.stderr = append(w.stderr, line)
		if len(w.stderr) > stderrLines {
			w.stderr = w.stderr[1:]
		}
		w.mu.Unlock()
	}
}

// stderrLinesOf yields the lines of r without their line ends, until r
// ends or fails. It reads every byte, however long a line is: a worker
// whose stderr is not drained blocks on its next write, wedged until its
// call's time limit. A line over limit bytes is cut to them, at a UTF-8
// boundary, and says so.
func stderrLinesOf(r io.Reader, limit int) iter.Seq[string] {
	return func(yield func(string) bool) {
		br := bufio.NewReader(r)
		var kept []byte // up to limit+1 bytes: cutText looks one past the cut
		total := 0      // bytes of the line so far, kept or not
		emit := func() bool {
			line := string(kept)
			if total > limit {
				line = fmt.Sprintf("%s… [cut: the line has %d bytes]", CutText(line, limit), total)
			}
			kept, total = kept[:0], 0
			return yield(line)
		}
		for {
			part, more, err := br.ReadLine()
			if err != nil {
				if total > 0 {
					emit()
				}
				return
			}
			total += len(part)
			kept = append(kept, part[:min(len(part), limit+1-len(kept))]...)
			if !more && !emit() {
				return
			}
		}
	}
}

// StderrTail is the last lines the process wrote to stderr, for errors
// and logs.
func (w *Worker) StderrTail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.stderr) == 0 {
		return "no output on stderr"
	}
	return strings.Join(w.stderr, "\n")
}

// Kill stops the worker for good: the only stop a busy Deno worker obeys.
// It returns once the process is reaped and cleanup has run.
func (w *Worker) Kill() {
	if w.Conn != nil {
		w.Conn.Close()
	}
	_ = w.stdin.Close()
	_ = w.Proc.Kill()
	<-w.released
}

// Dead reports whether the process has ended.
func (w *Worker) Dead() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// ExitErr is what waiting for the process returned, once it has ended.
func (w *Worker) ExitErr() error { return w.exitErr }

// ExitStatus describes how the process ended, once it has.
func (w *Worker) ExitStatus() string { return proc.Describe(w.exitErr) }

// CutText returns the longest prefix of text of at most limit bytes that does
// not end inside a UTF-8 sequence.
func CutText(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	end := limit
	// Back over at most the continuation bytes of one character: invalid
	// text made of continuation bytes is cut anywhere.
	for i := 1; i < utf8.UTFMax && end > 0 && !utf8.RuneStart(text[end]); i++ {
		end--
	}
	if !utf8.RuneStart(text[end]) {
		end = limit
	}
	return text[:end]
}
