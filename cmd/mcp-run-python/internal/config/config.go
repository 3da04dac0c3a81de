// Package config is the command line: its modes and flags, the environment
// variables that stand in for the flags, and the defaults that depend on the
// system. Package main turns a Config into the supervisor and a transport.
package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// Mode is what the program does: serve MCP over a transport, prepare the
// runtime, or run the demo script.
type Mode string

// The modes of the command line (DESIGN 1.1).
const (
	ModeStdio                   Mode = "stdio"
	ModeStreamableHTTP          Mode = "streamable_http"
	ModeStreamableHTTPStateless Mode = "streamable_http_stateless"
	ModeSSE                     Mode = "sse"
	ModeWarmup                  Mode = "warmup"
	ModeExample                 Mode = "example"
)

// parseMode accepts a mode as written on the command line, including the
// hyphenated spellings of the HTTP modes.
func parseMode(s string) (Mode, bool) {
	switch m := Mode(strings.ReplaceAll(s, "-", "_")); m {
	case ModeStdio, ModeStreamableHTTP, ModeStreamableHTTPStateless, ModeSSE, ModeWarmup, ModeExample:
		return m, true
	}
	return "", false
}

// envPrefix starts the name of the environment variable that stands in for
// a flag: --return-mode is MCP_RUN_PYTHON_RETURN_MODE.
const envPrefix = "MCP_RUN_PYTHON_"

// Flag defaults.
const (
	defaultPort        = 3001
	defaultHost        = "127.0.0.1"
	defaultWorkers     = 2
	defaultTimeout     = 60 * time.Second
	defaultMemoryLimit = "1GiB"
	defaultOutputLimit = "1MiB"
	defaultLogLevel    = zapcore.WarnLevel

	defaultQueueTimeout    = 30 * time.Second
	defaultCodeLimit       = "1MiB"
	defaultShutdownTimeout = 10 * time.Second
)

// Config is everything the command line and the environment decide.
type Config struct {
	Mode       Mode
	Host       string
	Port       int
	ReturnMode render.ReturnMode
	LogLevel   zapcore.Level
	Supervisor supervisor.Config
	// ShutdownTimeout is how long running calls get to finish after SIGTERM
	// or SIGINT before they are cancelled; 0 cancels them at once.
	ShutdownTimeout time.Duration
	// Limits bound what callers can make the MCP front end hold.
	Limits transport.Limits

	// Help and Version ask for the usage text or the version instead of a mode.
	Help    bool
	Version bool
}

// Environment is what configuration reads from outside the command line.
// Tests replace it; OSEnvironment returns the real one.
type Environment struct {
	LookupEnv    func(key string) (string, bool)
	LookPath     func(file string) (string, error)
	UserCacheDir func() (string, error)
	UserHomeDir  func() (string, error)
}

// OSEnvironment returns the process's own environment.
func OSEnvironment() Environment {
	return Environment{
		LookupEnv:    os.LookupEnv,
		LookPath:     exec.LookPath,
		UserCacheDir: os.UserCacheDir,
		UserHomeDir:  os.UserHomeDir,
	}
}

// UsageError reports wrong arguments: the program prints it with the usage
// text on stderr and exits with status 2.
type UsageError struct {
	Err error
}

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a *UsageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// flagValues holds the values that the flags (flagvalues.go) check and fill in.
type flagValues struct {
	port              int
	host              string
	returnMode        render.ReturnMode
	deps              []string
	indexURL          string
	pyodideIndexURL   string
	offline           bool
	disableNetworking bool
	allowNet          []string // nil when not set
	version           bool
	help              bool
	workers           int
	timeout           time.Duration
	memoryLimit       int64
	outputLimit       int64
	deno              string
	cacheDir          string
	logLevel          zapcore.Level
	warm              int // 0 when not set
	queue             int // 0 when not set
	queueTimeout      time.Duration
	codeLimit         int64
	grace             time.Duration
	shutdownTimeout   time.Duration
	requestLimit      int64
	requestLimitSet   bool
	readTimeout       time.Duration
	maxConnections    int
	maxMCPSessions    int
	mcpSessionIdle    time.Duration
	allowOrigins      []string
}

