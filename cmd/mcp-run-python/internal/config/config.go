// Package config is the command line: its modes and flags, the environment
// variables that stand in for the flags, and their defaults. It is a leaf,
// as cmd/go/internal/cfg is: it parses into plain values of its own types
// and checks them, importing no package of the program. Package main turns
// a Config into the supervisor's, the transport's and the MCP server's
// configurations (wire.go there), checking on the way the values whose rules
// are those packages' own (Config.Check).
//
// Each value has one default, computed in one place, and 0 means the same in
// a Config as in the configuration of the layer that takes the value: "no
// limit" for every limit whose flag takes 0, and for --warm and --queue,
// whose flags refuse 0, "not set", which the supervisor computes from
// --workers.
package config

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
)

// Mode is what the program does: serve MCP over a transport, prepare the
// runtime, run the demo script, show or prune the cache directory, or fetch
// packages into the package cache.
type Mode string

// The modes of the command line (DESIGN 1.1).
const (
	ModeStdio                   Mode = "stdio"
	ModeStreamableHTTP          Mode = "streamable_http"
	ModeStreamableHTTPStateless Mode = "streamable_http_stateless"
	ModeSSE                     Mode = "sse"
	ModeWarmup                  Mode = "warmup"
	ModeExample                 Mode = "example"
	ModeCache                   Mode = "cache"
	ModeFetch                   Mode = "fetch"
)

// parseMode accepts a mode as written on the command line, including the
// hyphenated spellings of the HTTP modes.
func parseMode(s string) (Mode, bool) {
	switch m := Mode(strings.ReplaceAll(s, "-", "_")); m {
	case ModeStdio, ModeStreamableHTTP, ModeStreamableHTTPStateless, ModeSSE, ModeWarmup, ModeExample, ModeCache, ModeFetch:
		return m, true
	}
	return "", false
}

// EnvPrefix starts the name of the environment variable that stands in for
// a flag: --return-mode is MCP_RUN_PYTHON_RETURN_MODE.
const EnvPrefix = "MCP_RUN_PYTHON_"

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

	defaultSessionIdle     = 30 * time.Minute
	defaultMaxSessions     = 4
	defaultTasksPerOwner   = 16
	defaultTaskRetention   = 10 * time.Minute
	defaultTaskResults     = "128MiB"
	defaultMaxTaskResults  = 1024
	defaultFilesTTL        = 30 * time.Minute
	defaultFilesStoreLimit = "1GiB"
	defaultMaxFiles        = 10_000
	defaultImageLimit      = "1MiB"
	defaultCacheLimit      = "4GiB"
	defaultToolResultLimit = "1MiB"

	// The bounds of what code asks (--sampling, --elicitation).
	defaultLLMRequests    = 100
	defaultLLMBatch       = 64
	defaultLLMConcurrency = 8
	defaultLLMPromptLimit = "256KiB"
	defaultLLMAnswerLimit = "64KiB"
	defaultLLMMaxTokens   = 4096
	defaultLLMWait        = 5 * time.Minute
	defaultParkTimeout    = 5 * time.Minute
	defaultParkedCalls    = 4

	// The command line's defaults of values that a program package also
	// defaults when left 0, for its other callers; package main's tests
	// hold each equal to that package's (wire_test.go there).
	defaultIndexURL   = "https://pypi.org/simple/" // packages.DefaultIndexURL
	defaultGrace      = 2 * time.Second            // supervisor.DefaultGrace
	defaultFilesLimit = "32MiB"                    // supervisor.DefaultFilesLimit
	defaultMountLimit = "64MiB"                    // supervisor.DefaultMountBytes
	defaultMountFiles = 10_000                     // supervisor.DefaultMountFiles

	// The defaults of values that the supervisor takes as they come, 0
	// meaning no limit there as here.
	defaultToolCalls      = 1000 // tool calls of one run
	defaultSessionIdleCPU = 0.1  // enough for a background task that wakes now and then, not for one that computes

	// The front end's defaults (the transport defaults the same when it is
	// given no limits: transport.DefaultLimits).
	defaultRequestLimit   = 8 << 20 // or more with --code-limit: requestLimitFor
	defaultReadTimeout    = 30 * time.Second
	defaultMaxConnections = 1024
	defaultMaxMCPSessions = 256
	defaultMCPSessionIdle = 30 * time.Minute
)

// Facts of the program that the help states. Package main's tests hold
// each equal to the program's (wire_test.go there).
const (
	// queuePerWorker is supervisor.DefaultQueuePerWorker: the supervisor
	// computes --queue's default, which the help describes.
	queuePerWorker = 64
	// workDir is supervisor.WorkDir, the working directory of code.
	workDir = "/home/pyodide"
)

// ReturnMode is the format of results, render.ReturnMode's values.
type ReturnMode string

// The result formats.
const (
	ReturnXML  ReturnMode = "xml"
	ReturnJSON ReturnMode = "json"
)

// ToolSchema is whose tools/list the server reproduces,
// mcpserver.ToolSchema's values.
type ToolSchema string

// The tool schemas.
const (
	SchemaJSR  ToolSchema = "jsr"  // upstream's JSR release
	SchemaPyPI ToolSchema = "pypi" // its PyPI release 0.0.22
)

// parseToolSchema reads a --tool-schema value.
func parseToolSchema(s string) (ToolSchema, error) {
	switch t := ToolSchema(s); t {
	case SchemaJSR, SchemaPyPI:
		return t, nil
	}
	return "", fmt.Errorf("unknown tool schema %q: want jsr (upstream's JSR release, the default) or pypi (its PyPI release 0.0.22)", s)
}

