// Command mcp-run-python is an MCP server that runs Python code in sandboxed
// Deno+Pyodide workers, a drop-in replacement for jsr:@pydantic/mcp-run-python.
//
// Usage:
//
//	mcp-run-python [flags] stdio|streamable_http|streamable_http_stateless|sse|warmup|example|cache
//	mcp-run-python [flags] fetch PKG...
//	mcp-run-python service install|uninstall|start|stop|status [--user] [--print] [MODE FLAGS]
//
// Run it with -h for the flags. Started by Windows' Service Control Manager,
// it runs as a Windows service.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/service"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// How long the engine gets to stop when the program ends.
const engineCloseTimeout = 10 * time.Second

// stdioStartDelay is how long the engine waits for the stdio server's first
// answer before it starts anyway: a client spawns the server and sends
// initialize at once, but one that waits longer still finds the pool warm.
const stdioStartDelay = 100 * time.Millisecond

func main() {
	program := func(ctx context.Context, extraArgs []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return run(ctx, slices.Concat(os.Args[1:], extraArgs), streams{in: stdin, out: stdout, err: stderr},
			config.OSEnvironment(), newSupervisor)
	}
	// Started by Windows' Service Control Manager, the program stops on its
	// requests rather than on the signals below (package service says why).
	if status, ok := service.Run(program); ok {
		os.Exit(status)
	}
	// On Windows, which has no kill -TERM, Go delivers Ctrl-C and Ctrl-Break
	// as os.Interrupt, and the closing of the console window, logoff and
	// shutdown as syscall.SIGTERM, so these two cover a console program
	// there as well. After those last three Windows ends the process a few
	// seconds later whatever it is doing, so the graceful shutdown gets only
	// that long. Another program stops the server gracefully with Ctrl-Break
	// to its process group (GenerateConsoleCtrlEvent), or as a service.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; stop restores the default
	// behaviour, so that a second one ends the program at once.
	context.AfterFunc(ctx, stop)
	// A client that goes away may close its end of our stderr (mcp-go's
	// stdio client does) or stdout before we are done logging. By default Go
	// dies of SIGPIPE on such a write to fd 1 or 2; ignored, the write fails
	// with EPIPE, which the logger and the transport already handle, and the
	// server shuts down as after any other end of stdin. Workers inherit the
	// disposition, which changes nothing: deno ignores SIGPIPE itself.
	// Windows has no SIGPIPE (a write to a closed pipe just fails), and Go
	// defines syscall.SIGPIPE there only for portable code like this line,
	// which does nothing there.
	signal.Ignore(syscall.SIGPIPE)
	// Package initialization leaves about 3 MB of heap, most of it the
	// metaschemas that a JSON-schema library of mcp-go's compiles, so the
	// first collection fell due while the stdio server answered initialize:
	// 0.5 ms of its 10 on two cores. It waits for the first answer instead,
	// or stdioStartDelay at most; no mode allocates much in that time.
	resumeGC := pauseGC()
	time.AfterFunc(stdioStartDelay, resumeGC)
	stdout := &afterFirstWrite{w: os.Stdout, then: resumeGC}
	status := program(ctx, nil, os.Stdin, stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// pauseGC turns the garbage collector off until the function it returns is
// first called.
func pauseGC() (resume func()) {
	percent := debug.SetGCPercent(-1)
	return sync.OnceFunc(func() { debug.SetGCPercent(percent) })
}

// engine is what the program needs of the supervisor.
type engine interface {
	mcpserver.Runner
	// Start prepares and warms the pool in the background and returns at once.
	Start(ctx context.Context)
	// Warmup prepares everything a first call needs, reporting each step.
	Warmup(ctx context.Context, progress func(step string)) error
	// Close stops all workers.
	Close(ctx context.Context) error
	// Health reports the pool's state, for readiness checks.
	Health() supervisor.Health
	// NewSession starts an interpreter that keeps its state between calls.
	NewSession(ctx context.Context) (*supervisor.Session, error)
}

// newEngineFunc makes the engine; tests pass a fake.
type newEngineFunc func(cfg supervisor.Config, log *zap.Logger) engine

// newSupervisor makes the real engine.
func newSupervisor(cfg supervisor.Config, log *zap.Logger) engine {
	return supervisor.New(cfg, log)
}

// serves reports whether mode serves MCP, rather than a command that ends.
func serves(mode config.Mode) bool {
	return mode != config.ModeWarmup && mode != config.ModeExample && mode != config.ModeCache && mode != config.ModeFetch
}

// servesHTTP reports whether mode serves MCP over HTTP, beside the probes.
func servesHTTP(mode config.Mode) bool {
	return serves(mode) && mode != config.ModeStdio
}

// streams are the standard streams of the program. In stdio mode out carries
// MCP messages and nothing else.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// run is the program: it parses args, dispatches on the mode and returns the
// exit status.
func run(ctx context.Context, args []string, std streams, env config.Environment, newEngine newEngineFunc) int {
	if len(args) > 0 && args[0] == serviceCommand {
		return runService(args[1:], std, osServiceHost(env))
	}
	cfg, w, err := configure(args, env)
	if err != nil {
		// Bare, the program shows what it takes; otherwise the error alone,
		// which the usage would scroll out of sight.
		if len(args) == 0 {
			fmt.Fprintf(std.err, "mcp-run-python: %v\n\n%s", err, config.Usage())
		} else {
			fmt.Fprintf(std.err, "mcp-run-python: %v\nRun 'mcp-run-python --help' for the flags and modes.\n", err)
		}
		return exitUsage
	}
	build := binaryVersion()
	switch {
	case cfg.Help:
		fmt.Fprint(std.out, config.Usage())
		return exitOK
	case cfg.Version:
		fmt.Fprint(std.out, build.Text())
		return exitOK
	}

	log := newLogger(cfg.LogLevel, std.err)
	defer func() { _ = log.Sync() }()
	// What the flags came to, for --verbose: users moving from the PyPI
	// release see that its invocations mean the same here.
	log.Debug("starting", zap.String("mode", string(cfg.Mode)), zap.Strings("deps", cfg.Supervisor.Deps),
		zap.Bool("networking", cfg.Supervisor.Networking), zap.String("tool_schema", string(cfg.ToolSchema)))
	// One registry per process where /metrics serves it, in the HTTP modes:
	// the supervisor registers its metrics in it. Elsewhere nothing would
	// read it, and making it (the Go collector matches every runtime metric
	// against its rules) and filling it took 0.2-0.4 ms of the 10 the stdio
	// server takes to answer initialize. The supervisor counts all the same.
	var metrics *prometheus.Registry
	if servesHTTP(cfg.Mode) {
		metrics = transport.NewMetricsRegistry()
		w.supervisor.Metrics = metrics
	}
	// --deps that cannot be installed end a server at once, saying why,
	// rather than leave it up failing every call.
	ctx, fatal := context.WithCancelCause(ctx)
	defer fatal(nil)
	if serves(cfg.Mode) {
		w.supervisor.Fatal = fatal
	}
	var tools *codeTools
	if cfg.Tools.File != "" && serves(cfg.Mode) {
		if tools, err = openCodeTools(ctx, cfg.Tools, log); err != nil {
			fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
			return exitFailure
		}
		defer tools.close(log)
		w.supervisor.Tools = tools.box
	}
	eng := newEngine(w.supervisor, log)
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineCloseTimeout)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			log.Warn("stop workers", zap.Error(err))
		}
	}()

	switch cfg.Mode {
	case config.ModeWarmup:
		return warmup(ctx, eng, std.err, build.Version)
	case config.ModeExample:
		return example(ctx, eng, std, build.Version)
	case config.ModeCache:
		return cacheCommand(ctx, cfg, std)
	case config.ModeFetch:
		return fetchCommand(ctx, eng, cfg.Fetch, cfg.Mirror, std)
	}

	start := &engineStart{ctx: ctx, eng: eng, done: make(chan struct{})}
	if cfg.Mode == config.ModeStdio {
		// Preparing the runtime parses files, runs deno and waits for
		// locks in system calls, each of which keeps one of Go's processors
		// meanwhile: started with the server, it delayed the answer to
		// initialize by 5 ms in the median on two cores, by 15 ms at worst.
		// So it starts once the first answer is out.
		std.out = &afterFirstWrite{w: std.out, then: start.run}
		defer time.AfterFunc(stdioStartDelay, start.run).Stop()
	} else {
		start.run()
	}
	st, err := openState(cfg, eng, w.supervisor.Metrics, log)
	if err != nil {
		fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
		return exitFailure
	}
	// Before the engine closes: a session's worker is the engine's.
	defer st.close(log)
	ask, err := askOptions(cfg.Ask)
	if err != nil {
		fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
		return exitFailure
	}
	o := transport.Options{
		Options: mcpserver.Options{
			Version:    build.Version,
			Runner:     eng,
			ReturnMode: w.returnMode,
			Log:        log,
			// Cancelled code gets the supervisor's grace to stop before its
			// worker is killed, and then a moment to report.
			Calls:      mcpserver.NewCallGate(cfg.ShutdownTimeout, w.supervisor.CancelWait()),
			Schema:     w.toolSchema,
			Sessions:   st.sessions,
			Files:      st.files,
			ImageLimit: cfg.ImageLimit,
			Tasks:      taskOptions(cfg, w.supervisor),
			Ask:        ask,
		},
		CodeLimit: cfg.Supervisor.CodeLimit,
		Limits:    &w.limits,
	}
	if tools != nil {
		o.Options.CodeTools = tools.describe
	}
	p := transport.Probes{Health: eng.Health, Metrics: metrics, Calls: o.Calls, Log: log}
	err = serve(ctx, cfg, o, p, std)
	if !start.wait(engineCloseTimeout) {
		log.Warn("engine start did not return")
	}
	if cause := context.Cause(ctx); errors.Is(cause, supervisor.ErrDeps) {
		err = cause
	}
	if err != nil {
		fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// engineStart starts the engine in the background, at most once.
type engineStart struct {
	ctx  context.Context
	eng  engine
	once sync.Once
	done chan struct{} // closed once Start has returned or will never run
}

// run starts the engine unless it has started already.
func (s *engineStart) run() {
	s.once.Do(func() {
		// Start returns at once by contract; it still runs on its own
		// goroutine so that no answer can ever wait for the runtime.
		go func() {
			defer close(s.done)
			s.eng.Start(s.ctx)
		}()
	})
}

// wait waits up to timeout for Start to return, and reports whether it did.
// An engine not started yet never will be: the server is done.
func (s *engineStart) wait(timeout time.Duration) bool {
	s.once.Do(func() { close(s.done) })
	select {
	case <-s.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// afterFirstWrite calls then once, after the first write to w.
type afterFirstWrite struct {
	w    io.Writer
	once sync.Once
	then func()
}

// Write implements io.Writer.
func (a *afterFirstWrite) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.once.Do(a.then)
	return n, err
}

// serve serves MCP in one of the server modes until ctx is done (or, for
// stdio, until stdin ends); the HTTP modes serve p's endpoints too.
func serve(ctx context.Context, cfg config.Config, o transport.Options, p transport.Probes, std streams) error {
	var kind transport.Kind
	switch cfg.Mode {
	case config.ModeStdio:
		return transport.ServeStdio(ctx, o, cfg.Supervisor.Workers, std.in, std.out)
	case config.ModeSSE:
		kind = transport.SSE
	case config.ModeStreamableHTTP:
		kind = transport.StreamableHTTP
	case config.ModeStreamableHTTPStateless:
		kind = transport.StreamableHTTPStateless
	}
	a, err := newAuth(ctx, cfg, kind.Path(), o.Log)
	if err != nil {
		return err
	}
	o.Auth, o.TLSCert, o.TLSKey = a, cfg.TLSCert, cfg.TLSKey
	fe, err := transport.NewHTTPFrontEnd(kind, o)
	if err != nil {
		return fmt.Errorf("mode %q: %w", cfg.Mode, err)
	}
	fe.AddProbes(p)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scheme := "http"
	if fe.TLS() {
		scheme = "https"
	}
	// The host as given, with the port taken: the listener names 0.0.0.0,
	// which Go listens on as the dual-stack [::], by the latter.
	addr := ln.Addr().String()
	if _, port, err := net.SplitHostPort(addr); err == nil && cfg.Host != "" {
		addr = net.JoinHostPort(cfg.Host, port)
	}
	fmt.Fprintf(std.err, "mcp-run-python %s: serving %s at %s://%s%s\n", o.Version, cfg.Mode, scheme, addr, kind.Path())
	if a == nil && !isLoopback(cfg.Host) {
		o.Log.Warn("ANYONE WHO CAN REACH " + addr + " CAN RUN CODE HERE: no authentication on an address other machines reach; " +
			"set --oauth-issuer or --auth-token-file, or listen on 127.0.0.1 behind an authenticating proxy")
	}
	return transport.ServeHTTP(ctx, ln, fe, o.Log)
}

// newLogger returns the program's own log, human-readable, on w (stderr).
func newLogger(level zapcore.Level, w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeLevel = zapcore.CapitalLevelEncoder
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), sink, level)
	return zap.New(core, zap.ErrorOutput(sink)).Named("mcp-run-python")
}