// newFlagSet defines the flags into v, with help for goos. Each flag checks
// its own value (see flagvalues.go); parse checks the rules between
// flags. Its output is discarded: errors are returned and printed by the
// caller.
func newFlagSet(v *flagValues, goos string) *pflag.FlagSet {
	front := transport.DefaultLimits(0) // the defaults that do not follow --code-limit
	fs := pflag.NewFlagSet("mcp-run-python", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.Var(newIntFlag(&v.port, defaultPort, 0, math.MaxUint16), "port", "port of the HTTP modes")
	fs.Var(newCheckedString(&v.host, defaultHost, checkHost), "host", "address the HTTP modes listen on")
	fs.Var(newChoice(&v.returnMode, render.ReturnXML, render.ReturnXML, render.ReturnJSON), "return-mode", "result format: xml or json")
	fs.Var(&listFlag{&v.deps, parseDeps}, "deps", "comma-separated packages installed into every interpreter")
	fs.Var(newCheckedString(&v.indexURL, packages.DefaultIndexURL, packages.CheckLocation), "index-url", "package index: a PyPI-style simple API, as a URL or a local directory")
	fs.Var(newCheckedString(&v.pyodideIndexURL, "", checkOptionalLocation), "pyodide-index-url", "where Pyodide's built-in packages are, as a URL or a local directory (default: the package host of the pinned Pyodide release)")
	fs.BoolVar(&v.offline, "offline", false, "install packages from the package cache only, never downloading")
	fs.BoolVar(&v.disableNetworking, "disable-networking", false, "deny Python code access to the network")
	fs.Var(&listFlag{&v.allowNet, parseAllowNet}, "allow-net", "comma-separated hosts Python code may reach, and nothing else: host, host:port, [ipv6]:port (default: the internet, but not this machine or link-local addresses)")
	fs.Var(newIntFlag(&v.workers, defaultWorkers, 1, math.MaxInt), "workers", "live worker limit: calls run in parallel up to it")
	fs.Var(newIntFlag(&v.warm, 0, 1, math.MaxInt), "warm", "idle workers kept ready for calls, at most --workers (default: --workers)")
	fs.Var(newIntFlag(&v.queue, 0, 1, math.MaxInt), "queue", fmt.Sprintf("calls that may wait for a worker while all are busy (default: %d times --workers)", supervisor.DefaultQueuePerWorker))
	fs.Var(nonNegativeDuration(&v.queueTimeout, defaultQueueTimeout), "queue-timeout", "how long a call may wait for a worker; 0 for no limit")
	fs.Var(positiveDuration(&v.timeout, defaultTimeout), "timeout", "time limit of one call, installing its packages included, such as 30s or 2m")
	fs.Var(positiveDuration(&v.grace, supervisor.DefaultGrace), "grace", "how long interrupted code gets to stop before its worker is killed")
	fs.Var(newByteSize(&v.memoryLimit, defaultMemoryLimit, math.MaxInt64), "memory-limit", "memory a worker may use, such as 512MiB; 0 for no limit")
	fs.Var(newByteSize(&v.outputLimit, defaultOutputLimit, math.MaxInt), "output-limit", "output, and return value, kept per call, such as 64KiB; 0 for no limit")
	fs.Var(newByteSize(&v.codeLimit, defaultCodeLimit, math.MaxInt), "code-limit", "largest python_code accepted, such as 256KiB; 0 for no limit")
	fs.Var(nonNegativeDuration(&v.shutdownTimeout, defaultShutdownTimeout), "shutdown-timeout", "how long running calls get to finish after SIGTERM or SIGINT before they are cancelled")
	fs.Var(optionalByteSize(&v.requestLimit, &v.requestLimitSet, math.MaxInt), "request-limit", "largest request accepted, an HTTP request body or a stdio line, such as 16MiB; 0 for no limit (default: 8MiB, or 6 times --code-limit plus 1MiB if more)")
	fs.Var(positiveDuration(&v.readTimeout, front.ReadTimeout), "read-timeout", "how long an HTTP client may take to send a request's headers, then its body (and an SSE client its first message)")
	fs.Var(newIntFlag(&v.maxConnections, front.MaxConnections, 0, math.MaxInt), "max-connections", "open HTTP connections; past it the one waiting longest for a request is closed (the new one refused if all are busy); 0 for no limit")
	fs.Var(newIntFlag(&v.maxMCPSessions, front.MaxMCPSessions, 0, math.MaxInt), "max-mcp-sessions", "live MCP protocol sessions (Streamable HTTP sessions, SSE streams; not Python interpreters): past it a new one gets 503; 0 for no limit")
	fs.Var(nonNegativeDuration(&v.mcpSessionIdle, front.MCPSessionIdle), "mcp-session-idle", "an MCP protocol session (not a Python interpreter) without requests for this long is ended; 0 to keep idle sessions")
	fs.Var(&listFlag{&v.allowOrigins, parseAllowOrigin}, "allow-origin", "comma-separated origins of web pages that may call the HTTP modes, such as https://app.example.com, or * for any; local pages may call a local server")
	fs.StringVar(&v.deno, "deno", "", denoHelp(goos))
	fs.StringVar(&v.cacheDir, "cache-dir", "", cacheDirHelp(goos))
	fs.Var(newLevelFlag(&v.logLevel, defaultLogLevel), "log-level", "level of the server's own log on stderr: debug, info, warn, error")
	fs.BoolVar(&v.version, "version", false, "print the version and exit")
	fs.BoolVarP(&v.help, "help", "h", false, "print this help and exit")
	return fs
}

// Usage is the help that the program prints for -h and after a usage
// error.
func Usage() string {
	var v flagValues
	return `Usage: mcp-run-python [flags] MODE

Runs Python code in sandboxed Pyodide workers, as an MCP server.

Modes:
  stdio                       MCP over stdin and stdout
  streamable_http             Streamable HTTP at http://HOST:PORT/mcp, with sessions
  streamable_http_stateless   Streamable HTTP at http://HOST:PORT/mcp, without sessions
  sse                         HTTP+SSE: GET /sse, then POST to the endpoint it announces
  warmup                      prepare everything a first call needs and run a check
  example                     run a demo script and print its result
  (streamable-http and streamable-http-stateless are accepted too)

Flags (each can also be set with the environment variable MCP_RUN_PYTHON_<FLAG>,
upper case with '-' as '_', such as MCP_RUN_PYTHON_RETURN_MODE=json; the
command line wins):
` + newFlagSet(&v, runtime.GOOS).FlagUsages()
}

// settingsFromEnv lists the flags that the environment may set; --help and
// --version are actions, not settings, so a stray variable cannot trigger them.
func settingsFromEnv(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "version" {
			names = append(names, f.Name)
		}
	})
	return names
}