// Config is everything the command line and the environment decide.
type Config struct {
	Mode       Mode
	Host       string
	Port       int
	ReturnMode ReturnMode
	LogLevel   zapcore.Level
	Supervisor Supervisor
	// ShutdownTimeout is how long running calls get to finish after SIGTERM
	// or SIGINT before they are cancelled; 0 cancels them at once.
	ShutdownTimeout time.Duration
	// Limits bound what callers can make the MCP front end hold.
	Limits Limits
	// ToolSchema is whose tools/list the server reproduces.
	ToolSchema ToolSchema

	// Sessions offers Python sessions: the tools create_session,
	// list_session_files and close_session, and run_python_code's
	// session_id. SessionIdle and MaxSessions are set, and unused, without.
	Sessions bool
	// SessionIdle is how long a session may go without a call before it
	// ends; above 0.
	SessionIdle time.Duration
	// MaxSessions is how many sessions may live at once; at least 1.
	MaxSessions int
	// The caps per principal (per MCP session without authentication; not
	// over stdio, which has one client), 0 for none: live Python sessions,
	// and the returned files kept, in number and bytes. The cap on MCP
	// sessions per principal is in Limits.
	MaxSessionsPerPrincipal     int
	MaxFilesPerPrincipal        int
	FilesStoreLimitPerPrincipal int64
	// MaxFiles is how many returned files the server keeps; at least 1.
	MaxFiles int
	// Tasks makes run_python_code task-capable: a client may start a call
	// as a task, poll it, fetch its result later and cancel it.
	// TasksPerPrincipal bounds the tasks, running or kept, of one
	// authenticated caller (one MCP session without authentication), 0 for
	// no limit; a task is kept for TaskRetention after it ends (above 0).
	// The results of ended tasks that the server keeps are bounded by
	// TaskResultsLimit bytes and MaxTaskResults, 0 for no limit.
	Tasks             bool
	TasksPerPrincipal int
	TaskRetention     time.Duration
	TaskResultsLimit  int64
	MaxTaskResults    int
	// FilesTTL is how long the files returned by a call outside a session
	// stay readable as resources; above 0.
	FilesTTL time.Duration
	// FilesStoreLimit is the total size of the returned files the server
	// keeps; at least Supervisor.FilesLimit when Supervisor.Files is set.
	FilesStoreLimit int64
	// ImageLimit is the size of the largest image returned inline, as
	// image content; larger ones are only linked. 0: every image is linked.
	ImageLimit int64

	// Auth is who may call the HTTP modes; its zero value lets anyone.
	Auth Auth
	// TLSCert and TLSKey are the files of the HTTP modes' certificate and
	// key; both empty for plain HTTP.
	TLSCert, TLSKey string

	// Tools is code mode: the tools of other MCP servers that code may
	// call; its zero value offers none.
	Tools Tools

	// Ask is what code may ask of the client's model and of the person at
	// the client; its zero value asks nothing.
	Ask Ask

	// Prune, in the cache mode, removes the least recently used entries of
	// the cache directory beyond Supervisor.CacheLimit instead of listing
	// them.
	Prune bool

	// Fetch, in the fetch mode, are the requirements (PEP 508) to resolve
	// and download into the package cache, after the mode on the command
	// line; package main checks them.
	Fetch []string
	// Mirror, in the fetch mode, is a directory that also gets the
	// fetched files of Pyodide's built-in packages and its lock file, for
	// --pyodide-index-url; "" for none.
	Mirror string

	// Help and Version ask for the usage text or the version instead of a mode.
	Help    bool
	Version bool

	// given holds the values of the flags that package main checks with
	// the program's packages (see Check), by flag name.
	given map[string]given
}

// given is what the command line or the environment gave one flag.
type given struct {
	from   string   // the flag as --name, or the variable that set it
	values []string // every value given, in order
}

// Supervisor is what the flags decide of the workers; package main makes a
// supervisor.Config of it. Each field means what the supervisor's field of
// the same name means, 0 included.
type Supervisor struct {
	Deno        string        // path of the deno executable
	CacheDir    string        // runtime files, the Pyodide install and snapshots
	Workers     int           // live worker limit; also the calls run at once
	Timeout     time.Duration // wall-time limit of one call
	OutputLimit int           // bytes of output kept per call; 0 for no limit
	MemoryLimit int64         // resident bytes a worker may use; 0 for no limit
	// Deps are the requirements installed into every interpreter, as
	// given: package main checks them (PEP 508).
	Deps            []string
	IndexURL        string // package index, URL or directory, as given
	PyodideIndexURL string // "" for the pinned Pyodide release's host
	Offline         bool
	Networking      bool
	// AllowNet are, with Networking, the only hosts code may reach, as
	// given (package main checks them and drops repeats); nil: all.
	AllowNet        []string
	PrivateNetworks bool
	// Warm is how many idle workers are kept ready; 0 (not set) for
	// Workers, which the supervisor computes.
	Warm int
	// Queue is how many calls may wait for a worker; 0 (not set) for the
	// supervisor's default, queuePerWorker times Workers.
	Queue        int
	QueueTimeout time.Duration // 0 for no limit
	// MaxCallsPerPrincipal is how many workers the calls of one caller may
	// hold at once; 0 for no limit.
	MaxCallsPerPrincipal int
	CodeLimit            int           // largest code in bytes; 0 for no limit
	Grace                time.Duration // how long interrupted code gets to stop
	// SessionIdleCPU is the share of a core a session's worker may use
	// while no call runs; 0 for no limit.
	SessionIdleCPU float64
	Files          bool  // return the files a call leaves in its working directory
	FilesLimit     int64 // bytes of files one call may send back
	// Mounts are the --mount lines, HOST:SANDBOX[:ro|rw], as given:
	// package main parses them and resolves their host folders.
	Mounts     []string
	MountBytes int64 // bytes a mount may hold
	MountFiles int   // files a mount may hold
	// ToolCalls is how many tool calls one run may make; 0 for no limit.
	ToolCalls  int
	CacheLimit int64 // size of the cache directory; 0 for no limit
}

// Limits bound what callers can make the MCP front end hold; package main
// makes a transport.Limits of them, whose fields mean the same, 0 (no
// limit) included.
type Limits struct {
	RequestLimit               int64         // largest request in bytes
	ReadTimeout                time.Duration // to send a request's headers, then its body
	MaxConnections             int           // open HTTP connections
	MaxMCPSessions             int           // live MCP protocol sessions
	MaxMCPSessionsPerPrincipal int           // those of one authenticated caller
	MCPSessionIdle             time.Duration // an idle MCP session ends after it
	// AllowOrigins are the --allow-origin entries as given, or "*":
	// package main normalizes them.
	AllowOrigins []string
}

