package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/mcp-run-python/mcp-run-python/permissions"
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
	defaultLogLevel    = "warn"

	defaultQueueTimeout    = 30 * time.Second
	defaultCodeLimit       = "1MiB"
	defaultShutdownTimeout = 10 * time.Second
)

// Config is everything the command line and the environment decide.
type Config struct {
	Mode       Mode
	Host       string
	Port       int
	ReturnMode ReturnMode
	LogLevel   zapcore.Level
	Supervisor supervisor.Config
	// ShutdownTimeout is how long running calls get to finish after SIGTERM
	// or SIGINT before they are cancelled; 0 cancels them at once.
	ShutdownTimeout time.Duration
	// Limits bound what callers can make the MCP front end hold.
	Limits FrontEndLimits

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

// flagValues holds the raw values that pflag fills in.
type flagValues struct {
	port              int
	host              string
	returnMode        string
	deps              string
	indexURL          string
	pyodideIndexURL   string
	offline           bool
	disableNetworking bool
	allowNet          string
	version           bool
	help              bool
	workers           int
	timeout           time.Duration
	memoryLimit       string
	outputLimit       string
	deno              string
	cacheDir          string
	logLevel          string
	warm              int
	queue             int
	queueTimeout      time.Duration
	codeLimit         string
	grace             time.Duration
	shutdownTimeout   time.Duration
	requestLimit      string
	readTimeout       time.Duration
	maxConnections    int
	maxMCPSessions    int
	mcpSessionIdle    time.Duration
	allowOrigin       string
}

// newFlagSet defines the flags into v, with help for goos. Its output is
// discarded: errors are returned and printed by the caller.
func newFlagSet(v *flagValues, goos string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("mcp-run-python", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.IntVar(&v.port, "port", defaultPort, "port of the HTTP modes")
	fs.StringVar(&v.host, "host", defaultHost, "address the HTTP modes listen on")
	fs.StringVar(&v.returnMode, "return-mode", string(ReturnXML), "result format: xml or json")
	fs.StringVar(&v.deps, "deps", "", "comma-separated packages installed into every interpreter")
	fs.StringVar(&v.indexURL, "index-url", packages.DefaultIndexURL, "package index: a PyPI-style simple API, as a URL or a local directory")
	fs.StringVar(&v.pyodideIndexURL, "pyodide-index-url", "", "where Pyodide's built-in packages are, as a URL or a local directory (default: the package host of the pinned Pyodide release)")
	fs.BoolVar(&v.offline, "offline", false, "install packages from the package cache only, never downloading")
	fs.BoolVar(&v.disableNetworking, "disable-networking", false, "deny Python code access to the network")
	fs.StringVar(&v.allowNet, "allow-net", "", "comma-separated hosts Python code may reach, and nothing else: host, host:port, [ipv6]:port (default: the internet, but not this machine or link-local addresses)")
	fs.IntVar(&v.workers, "workers", defaultWorkers, "live worker limit: calls run in parallel up to it")
	fs.IntVar(&v.warm, "warm", 0, "idle workers kept ready for calls, at most --workers (default: --workers)")
	fs.IntVar(&v.queue, "queue", 0, fmt.Sprintf("calls that may wait for a worker while all are busy (default: %d times --workers)", supervisor.DefaultQueuePerWorker))
	fs.DurationVar(&v.queueTimeout, "queue-timeout", defaultQueueTimeout, "how long a call may wait for a worker; 0 for no limit")
	fs.DurationVar(&v.timeout, "timeout", defaultTimeout, "time limit of one call, installing its packages included, such as 30s or 2m")
	fs.DurationVar(&v.grace, "grace", supervisor.DefaultGrace, "how long interrupted code gets to stop before its worker is killed")
	fs.StringVar(&v.memoryLimit, "memory-limit", defaultMemoryLimit, "memory a worker may use, such as 512MiB; 0 for no limit")
	fs.StringVar(&v.outputLimit, "output-limit", defaultOutputLimit, "output, and return value, kept per call, such as 64KiB; 0 for no limit")
	fs.StringVar(&v.codeLimit, "code-limit", defaultCodeLimit, "largest python_code accepted, such as 256KiB; 0 for no limit")
	fs.DurationVar(&v.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long running calls get to finish after SIGTERM or SIGINT before they are cancelled")
	fs.StringVar(&v.requestLimit, "request-limit", "", "largest request accepted, an HTTP request body or a stdio line, such as 16MiB; 0 for no limit (default: 8MiB, or 6 times --code-limit plus 1MiB if more)")
	fs.DurationVar(&v.readTimeout, "read-timeout", defaultReadTimeout, "how long an HTTP client may take to send a request's headers, then its body (and an SSE client its first message)")
	fs.IntVar(&v.maxConnections, "max-connections", defaultMaxConnections, "open HTTP connections; past it the one waiting longest for a request is closed (the new one refused if all are busy); 0 for no limit")
	fs.IntVar(&v.maxMCPSessions, "max-mcp-sessions", defaultMaxMCPSessions, "live MCP protocol sessions (Streamable HTTP sessions, SSE streams; not Python interpreters): past it a new one gets 503; 0 for no limit")
	fs.DurationVar(&v.mcpSessionIdle, "mcp-session-idle", defaultMCPSessionIdle, "an MCP protocol session (not a Python interpreter) without requests for this long is ended; 0 to keep idle sessions")
	fs.StringVar(&v.allowOrigin, "allow-origin", "", "comma-separated origins of web pages that may call the HTTP modes, such as https://app.example.com, or * for any; local pages may call a local server")
	fs.StringVar(&v.deno, "deno", "", denoHelp(goos))
	fs.StringVar(&v.cacheDir, "cache-dir", "", cacheDirHelp(goos))
	fs.StringVar(&v.logLevel, "log-level", defaultLogLevel, "level of the server's own log on stderr: debug, info, warn, error")
	fs.BoolVar(&v.version, "version", false, "print the version and exit")
	fs.BoolVarP(&v.help, "help", "h", false, "print this help and exit")
	return fs
}

// usageText is the help printed for -h and after a usage error.
func usageText() string {
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

// ParseConfig parses the arguments (without the program name). Flags may come
// before or after the mode. A flag not given on the command line is read from
// its environment variable when that is set and not empty. Wrong arguments
// give a *UsageError.
func ParseConfig(args []string, env Environment) (Config, error) {
	return parseConfig(args, env, runtime.GOOS)
}

// parseConfig is ParseConfig with the defaults of goos, which tests choose.
func parseConfig(args []string, env Environment, goos string) (Config, error) {
	var v flagValues
	fs := newFlagSet(&v, goos)
	if err := fs.Parse(args); err != nil {
		return Config{}, &UsageError{Err: err}
	}
	fromEnv := map[string]string{} // flag name → the variable that set it
	for _, name := range settingsFromEnv(fs) {
		if fs.Changed(name) {
			continue
		}
		key := envName(name)
		value, ok := env.LookupEnv(key)
		if !ok || value == "" {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return Config{}, usageErrorf("invalid value %q for %s: %w", value, key, err)
		}
		fromEnv[name] = key
	}
	// source names where a flag's value came from, for error messages.
	source := func(name string) string {
		if key, ok := fromEnv[name]; ok {
			return key
		}
		return "--" + name
	}

	cfg := Config{Help: v.help, Version: v.version}
	if cfg.Help || cfg.Version {
		return cfg, nil
	}

	switch rest := fs.Args(); len(rest) {
	case 0:
		return Config{}, usageErrorf("no mode given")
	case 1:
		mode, ok := parseMode(rest[0])
		if !ok {
			return Config{}, usageErrorf("unknown mode %q", rest[0])
		}
		cfg.Mode = mode
	default:
		return Config{}, usageErrorf("expected one mode, got %q", rest)
	}

	if v.port < 0 || v.port > math.MaxUint16 {
		return Config{}, usageErrorf("invalid value %d for %s: not a port number", v.port, source("port"))
	}
	cfg.Port = v.port
	if v.host == "" {
		return Config{}, usageErrorf("invalid value for %s: empty host", source("host"))
	}
	cfg.Host = v.host
	switch mode := ReturnMode(strings.ToLower(v.returnMode)); mode {
	case ReturnXML, ReturnJSON:
		cfg.ReturnMode = mode
	default:
		return Config{}, usageErrorf("invalid value %q for %s: want xml or json", v.returnMode, source("return-mode"))
	}
	level, err := zapcore.ParseLevel(v.logLevel)
	if err != nil {
		return Config{}, usageErrorf("invalid value %q for %s: %w", v.logLevel, source("log-level"), err)
	}
	cfg.LogLevel = level

	if v.workers < 1 {
		return Config{}, usageErrorf("invalid value %d for %s: need at least 1", v.workers, source("workers"))
	}
	if v.timeout <= 0 {
		return Config{}, usageErrorf("invalid value %s for %s: must be positive", v.timeout, source("timeout"))
	}
	memoryLimit, err := parseBytes(v.memoryLimit, math.MaxInt64)
	if err != nil {
		return Config{}, usageErrorf("invalid value %q for %s: %w", v.memoryLimit, source("memory-limit"), err)
	}
	outputLimit, err := parseBytes(v.outputLimit, math.MaxInt)
	if err != nil {
		return Config{}, usageErrorf("invalid value %q for %s: %w", v.outputLimit, source("output-limit"), err)
	}
	codeLimit, err := parseBytes(v.codeLimit, math.MaxInt)
	if err != nil {
		return Config{}, usageErrorf("invalid value %q for %s: %w", v.codeLimit, source("code-limit"), err)
	}
	warm := v.workers
	if fs.Changed("warm") {
		if v.warm < 1 || v.warm > v.workers {
			return Config{}, usageErrorf("invalid value %d for %s: need 1 to %d (the worker limit)", v.warm, source("warm"), v.workers)
		}
		warm = v.warm
	}
	queue := 0 // the supervisor's default
	if fs.Changed("queue") {
		if v.queue < 1 {
			return Config{}, usageErrorf("invalid value %d for %s: need at least 1", v.queue, source("queue"))
		}
		queue = v.queue
	}
	if v.queueTimeout < 0 {
		return Config{}, usageErrorf("invalid value %s for %s: must not be negative", v.queueTimeout, source("queue-timeout"))
	}
	if v.grace <= 0 {
		return Config{}, usageErrorf("invalid value %s for %s: must be positive", v.grace, source("grace"))
	}
	if v.shutdownTimeout < 0 {
		return Config{}, usageErrorf("invalid value %s for %s: must not be negative", v.shutdownTimeout, source("shutdown-timeout"))
	}
	cfg.ShutdownTimeout = v.shutdownTimeout
	if cfg.Limits, err = parseFrontEndLimits(v, codeLimit, source); err != nil {
		return Config{}, err
	}
	allowNet, err := parseAllowNet(v.allowNet)
	if err != nil {
		return Config{}, usageErrorf("invalid value %q for %s: %w", v.allowNet, source("allow-net"), err)
	}
	if allowNet != nil && v.disableNetworking {
		// Either answer would surprise someone: refuse rather than guess.
		return Config{}, usageErrorf("%s and %s exclude each other", source("allow-net"), source("disable-networking"))
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

	for _, loc := range []struct{ name, value string }{{"index-url", v.indexURL}, {"pyodide-index-url", v.pyodideIndexURL}} {
		if loc.value == "" && loc.name == "pyodide-index-url" {
			continue
		}
		if err := packages.CheckLocation(loc.value); err != nil {
			return Config{}, usageErrorf("invalid value %q for %s: %w", loc.value, source(loc.name), err)
		}
	}
	deps := splitDeps(v.deps)
	for _, d := range deps {
		if _, err := packages.ParseRequirement(d); err != nil {
			return Config{}, usageErrorf("invalid value %q for %s: %w", v.deps, source("deps"), err)
		}
	}

	cfg.Supervisor = supervisor.Config{
		Deno:            deno,
		CacheDir:        cacheDir,
		Workers:         v.workers,
		Timeout:         v.timeout,
		OutputLimit:     int(outputLimit),
		MemoryLimit:     memoryLimit,
		Deps:            deps,
		IndexURL:        v.indexURL,
		PyodideIndexURL: v.pyodideIndexURL,
		Offline:         v.offline,
		Networking:      !v.disableNetworking,
		AllowNet:        allowNet,
		Warm:            warm,
		Queue:           queue,
		QueueTimeout:    v.queueTimeout,
		CodeLimit:       int(codeLimit),
		Grace:           v.grace,
	}.WithDefaults()
	return cfg, nil
}

// parseFrontEndLimits checks the flags of the front end's limits; source
// names where a flag's value came from.
func parseFrontEndLimits(v flagValues, codeLimit int64, source func(string) string) (FrontEndLimits, error) {
	l := defaultFrontEndLimits(codeLimit)
	if v.requestLimit != "" {
		n, err := parseBytes(v.requestLimit, math.MaxInt)
		if err != nil {
			return l, usageErrorf("invalid value %q for %s: %w", v.requestLimit, source("request-limit"), err)
		}
		if n > 0 && codeLimit > 0 && n < codeLimit {
			// Code under the code limit could not be sent: refuse rather
			// than let such calls fail with a less helpful error.
			return l, usageErrorf("invalid value %q for %s: below %s (%s)", v.requestLimit, source("request-limit"),
				source("code-limit"), humanize.IBytes(uint64(codeLimit)))
		}
		l.RequestLimit = n
	}
	if v.readTimeout <= 0 {
		return l, usageErrorf("invalid value %s for %s: must be positive", v.readTimeout, source("read-timeout"))
	}
	l.ReadTimeout = v.readTimeout
	for _, f := range []struct {
		name  string
		value int
		dst   *int
	}{{"max-connections", v.maxConnections, &l.MaxConnections}, {"max-mcp-sessions", v.maxMCPSessions, &l.MaxMCPSessions}} {
		if f.value < 0 {
			return l, usageErrorf("invalid value %d for %s: must not be negative", f.value, source(f.name))
		}
		*f.dst = f.value
	}
	if v.mcpSessionIdle < 0 {
		return l, usageErrorf("invalid value %s for %s: must not be negative", v.mcpSessionIdle, source("mcp-session-idle"))
	}
	l.MCPSessionIdle = v.mcpSessionIdle
	origins, err := parseAllowOrigin(v.allowOrigin)
	if err != nil {
		return l, usageErrorf("invalid value %q for %s: %w", v.allowOrigin, source("allow-origin"), err)
	}
	l.AllowOrigins = origins
	return l, nil
}

// parseBytes parses a size such as 512MiB, 1GB or 1048576 (bytes), at most
// limit. Units follow go-humanize: KiB/MiB/GiB are powers of 1024, kB/MB/GB
// (and k/M/G) powers of 1000.
func parseBytes(s string, limit uint64) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("not a size such as 512MiB: %w", err)
	}
	if n > limit {
		return 0, errors.New("too large")
	}
	return int64(n), nil
}

// splitDeps splits --deps at commas, as upstream did, dropping empty entries.
func splitDeps(s string) []string {
	var deps []string
	for _, dep := range strings.Split(s, ",") {
		if dep = strings.TrimSpace(dep); dep != "" {
			deps = append(deps, dep)
		}
	}
	return deps
}

// parseAllowNet splits --allow-net at commas and checks each host; nil when
// the flag is not set. A set flag that names no host is an error: it would
// mean either everything or nothing.
func parseAllowNet(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var hosts []string
	for entry := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		host, err := permissions.ParseHost(entry)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	if len(hosts) == 0 {
		return nil, errors.New("no host given; use --disable-networking for no network at all")
	}
	return hosts, nil
}