// envName returns the environment variable that stands in for flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagSources tells where each flag's value came from, for messages: the
// flag itself or the environment variable that stood in for it.
type flagSources struct {
	fs      *pflag.FlagSet
	fromEnv map[string]string // flag name → the variable that set it
}

// name is --name, or the variable that set flag name.
func (s flagSources) name(name string) string {
	if key, ok := s.fromEnv[name]; ok {
		return key
	}
	return "--" + name
}

// invalid returns a *UsageError for the value of flag name, for a reason
// that involves other flags.
func (s flagSources) invalid(name, format string, args ...any) error {
	return usageErrorf("invalid value %q for %s: %s", s.fs.Lookup(name).Value.String(), s.name(name), fmt.Sprintf(format, args...))
}

// usageError turns an error of pflag into a *UsageError; a wrong value is
// reported with the flag or the variable that gave it.
func (s flagSources) usageError(err error) error {
	if invalid, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		return usageErrorf("invalid value %q for %s: %w", invalid.GetValue(), s.name(invalid.GetFlag().Name), invalid.Unwrap())
	}
	return &UsageError{Err: err}
}

// setFromEnv sets each setting not given on the command line from its
// environment variable, when that is set and not empty.
func (s flagSources) setFromEnv(env Environment) error {
	for _, name := range settingsFromEnv(s.fs) {
		if s.fs.Changed(name) {
			continue
		}
		key := envName(name)
		value, ok := env.LookupEnv(key)
		if !ok || value == "" {
			continue
		}
		s.fromEnv[name] = key
		if err := s.fs.Set(name, value); err != nil {
			return s.usageError(err)
		}
	}
	return nil
}