// Check passes each value given to flag name, on the command line or by its
// environment variable, to check, in order, and returns check's first error
// as the *UsageError that a wrong value of any flag gets. Package main
// checks with it the values whose rules are the program's packages': --deps,
// --index-url, --pyodide-index-url, --allow-net, --allow-origin and --mount.
func (c Config) Check(name string, check func(value string) error) error {
	g := c.given[name]
	for _, value := range g.values {
		if err := check(value); err != nil {
			return usageErrorf("invalid value %q for %s: %w", value, g.from, err)
		}
	}
	return nil
}

// Auth is how the HTTP modes authenticate their callers: by OAuth access
// tokens of an issuer (OAuthIssuer set), by static tokens (TokenFile set),
// or not at all.
type Auth struct {
	// OAuthIssuer is the authorization server whose tokens are accepted,
	// with OAuthAudience the audience they must name and OAuthScopes the
	// scopes they must grant.
	OAuthIssuer, OAuthAudience string
	OAuthScopes                []string
	// TokenFile holds the static tokens, one a line.
	TokenFile string
	// PublicURL is the MCP endpoint's URL as clients reach it, the
	// protected resource of the OAuth metadata; "" means one made of
	// --host, --port and TLS.
	PublicURL string
	// Metrics puts /metrics behind the tokens too.
	Metrics bool
}

// Tools configures code mode (see package toolbox).
type Tools struct {
	// File is the mcpServers JSON file that names the servers; "" for none.
	File string
	// Allow narrows the callable tools: comma-separated server.tool or
	// server.* entries; "" allows every tool.
	Allow string
	// ResultLimit is the largest tool result code may get, in bytes; 0
	// for no limit.
	ResultLimit int64
}

// LLMKeyVariable is the environment variable that holds the key of
// --llm-url's endpoint, the other way to give it than --llm-key-file: a
// key on the command line would show in every process listing, so no flag
// takes it.
const LLMKeyVariable = EnvPrefix + "LLM_KEY"

// Ask is what code may ask beyond the sandbox, and its bounds; package main
// makes the supervisor's AskLimits and the MCP server's AskOptions of it.
type Ask struct {
	// Sampling defines llm_query and llm_query_batched; Elicitation defines
	// ask_user, and makes input() ask the person.
	Sampling, Elicitation bool
	// LLMURL is the OpenAI-compatible endpoint that answers the model's
	// questions when the client cannot sample, with the model LLMModel; ""
	// for none.
	LLMURL, LLMModel string
	// LLMKeyFile is the file of the endpoint's key; LLMKey the key from
	// LLMKeyVariable. At most one is set.
	LLMKeyFile, LLMKey string
	// The bounds of supervisor.AskLimits, whose fields of the same names
	// mean the same, 0 (no limit) included.
	Requests, Batch          int
	PromptBytes, AnswerBytes int
	MaxTokens                int
	Wait                     time.Duration
	// Concurrency bounds the requests of one round to an older client or
	// the endpoint at once; 0 for no limit.
	Concurrency int
	// ParkTimeout is how long a call waits for a 2026-07-28 client's retry
	// with its answers; ParkedPerPrincipal bounds those calls of one
	// principal, 0 for no limit.
	ParkTimeout        time.Duration
	ParkedPerPrincipal int
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

// UsageError reports wrong arguments: the program prints it on stderr with a
// pointer to --help and exits with status 2.
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
	returnMode        ReturnMode
	deps              []string
	indexURL          string
	pyodideIndexURL   string
	offline           bool
	mirror            string
	disableNetworking bool
	allowNet          []string // nil when not set
	allowPrivateNet   bool
	version           bool
	help              bool
	workers           int
	timeout           time.Duration
	memoryLimit       int64
	outputLimit       int64
	deno              string
	cacheDir          string
	cacheLimit        int64
	prune             bool
	logLevel          zapcore.Level
	verbose           bool
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
	// The caps per principal, 0 for none; each is half its server-wide
	// cap (rounded up) unless set.
	maxMCPSessionsPerPrincipal  int
	maxSessionsPerPrincipal     int
	maxFilesPerPrincipal        int
	filesStoreLimitPerPrincipal int64
	maxFiles                    int
	mcpSessionIdle              time.Duration
	allowOrigins                []string
	toolSchema                  ToolSchema
	sessions                    bool
	sessionIdle                 time.Duration
	maxSessions                 int
	sessionIdleCPU              float64
	tasks                       bool
	tasksPerPrincipal           int
	taskRetention               time.Duration
	taskResultsLimit            int64
	maxTaskResults              int
	files                       bool
	filesLimit                  int64
	filesTTL                    time.Duration
	filesStoreLimit             int64
	imageLimit                  int64
	mounts                      []string
	mountLimit                  int64
	mountFiles                  int
	maxPerPrincipal             int
	oauthIssuer                 string
	oauthAudience               string
	oauthScopes                 []string
	authTokenFile               string
	publicURL                   string
	metricsAuth                 bool
	tlsCert                     string
	tlsKey                      string
	toolsConfig                 string
	toolsAllow                  string
	toolCalls                   int
	toolResultLimit             int64
	sampling                    bool
	elicitation                 bool
	llmURL                      string
	llmModel                    string
	llmKeyFile                  string
	llmRequests                 int
	llmBatch                    int
	llmConcurrency              int
	llmPromptLimit              int64
	llmAnswerLimit              int64
	llmMaxTokens                int
	llmWait                     time.Duration
	parkTimeout                 time.Duration
	maxParked                   int

	// given holds every value of the flags that package main checks
	// further (Config.Check), by flag name.
	given map[string][]string
}

// checkedLater returns value, a flag that package main also checks with a
// program package (Config.Check), keeping every value it is given.
func (v *flagValues) checkedLater(name string, value pflag.Value) pflag.Value {
	return givenFlag{Value: value, keep: func(s string) { v.given[name] = append(v.given[name], s) }}
}

// givenFlag is a flag that keeps each value it takes (flagValues.checkedLater).
type givenFlag struct {
	pflag.Value
	keep func(string)
}

func (f givenFlag) Set(s string) error {
	if err := f.Value.Set(s); err != nil {
		return err
	}
	f.keep(s)
	return nil
}