// Parse parses the arguments (without the program name). Flags may come
// before or after the mode. A flag not given on the command line is read from
// its environment variable when that is set and not empty. Wrong arguments
// give a *UsageError.
func Parse(args []string, env Environment) (Config, error) {
	return parse(args, env, runtime.GOOS)
}

// parse is Parse with the defaults of goos, which tests choose.
// Each flag checks its own value as it is set; the checks here are those
// between flags.
func parse(args []string, env Environment, goos string) (Config, error) {
	var v flagValues
	fs := newFlagSet(&v, goos)
	src := flagSources{fs: fs, fromEnv: map[string]string{}}
	if err := fs.Parse(args); err != nil {
		return Config{}, src.usageError(err)
	}
	if v.help || v.version {
		// Actions, not settings: the environment cannot make them fail.
		return Config{Help: v.help, Version: v.version}, nil
	}
	if err := src.setFromEnv(env); err != nil {
		return Config{}, err
	}

	var mode Mode
	switch rest := fs.Args(); len(rest) {
	case 0:
		return Config{}, usageErrorf("no mode given")
	case 1:
		var ok bool
		if mode, ok = parseMode(rest[0]); !ok {
			return Config{}, usageErrorf("unknown mode %q", rest[0])
		}
	default:
		return Config{}, usageErrorf("expected one mode, got %q", rest)
	}

	warm := v.warm
	if warm == 0 {
		warm = v.workers
	} else if warm > v.workers {
		return Config{}, src.invalid("warm", "need 1 to %d (the worker limit)", v.workers)
	}
	if v.allowNet != nil && v.disableNetworking {
		// Either answer would surprise someone: refuse rather than guess.
		return Config{}, usageErrorf("%s and %s exclude each other", src.name("allow-net"), src.name("disable-networking"))
	}
	limits, err := parseFrontEndLimits(v, src)
	if err != nil {
		return Config{}, err
	}
	deno := v.deno
	if deno == "" {
		deno = defaultDeno(goos, env)
	}
	cacheDir := v.cacheDir
	if cacheDir == "" {
		if cacheDir, err = defaultCacheDir(goos, env); err != nil {
			return Config{}, usageErrorf("no cache directory: %w; set --cache-dir", err)
		}
	}

	return Config{
		Mode:            mode,
		Host:            v.host,
		Port:            v.port,
		ReturnMode:      v.returnMode,
		LogLevel:        v.logLevel,
		ShutdownTimeout: v.shutdownTimeout,
		Limits:          limits,
		Supervisor: supervisor.Config{
			Deno:            deno,
			CacheDir:        cacheDir,
			Workers:         v.workers,
			Timeout:         v.timeout,
			OutputLimit:     int(v.outputLimit),
			MemoryLimit:     v.memoryLimit,
			Deps:            v.deps,
			IndexURL:        v.indexURL,
			PyodideIndexURL: v.pyodideIndexURL,
			Offline:         v.offline,
			Networking:      !v.disableNetworking,
			AllowNet:        v.allowNet,
			Warm:            warm,
			Queue:           v.queue, // 0: the supervisor's default
			QueueTimeout:    v.queueTimeout,
			CodeLimit:       int(v.codeLimit),
			Grace:           v.grace,
		}.WithDefaults(),
	}, nil
}

// parseFrontEndLimits returns the front end's limits of the flags, with the
// request limit following the code limit unless it is set.
func parseFrontEndLimits(v flagValues, src flagSources) (transport.Limits, error) {
	l := transport.DefaultLimits(v.codeLimit)
	if v.requestLimitSet {
		if v.requestLimit > 0 && v.codeLimit > 0 && v.requestLimit < v.codeLimit {
			// Code under the code limit could not be sent: refuse rather
			// than let such calls fail with a less helpful error.
			return l, src.invalid("request-limit", "below %s (%s)", src.name("code-limit"), humanize.IBytes(uint64(v.codeLimit)))
		}
		l.RequestLimit = v.requestLimit
	}
	l.ReadTimeout = v.readTimeout
	l.MaxConnections, l.MaxMCPSessions = v.maxConnections, v.maxMCPSessions
	l.MCPSessionIdle = v.mcpSessionIdle
	l.AllowOrigins = v.allowOrigins
	return l, nil
}