// newFlagSet defines the flags into v, with help for goos. Each flag checks
// its own value (see flagvalues.go); parse checks the rules between
// flags. Its output is discarded: errors are returned and printed by the
// caller.
func newFlagSet(v *flagValues, goos string) *pflag.FlagSet {
	v.given = map[string][]string{}
	fs := pflag.NewFlagSet("mcp-run-python", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.SetNormalizeFunc(pypiFlagNames())
	fs.Var(newPortFlag(&v.port, defaultPort), "port", "port of the HTTP modes")
	fs.Var(newCheckedString(&v.host, defaultHost, checkHost), "host", "address the HTTP modes listen on")
	fs.Var(newChoice(&v.returnMode, ReturnXML, ReturnXML, ReturnJSON), "return-mode", "result format: xml or json")
	fs.Var(newTextFlag(&v.toolSchema, SchemaJSR, parseToolSchema), "tool-schema", "tools as upstream lists them: jsr (its JSR release) or pypi (its PyPI release 0.0.22, with global_variables)")
	fs.Var(v.checkedLater("deps", &listFlag{&v.deps, parseDeps}), "deps", "comma-separated packages installed into every interpreter (--dependencies too)")
	fs.Var(v.checkedLater("index-url", newCheckedString(&v.indexURL, defaultIndexURL, checkedByMain)), "index-url", "package index: a PyPI-style simple API, as a URL or a local directory")
	fs.Var(v.checkedLater("pyodide-index-url", newCheckedString(&v.pyodideIndexURL, "", checkedByMain)), "pyodide-index-url", "where Pyodide's built-in packages are, as a URL or a local directory (default: the package host of the pinned Pyodide release)")
	fs.BoolVar(&v.offline, "offline", false, "install packages from the package cache only, never downloading")
	fs.StringVar(&v.mirror, "mirror", "", "fetch mode: also copy the fetched files of Pyodide's built-in packages, with its pyodide-lock.json, into this directory, which then serves as --pyodide-index-url")
	fs.BoolVar(&v.disableNetworking, "disable-networking", false, "deny Python code access to the network")
	fs.Var(v.checkedLater("allow-net", &listFlag{&v.allowNet, parseAllowNet}), "allow-net", "comma-separated hosts Python code may reach, and nothing else: host, host:port, [ipv6]:port (default: the internet, but not this machine, private networks or link-local addresses)")
	fs.BoolVar(&v.allowPrivateNet, "allow-private-net", false, "let Python code with the default network reach private networks too (10/8, 172.16/12, 192.168/16, 100.64/10); this machine stays out of reach")
	fs.Var(newIntFlag(&v.workers, defaultWorkers, 1, math.MaxInt), "workers", "live worker limit: calls run in parallel up to it")
	fs.Var(newIntFlag(&v.warm, 0, 1, math.MaxInt), "warm", "idle workers kept ready for calls, at most --workers (default: --workers)")
	fs.Var(newIntFlag(&v.queue, 0, 1, math.MaxInt), "queue", fmt.Sprintf("calls that may wait for a worker while all are busy (default: %d times --workers)", queuePerWorker))
	fs.Var(nonNegativeDuration(&v.queueTimeout, defaultQueueTimeout), "queue-timeout", "how long a call may wait for a worker; 0 for no limit")
	fs.Var(newIntFlag(&v.maxPerPrincipal, 0, 0, math.MaxInt), "max-calls-per-principal", "workers the calls of one authenticated caller may hold at once, the rest waiting their turn; 0 for no limit (default: half of --workers, rounded up)")
	fs.Var(positiveDuration(&v.timeout, defaultTimeout), "timeout", "time limit of one call, installing its packages included, such as 30s or 2m")
	fs.Var(positiveDuration(&v.grace, defaultGrace), "grace", "how long interrupted code gets to stop before its worker is killed")
	fs.Var(newByteSize(&v.memoryLimit, defaultMemoryLimit, math.MaxInt64), "memory-limit", "memory a worker may use, such as 512MiB; 0 for no limit")
	fs.Var(newByteSize(&v.outputLimit, defaultOutputLimit, math.MaxInt), "output-limit", "output, and return value, kept per call, such as 64KiB; 0 for no limit")
	fs.Var(newByteSize(&v.codeLimit, defaultCodeLimit, math.MaxInt), "code-limit", "largest python_code accepted, such as 256KiB; 0 for no limit")
	fs.Var(nonNegativeDuration(&v.shutdownTimeout, defaultShutdownTimeout), "shutdown-timeout", "how long running calls get to finish after SIGTERM or SIGINT before they are cancelled")
	fs.BoolVar(&v.sessions, "sessions", false, "offer Python sessions, whose variables and files last from call to call (tools create_session, list_session_files, close_session)")
	fs.Var(positiveDuration(&v.sessionIdle, defaultSessionIdle), "session-idle", "a Python session without calls for this long ends (with --sessions)")
	fs.Var(newIntFlag(&v.maxSessions, defaultMaxSessions, 1, math.MaxInt), "max-sessions", "live Python sessions, each holding a worker of its own (with --sessions)")
	fs.Var(newIntFlag(&v.maxSessionsPerPrincipal, 0, 0, math.MaxInt), "max-sessions-per-principal", "live Python sessions of one authenticated caller (of one MCP session without authentication); 0 for no limit (default: half of --max-sessions, rounded up)")
	fs.Var(newCoresFlag(&v.sessionIdleCPU, defaultSessionIdleCPU), "session-idle-cpu", "share of a core a Python session's worker may use on average while no call runs, with 10 s of it at once; past it the session ends (with --sessions); 0 for no limit")
	fs.BoolVar(&v.tasks, "tasks", false, "offer run_python_code as a task (MCP tasks): started at once, polled, its result fetched later, cancelled")
	fs.Var(newIntFlag(&v.tasksPerPrincipal, defaultTasksPerOwner, 0, math.MaxInt), "tasks-per-principal", "tasks, running or kept, of one authenticated caller (of one MCP session without authentication); 0 for no limit (with --tasks)")
	fs.Var(positiveDuration(&v.taskRetention, defaultTaskRetention), "task-retention", "how long a task and its result are kept after it ends (with --tasks)")
	fs.Var(newByteSize(&v.taskResultsLimit, defaultTaskResults, math.MaxInt64), "task-results-limit", "total size of the results of ended tasks the server keeps, past which the oldest are dropped; 0 for no limit (with --tasks)")
	fs.Var(newIntFlag(&v.maxTaskResults, defaultMaxTaskResults, 0, math.MaxInt), "max-task-results", "results of ended tasks the server keeps, past which the oldest are dropped; 0 for no limit (with --tasks)")
	fs.BoolVar(&v.files, "files", true, "return the files a call writes in its working directory ("+workDir+") as resources; --files=false for none")
	fs.Var(positiveByteSize(&v.filesLimit, defaultFilesLimit, math.MaxInt64), "files-limit", "bytes of files one call may send back: returned, written back to a mount, and figures, such as 64MiB")
	fs.Var(positiveDuration(&v.filesTTL, defaultFilesTTL), "files-ttl", "how long the files of a call outside a session stay readable as resources")
	fs.Var(positiveByteSize(&v.filesStoreLimit, defaultFilesStoreLimit, math.MaxInt64), "files-store-limit", "total size of the returned files the server keeps, at least --files-limit")
	fs.Var(newIntFlag(&v.maxFiles, defaultMaxFiles, 1, math.MaxInt), "max-files", "returned files the server keeps (empty ones too)")
	fs.Var(newByteSize(&v.filesStoreLimitPerPrincipal, "0", math.MaxInt64), "files-store-limit-per-principal", "size of the returned files the server keeps for one authenticated caller (one MCP session without authentication), at least --files-limit; 0 for no limit (default: half of --files-store-limit, at least --files-limit)")
	fs.Var(newIntFlag(&v.maxFilesPerPrincipal, 0, 0, math.MaxInt), "max-files-per-principal", "returned files the server keeps for one authenticated caller (one MCP session without authentication); 0 for no limit (default: half of --max-files, rounded up)")
	fs.Var(newByteSize(&v.imageLimit, defaultImageLimit, math.MaxInt64), "image-limit", "largest image returned inline as image content; larger ones are only linked; 0 links every image")
	fs.Var(v.checkedLater("mount", &mountFlag{&v.mounts}), "mount", "show host folder HOST to every interpreter at SANDBOX, read-only unless rw; repeat for more (in "+envName("mount")+", one a line)")
	fs.Var(positiveByteSize(&v.mountLimit, defaultMountLimit, math.MaxInt64), "mount-limit", "bytes a mount may hold, copy in, and a call write back to it")
	fs.Var(newIntFlag(&v.mountFiles, defaultMountFiles, 1, math.MaxInt), "mount-files", "files a mount may hold, copy in, and a call change in it")
	fs.Var(optionalByteSize(&v.requestLimit, &v.requestLimitSet, math.MaxInt), "request-limit", "largest request accepted, an HTTP request body or a stdio line, such as 16MiB; 0 for no limit (default: 8MiB, or 6 times --code-limit plus 1MiB if more)")
	fs.Var(positiveDuration(&v.readTimeout, defaultReadTimeout), "read-timeout", "how long an HTTP client may take to send a request's headers, then its body (and an SSE client its first message)")
	fs.Var(newIntFlag(&v.maxConnections, defaultMaxConnections, 0, math.MaxInt), "max-connections", "open HTTP connections; past it the one waiting longest for a request is closed (the new one refused if all are busy); 0 for no limit")
	fs.Var(newIntFlag(&v.maxMCPSessions, defaultMaxMCPSessions, 0, math.MaxInt), "max-mcp-sessions", "live MCP protocol sessions (Streamable HTTP sessions, SSE streams; not Python interpreters): past it a new one gets 503; 0 for no limit")
	fs.Var(newIntFlag(&v.maxMCPSessionsPerPrincipal, 0, 0, math.MaxInt), "max-mcp-sessions-per-principal", "live MCP protocol sessions of one authenticated caller; 0 for no limit (default: half of --max-mcp-sessions, rounded up)")
	fs.Var(nonNegativeDuration(&v.mcpSessionIdle, defaultMCPSessionIdle), "mcp-session-idle", "an MCP protocol session (not a Python interpreter) without requests for this long is ended; 0 to keep idle sessions")
	fs.Var(v.checkedLater("allow-origin", &listFlag{&v.allowOrigins, parseAllowOrigin}), "allow-origin", "comma-separated origins of web pages that may call the HTTP modes, such as https://app.example.com, or * for any; local pages may call a local server")
	fs.Var(newCheckedString(&v.oauthIssuer, "", checkOptionalHTTPURL), "oauth-issuer", "accept the OAuth access tokens of this authorization server (its issuer URL) in the HTTP modes; needs --oauth-audience")
	fs.StringVar(&v.oauthAudience, "oauth-audience", "", "the audience those tokens must name: this server")
	fs.Var(&listFlag{&v.oauthScopes, parseScopes}, "oauth-scopes", "comma-separated scopes those tokens must grant")
	fs.StringVar(&v.authTokenFile, "auth-token-file", "", "accept the bearer tokens in this file, one a line, in the HTTP modes (re-read on SIGHUP; readable by its owner and group only)")
	fs.Var(newCheckedString(&v.publicURL, "", checkOptionalHTTPURL), "public-url", "the MCP endpoint's URL as clients reach it, named in the OAuth metadata (default: from --host, --port and TLS)")
	fs.BoolVar(&v.metricsAuth, "metrics-auth", false, "serve /metrics only with a token, like MCP (/healthz and /readyz never need one)")
	fs.StringVar(&v.tlsCert, "tls-cert", "", "serve the HTTP modes over TLS with this certificate (PEM, chain included); needs --tls-key")
	fs.StringVar(&v.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fs.StringVar(&v.toolsConfig, "tools-config", "", "code mode: let code call the tools of the MCP servers this file names (the mcpServers JSON of desktop clients), as the async functions of the Python module mcp_tools")
	fs.StringVar(&v.toolsAllow, "tools-allow", "", "with --tools-config: the only tools code may call, as comma-separated server.tool or server.* (default: all)")
	fs.Var(newIntFlag(&v.toolCalls, defaultToolCalls, 0, math.MaxInt), "tool-calls", "with --tools-config: tool calls one run may make; 0 for no limit")
	fs.Var(newByteSize(&v.toolResultLimit, defaultToolResultLimit, math.MaxInt64), "tool-result-limit", "with --tools-config: the largest tool result code may get; 0 for no limit")
	fs.BoolVar(&v.sampling, "sampling", false, "let code ask the client's model: llm_query(prompt) and llm_query_batched(prompts), answered through the client's sampling, or by --llm-url")
	fs.BoolVar(&v.elicitation, "elicitation", false, "let code ask the person at the client: ask_user(message, schema) and input(), answered through the client's elicitation")
	fs.Var(newCheckedString(&v.llmURL, "", checkOptionalHTTPURL), "llm-url", "with --sampling: an OpenAI-compatible endpoint (its base URL, such as https://api.openai.com/v1) that answers llm_query for clients that cannot sample; needs --llm-model")
	fs.StringVar(&v.llmModel, "llm-model", "", "the model --llm-url answers with")
	fs.StringVar(&v.llmKeyFile, "llm-key-file", "", "the file of --llm-url's key, sent as a bearer token (or set "+LLMKeyVariable+"); code never sees it")
	fs.Var(newIntFlag(&v.llmRequests, defaultLLMRequests, 0, math.MaxInt), "llm-requests", "questions one call's code may ask, prompts of a batch each counted; 0 for no limit")
	fs.Var(newIntFlag(&v.llmBatch, defaultLLMBatch, 0, math.MaxInt), "llm-batch", "prompts of one llm_query_batched; 0 for no limit")
	fs.Var(newIntFlag(&v.llmConcurrency, defaultLLMConcurrency, 0, math.MaxInt), "llm-concurrency", "requests of one batch sent at once to --llm-url or to a client of a protocol before 2026-07-28; 0 for no limit")
	fs.Var(newByteSize(&v.llmPromptLimit, defaultLLMPromptLimit, math.MaxInt), "llm-prompt-limit", "largest prompt, system text, message or schema code may ask with; 0 for no limit")
	fs.Var(newByteSize(&v.llmAnswerLimit, defaultLLMAnswerLimit, math.MaxInt), "llm-answer-limit", "largest answer code gets; 0 for no limit")
	fs.Var(newIntFlag(&v.llmMaxTokens, defaultLLMMaxTokens, 0, math.MaxInt), "llm-max-tokens", "tokens one llm_query may ask the model for; 0 for no limit")
	fs.Var(nonNegativeDuration(&v.llmWait, defaultLLMWait), "llm-wait", "how long one question or batch may wait for its answers, not counted in --timeout; 0 for no limit")
	fs.Var(positiveDuration(&v.parkTimeout, defaultParkTimeout), "park-timeout", "how long a call whose code asks a 2026-07-28 client waits for the client's retry with the answers before it is cancelled")
	fs.Var(newIntFlag(&v.maxParked, defaultParkedCalls, 0, math.MaxInt), "max-parked-calls-per-principal", "calls of one authenticated caller (one MCP session without authentication) that wait at once for a 2026-07-28 client's answers; 0 for no limit")
	fs.StringVar(&v.deno, "deno", "", denoHelp(goos))
	fs.StringVar(&v.cacheDir, "cache-dir", "", cacheDirHelp(goos))
	fs.Var(newByteSize(&v.cacheLimit, defaultCacheLimit, math.MaxInt64), "cache-limit", "size the cache directory's worker programs, Pyodide installs, memory snapshots and package files may take; the least recently used beyond it are removed, never one in use; 0 for no limit")
	fs.BoolVar(&v.prune, "prune", false, "with the cache mode: remove the least recently used entries beyond --cache-limit instead of listing them")
	fs.Var(newLevelFlag(&v.logLevel, defaultLogLevel), "log-level", "level of the server's own log on stderr: debug, info, warn, error; info by default with --tool-schema pypi, as in that release")
	fs.BoolVar(&v.verbose, "verbose", false, "--log-level debug, as the PyPI release's --verbose")
	fs.BoolVar(&v.version, "version", false, "print the version and exit")
	fs.BoolVarP(&v.help, "help", "h", false, "print this help and exit")
	return fs
}

// Usage is the help that the program prints for -h, and after a usage
// error when it was given no arguments at all.
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
  cache                       list the cache directory's entries; with --prune, remove
                              the least recently used beyond --cache-limit
  fetch PKG...                resolve PKG... (and --deps) as a call would and download
                              them with their dependencies, hash-checked, into the
                              package cache, for --offline or a firewalled server later
  (streamable-http and streamable-http-stateless are accepted too)
  service ...                 install, start, stop or remove the server as a system
                              service: mcp-run-python service --help

The PyPI release's command line (uvx mcp-run-python) works as it is: --dependencies
is --deps, and its flags may be shortened as there, such as --verb for --verbose.

Flags (each can also be set with the environment variable MCP_RUN_PYTHON_<FLAG>,
upper case with '-' as '_', such as MCP_RUN_PYTHON_RETURN_MODE=json; the
command line wins):
` + newFlagSet(&v, runtime.GOOS).FlagUsages()
}

// settingsFromEnv lists the flags that the environment may set; --help,
// --version and --prune are actions, not settings, so a stray variable cannot
// trigger them.
func settingsFromEnv(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "version" && f.Name != "prune" {
			names = append(names, f.Name)
		}
	})
	return names
}

// FlagVariables returns the environment variables that stand in for flags
// on goos, so that the deployment checks (config/deploycheck, a module of
// their own) can refuse a variable that a manifest or the Dockerfile sets
// but that no flag reads; LLMKeyVariable, read beside them, is among them.
func FlagVariables(goos string) map[string]bool {
	var v flagValues
	vars := map[string]bool{}
	for _, name := range settingsFromEnv(newFlagSet(&v, goos)) {
		vars[envName(name)] = true
	}
	vars[LLMKeyVariable] = true // --llm-url's key, which no flag takes
	return vars
}

// envName returns the environment variable that stands in for flag name.
func envName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
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

// below returns a *UsageError for flag name set below the size of flag
// other.
func (s flagSources) below(name, other string, size int64) error {
	return s.invalid(name, "below %s (%s)", s.name(other), humanize.IBytes(uint64(size)))
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

// ParseGOOS is Parse with the defaults of goos rather than this machine's:
// the deployment checks (config/deploycheck) read the arguments of the
// Dockerfile and of the Kubernetes manifests as the Linux program would.
func ParseGOOS(args []string, env Environment, goos string) (Config, error) {
	return parse(args, env, goos)
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

	rest := fs.Args()
	if len(rest) == 0 {
		return Config{}, usageErrorf("no mode given")
	}
	mode, ok := parseMode(rest[0])
	switch {
	case !ok:
		return Config{}, usageErrorf("unknown mode %q", rest[0])
	case mode == ModeFetch && len(rest) == 1 && len(v.deps) == 0:
		return Config{}, usageErrorf("fetch needs the packages to fetch, such as: fetch numpy pandas")
	case mode != ModeFetch && len(rest) > 1:
		return Config{}, usageErrorf("expected one mode, got %q", rest)
	}
	if v.mirror != "" && mode != ModeFetch {
		return Config{}, usageErrorf("%s is for the fetch mode, not %s", src.name("mirror"), mode)
	}
	fetch := slices.Clone(rest[1:])
	if len(fetch) == 0 {
		fetch = nil
	}

	if v.prune && mode != ModeCache {
		return Config{}, usageErrorf("--prune is for the cache mode, not %s", mode)
	}
	sup, err := parseSupervisor(v, src, env, goos)
	if err != nil {
		return Config{}, err
	}
	if v.files && v.filesStoreLimit < v.filesLimit {
		// One call's files could not be kept.
		return Config{}, src.below("files-store-limit", "files-limit", v.filesLimit)
	}
	filesPerPrincipal := v.filesStoreLimitPerPrincipal
	switch {
	case !src.fs.Changed("files-store-limit-per-principal"):
		filesPerPrincipal = min(v.filesStoreLimit, max(v.filesLimit, v.filesStoreLimit-v.filesStoreLimit/2))
	case v.files && filesPerPrincipal > 0 && filesPerPrincipal < v.filesLimit:
		return Config{}, src.below("files-store-limit-per-principal", "files-limit", v.filesLimit)
	}
	limits, err := parseFrontEndLimits(v, src)
	if err != nil {
		return Config{}, err
	}
	var later map[string]given
	for name, values := range v.given {
		if later == nil {
			later = map[string]given{}
		}
		later[name] = given{from: src.name(name), values: values}
	}
	if err := checkHTTPOnly(v, src, mode); err != nil {
		return Config{}, err
	}
	logLevel, err := parseLogLevel(v, src)
	if err != nil {
		return Config{}, err
	}
	ask, err := parseAsk(v, src, env)
	if err != nil {
		return Config{}, err
	}

	return Config{
		Mode:            mode,
		Host:            v.host,
		Port:            v.port,
		ReturnMode:      v.returnMode,
		LogLevel:        logLevel,
		Supervisor:      sup,
		ShutdownTimeout: v.shutdownTimeout,
		Limits:          limits,
		ToolSchema:      v.toolSchema,
		Sessions:        v.sessions,
		SessionIdle:     v.sessionIdle,
		MaxSessions:     v.maxSessions,
		FilesTTL:        v.filesTTL,
		FilesStoreLimit: v.filesStoreLimit,
		MaxFiles:        v.maxFiles,

		MaxSessionsPerPrincipal:     halfUnlessSet(v.maxSessionsPerPrincipal, v.maxSessions, src.fs.Changed("max-sessions-per-principal")),
		MaxFilesPerPrincipal:        halfUnlessSet(v.maxFilesPerPrincipal, v.maxFiles, src.fs.Changed("max-files-per-principal")),
		FilesStoreLimitPerPrincipal: filesPerPrincipal,
		ImageLimit:                  v.imageLimit,
		Tasks:                       v.tasks,
		TasksPerPrincipal:           v.tasksPerPrincipal,
		TaskRetention:               v.taskRetention,
		TaskResultsLimit:            v.taskResultsLimit,
		MaxTaskResults:              v.maxTaskResults,
		Auth: Auth{
			OAuthIssuer: v.oauthIssuer, OAuthAudience: v.oauthAudience, OAuthScopes: v.oauthScopes,
			TokenFile: v.authTokenFile, PublicURL: v.publicURL, Metrics: v.metricsAuth,
		},
		TLSCert: v.tlsCert,
		TLSKey:  v.tlsKey,
		Tools:   Tools{File: v.toolsConfig, Allow: v.toolsAllow, ResultLimit: v.toolResultLimit},
		Ask:     ask,
		Prune:   v.prune,
		Fetch:   fetch,
		Mirror:  v.mirror,
		given:   later,
	}, nil
}

// checkHTTPOnly checks the flags of authentication and TLS, which only the
// HTTP modes have.
func checkHTTPOnly(v flagValues, src flagSources, mode Mode) error {
	switch {
	case v.oauthIssuer != "" && v.oauthAudience == "":
		return usageErrorf("%s needs %s: the audience its tokens name for this server", src.name("oauth-issuer"), src.name("oauth-audience"))
	case v.oauthIssuer == "" && (v.oauthAudience != "" || v.oauthScopes != nil):
		return usageErrorf("%s and %s need %s", src.name("oauth-audience"), src.name("oauth-scopes"), src.name("oauth-issuer"))
	case v.oauthIssuer != "" && v.authTokenFile != "":
		return usageErrorf("%s and %s exclude each other", src.name("oauth-issuer"), src.name("auth-token-file"))
	case (v.tlsCert == "") != (v.tlsKey == ""):
		return usageErrorf("%s and %s go together", src.name("tls-cert"), src.name("tls-key"))
	case v.metricsAuth && v.oauthIssuer == "" && v.authTokenFile == "":
		return usageErrorf("%s needs %s or %s", src.name("metrics-auth"), src.name("oauth-issuer"), src.name("auth-token-file"))
	}
	if mode == ModeStdio || mode == ModeWarmup || mode == ModeExample || mode == ModeCache || mode == ModeFetch {
		for _, name := range []string{"oauth-issuer", "auth-token-file", "public-url", "tls-cert"} {
			if src.fs.Lookup(name).Value.String() != "" {
				return usageErrorf("%s is for the HTTP modes, not %s", src.name(name), mode)
			}
		}
	}
	return nil
}

// parseSupervisor returns the workers' configuration of the flags, with the
// defaults that depend on goos and env.
func parseSupervisor(v flagValues, src flagSources, env Environment, goos string) (Supervisor, error) {
	if v.warm > v.workers {
		return Supervisor{}, src.invalid("warm", "need 1 to %d (the worker limit)", v.workers)
	}
	if v.allowNet != nil && v.disableNetworking {
		// Either answer would surprise someone: refuse rather than guess.
		return Supervisor{}, usageErrorf("%s and %s exclude each other", src.name("allow-net"), src.name("disable-networking"))
	}
	if v.allowPrivateNet && (v.allowNet != nil || v.disableNetworking) {
		other := "allow-net"
		if v.disableNetworking {
			other = "disable-networking"
		}
		// --allow-net lists private hosts itself; the flag is for the
		// default network only.
		return Supervisor{}, usageErrorf("%s and %s exclude each other", src.name("allow-private-net"), src.name(other))
	}
	deno := v.deno
	if deno == "" {
		deno = defaultDeno(goos, env)
	}
	cacheDir := v.cacheDir
	if cacheDir == "" {
		var err error
		if cacheDir, err = defaultCacheDir(goos, env); err != nil {
			return Supervisor{}, usageErrorf("no cache directory: %w; set --cache-dir", err)
		}
	}
	return Supervisor{
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
		PrivateNetworks: v.allowPrivateNet,
		Warm:            v.warm,  // 0 when not set, as for the supervisor
		Queue:           v.queue, // likewise
		QueueTimeout:    v.queueTimeout,

		MaxCallsPerPrincipal: halfUnlessSet(v.maxPerPrincipal, v.workers, src.fs.Changed("max-calls-per-principal")),
		CodeLimit:            int(v.codeLimit),
		Grace:                v.grace,
		Files:                v.files,
		FilesLimit:           v.filesLimit,
		Mounts:               v.mounts,
		MountBytes:           v.mountLimit,
		MountFiles:           v.mountFiles,
		CacheLimit:           v.cacheLimit,
		ToolCalls:            v.toolCalls,
		SessionIdleCPU:       v.sessionIdleCPU,
	}, nil
}

// parseAsk returns what code may ask, checking that the endpoint's flags
// come with --sampling and with each other.
func parseAsk(v flagValues, src flagSources, env Environment) (Ask, error) {
	key, _ := env.LookupEnv(LLMKeyVariable)
	switch {
	case (v.llmURL != "" || v.llmModel != "" || v.llmKeyFile != "") && !v.sampling:
		return Ask{}, usageErrorf("%s, %s and %s are for %s", src.name("llm-url"), src.name("llm-model"), src.name("llm-key-file"), src.name("sampling"))
	case (v.llmURL == "") != (v.llmModel == ""):
		return Ask{}, usageErrorf("%s and %s go together", src.name("llm-url"), src.name("llm-model"))
	case v.llmKeyFile != "" && v.llmURL == "":
		return Ask{}, usageErrorf("%s needs %s", src.name("llm-key-file"), src.name("llm-url"))
	case v.llmKeyFile != "" && key != "":
		return Ask{}, usageErrorf("%s and %s exclude each other", src.name("llm-key-file"), LLMKeyVariable)
	}
	if v.llmURL == "" {
		key = "" // sent nowhere
	}
	return Ask{
		Sampling: v.sampling, Elicitation: v.elicitation,
		LLMURL: v.llmURL, LLMModel: v.llmModel, LLMKeyFile: v.llmKeyFile, LLMKey: key,
		Requests: v.llmRequests, Batch: v.llmBatch,
		PromptBytes: int(v.llmPromptLimit), AnswerBytes: int(v.llmAnswerLimit),
		MaxTokens: v.llmMaxTokens, Wait: v.llmWait, Concurrency: v.llmConcurrency,
		ParkTimeout: v.parkTimeout, ParkedPerPrincipal: v.maxParked,
	}, nil
}

// halfUnlessSet is the value n of a cap per principal, or when it is not
// set, half of the server-wide cap all (rounded up; 0 for none).
func halfUnlessSet(n, all int, set bool) int {
	if set {
		return n
	}
	return all - all/2
}

// parseFrontEndLimits returns the front end's limits of the flags, with the
// request limit following the code limit unless it is set.
func parseFrontEndLimits(v flagValues, src flagSources) (Limits, error) {
	l := Limits{RequestLimit: requestLimitFor(v.codeLimit)}
	if v.requestLimitSet {
		if v.requestLimit > 0 && v.codeLimit > 0 && v.requestLimit < v.codeLimit {
			// Code under the code limit could not be sent: refuse rather
			// than let such calls fail with a less helpful error.
			return l, src.below("request-limit", "code-limit", v.codeLimit)
		}
		l.RequestLimit = v.requestLimit
	}
	l.ReadTimeout = v.readTimeout
	l.MaxConnections, l.MaxMCPSessions = v.maxConnections, v.maxMCPSessions
	l.MaxMCPSessionsPerPrincipal = halfUnlessSet(v.maxMCPSessionsPerPrincipal, v.maxMCPSessions, src.fs.Changed("max-mcp-sessions-per-principal"))
	l.MCPSessionIdle = v.mcpSessionIdle
	l.AllowOrigins = v.allowOrigins
	return l, nil
}

// requestLimitFor returns the default request limit for a code limit: big
// enough for the largest code escaped as JSON (6 bytes a byte at worst, and
// a megabyte for the rest of the request), at most math.MaxInt.
func requestLimitFor(codeLimit int64) int64 {
	if codeLimit > (math.MaxInt-1<<20)/6 {
		return math.MaxInt
	}
	return max(defaultRequestLimit, 6*codeLimit+1<<20)
}
