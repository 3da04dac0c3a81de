package config

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// fakeEnv is an Environment with fixed answers.
type fakeEnv struct {
	vars     map[string]string
	denoPath string // "" when deno is not on PATH
	cacheDir string // "" when unknown
	home     string // "" when unknown
}

func (f fakeEnv) environment() Environment {
	return Environment{
		LookupEnv: func(key string) (string, bool) {
			v, ok := f.vars[key]
			return v, ok
		},
		LookPath: func(string) (string, error) {
			if f.denoPath == "" {
				return "", errors.New("not found")
			}
			return f.denoPath, nil
		},
		UserCacheDir: func() (string, error) {
			if f.cacheDir == "" {
				return "", errors.New("no cache dir")
			}
			return f.cacheDir, nil
		},
		UserHomeDir: func() (string, error) {
			if f.home == "" {
				return "", errors.New("no home")
			}
			return f.home, nil
		},
	}
}

// standardEnv has deno on PATH and a cache directory.
func standardEnv() fakeEnv {
	return fakeEnv{denoPath: "/usr/bin/deno", cacheDir: "/home/u/.cache", home: "/home/u"}
}

// defaultConfig is the configuration of "stdio" in standardEnv.
func defaultConfig() Config {
	return Config{
		Mode:       ModeStdio,
		Host:       "127.0.0.1",
		Port:       3001,
		ReturnMode: ReturnXML,
		LogLevel:   zapcore.WarnLevel,
		Supervisor: Supervisor{
			Deno:         "/usr/bin/deno",
			CacheDir:     "/home/u/.cache/mcp-run-python",
			Workers:      2,
			Timeout:      60 * time.Second,
			OutputLimit:  1 << 20,
			MemoryLimit:  1 << 30,
			Networking:   true,
			IndexURL:     "https://pypi.org/simple/",
			QueueTimeout: 30 * time.Second,

			MaxCallsPerPrincipal: 1,
			CodeLimit:            1 << 20,
			Grace:                2 * time.Second,
			Files:                true,
			FilesLimit:           32 << 20,
			MountBytes:           64 << 20,
			MountFiles:           10_000,
			CacheLimit:           4 << 30,
			ToolCalls:            1000,
			SessionIdleCPU:       0.1,
		},
		ShutdownTimeout: 10 * time.Second,
		Limits: Limits{
			RequestLimit:   8 << 20,
			ReadTimeout:    30 * time.Second,
			MaxConnections: 1024,
			MaxMCPSessions: 256,
			MCPSessionIdle: 30 * time.Minute,

			MaxMCPSessionsPerPrincipal: 128,
		},
		ToolSchema:      SchemaJSR,
		SessionIdle:     30 * time.Minute,
		MaxSessions:     4,
		FilesTTL:        30 * time.Minute,
		FilesStoreLimit: 1 << 30,
		MaxFiles:        10_000,

		MaxSessionsPerPrincipal:     2,
		MaxFilesPerPrincipal:        5_000,
		FilesStoreLimitPerPrincipal: 512 << 20,
		ImageLimit:                  1 << 20,
		TasksPerPrincipal:           16,
		TaskRetention:               10 * time.Minute,
		TaskResultsLimit:            128 << 20,
		MaxTaskResults:              1024,
		Tools:                       Tools{ResultLimit: 1 << 20},
		Ask: Ask{
			Requests: 100, Batch: 64, PromptBytes: 256 << 10, AnswerBytes: 64 << 10, MaxTokens: 4096,
			Wait: 5 * time.Minute, Concurrency: 8, ParkTimeout: 5 * time.Minute, ParkedPerPrincipal: 4,
		},
	}
}

// TestParseConfig runs on every host with Linux's defaults; the defaults of
// each system are tested in paths_test.go.
func TestParseConfig(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    fakeEnv
		change func(*Config)
	}{
		{"defaults", []string{"stdio"}, standardEnv(), nil},
		{"flags after the mode", []string{"sse", "--port", "8080", "--host", "0.0.0.0"}, standardEnv(),
			func(c *Config) { c.Mode, c.Port, c.Host = ModeSSE, 8080, "0.0.0.0" }},
		{"flags before the mode", []string{"--port=8080", "--return-mode", "json", "streamable_http"}, standardEnv(),
			func(c *Config) { c.Mode, c.Port, c.ReturnMode = ModeStreamableHTTP, 8080, ReturnJSON }},
		{"hyphenated streamable-http", []string{"streamable-http"}, standardEnv(),
			func(c *Config) { c.Mode = ModeStreamableHTTP }},
		{"hyphenated streamable-http-stateless", []string{"streamable-http-stateless"}, standardEnv(),
			func(c *Config) { c.Mode = ModeStreamableHTTPStateless }},
		{"warmup", []string{"warmup"}, standardEnv(), func(c *Config) { c.Mode = ModeWarmup }},
		{"example", []string{"example"}, standardEnv(), func(c *Config) { c.Mode = ModeExample }},
		{"cache", []string{"cache"}, standardEnv(), func(c *Config) { c.Mode = ModeCache }},
		{"fetch packages", []string{"fetch", "numpy", "pandas>=2", "--offline=false"}, standardEnv(),
			func(c *Config) { c.Mode, c.Fetch = ModeFetch, []string{"numpy", "pandas>=2"} }},
		{"fetch --deps alone", []string{"--deps", "numpy", "fetch"}, standardEnv(),
			func(c *Config) { c.Mode, c.Supervisor.Deps = ModeFetch, []string{"numpy"} }},
		{"fetch into a mirror", []string{"fetch", "--mirror", "mirror", "pandas"}, standardEnv(),
			func(c *Config) { c.Mode, c.Fetch, c.Mirror = ModeFetch, []string{"pandas"}, "mirror" }},
		{"cache prune with a limit", []string{"cache", "--prune", "--cache-limit", "512MiB"}, standardEnv(),
			func(c *Config) { c.Mode, c.Prune, c.Supervisor.CacheLimit = ModeCache, true, 512<<20 }},
		{"cache limit in decimal units", []string{"stdio", "--cache-limit=10GB"}, standardEnv(),
			func(c *Config) { c.Supervisor.CacheLimit = 10e9 }},
		{"no cache limit", []string{"streamable_http", "--cache-limit", "0"}, standardEnv(),
			func(c *Config) { c.Mode, c.Supervisor.CacheLimit = ModeStreamableHTTP, 0 }},
		{"sampling and elicitation", []string{"stdio", "--sampling", "--elicitation", "--llm-requests", "0", "--park-timeout", "30s"}, standardEnv(),
			func(c *Config) {
				c.Ask.Sampling, c.Ask.Elicitation, c.Ask.Requests, c.Ask.ParkTimeout = true, true, 0, 30*time.Second
			}},
		{"an endpoint with its key from env", []string{"stdio", "--sampling", "--llm-url", "http://127.0.0.1:8000/v1", "--llm-model", "m"},
			withVars(standardEnv(), map[string]string{LLMKeyVariable: "sk-1"}),
			func(c *Config) {
				c.Ask.Sampling, c.Ask.LLMURL, c.Ask.LLMModel, c.Ask.LLMKey = true, "http://127.0.0.1:8000/v1", "m", "sk-1"
			}},
		{"a key without an endpoint goes nowhere", []string{"stdio", "--sampling"}, withVars(standardEnv(), map[string]string{LLMKeyVariable: "sk-1"}),
			func(c *Config) { c.Ask.Sampling = true }},
		{"cache limit from env", []string{"cache"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_CACHE_LIMIT": "1GiB"}),
			func(c *Config) { c.Mode, c.Supervisor.CacheLimit = ModeCache, 1<<30 }},
		{"cache limit flag wins over env", []string{"cache", "--cache-limit", "2GiB"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_CACHE_LIMIT": "1GiB"}),
			func(c *Config) { c.Mode, c.Supervisor.CacheLimit = ModeCache, 2<<30 }},
		// An action, not a setting: a stray variable neither prunes nor
		// stops a server.
		{"prune from env is ignored", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_PRUNE": "true"}), nil},
		{"prune from env is ignored in the cache mode", []string{"cache"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_PRUNE": "true"}),
			func(c *Config) { c.Mode = ModeCache }},
		{"deps split at commas", []string{"stdio", "--deps", "numpy, pydantic>=2,,httpx"}, standardEnv(),
			func(c *Config) { c.Supervisor.Deps = []string{"numpy", "pydantic>=2", "httpx"} }},
		{"package sources and offline", []string{"stdio", "--index-url", "/srv/simple", "--pyodide-index-url", "http://mirror.test/pyodide/", "--offline"}, standardEnv(),
			func(c *Config) {
				c.Supervisor.IndexURL, c.Supervisor.PyodideIndexURL, c.Supervisor.Offline = "/srv/simple", "http://mirror.test/pyodide/", true
			}},
		{"package sources from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_INDEX_URL":         "file:///srv/simple",
			"MCP_RUN_PYTHON_PYODIDE_INDEX_URL": "/srv/pyodide",
			"MCP_RUN_PYTHON_OFFLINE":           "1",
		}), func(c *Config) {
			c.Supervisor.IndexURL, c.Supervisor.PyodideIndexURL, c.Supervisor.Offline = "file:///srv/simple", "/srv/pyodide", true
		}},
		{"disable networking", []string{"stdio", "--disable-networking"}, standardEnv(),
			func(c *Config) { c.Supervisor.Networking = false }},
		{"allow net", []string{"stdio", "--allow-net", "Example.com:443, 127.0.0.1:8000,::1,[::1]:80,example.com:443,"}, standardEnv(),
			func(c *Config) {
				c.Supervisor.AllowNet = []string{"Example.com:443", " 127.0.0.1:8000", "::1", "[::1]:80", "example.com:443"} // package main checks them
			}},
		{"allow net from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_ALLOW_NET": "localhost"}),
			func(c *Config) { c.Supervisor.AllowNet = []string{"localhost"} }},
		{"allow private networks", []string{"stdio", "--allow-private-net"}, standardEnv(),
			func(c *Config) { c.Supervisor.PrivateNetworks = true }},
		{"limits and timeout", []string{"stdio", "--workers", "8", "--timeout", "1m30s", "--memory-limit", "512MiB", "--output-limit", "64KiB"}, standardEnv(),
			func(c *Config) {
				c.Supervisor.Workers, c.Supervisor.Timeout = 8, 90*time.Second
				c.Supervisor.MemoryLimit, c.Supervisor.OutputLimit = 512<<20, 64<<10
				c.Supervisor.MaxCallsPerPrincipal = 4
			}},
		{"service flags", []string{"sse", "--workers", "4", "--warm", "1", "--queue", "3", "--queue-timeout", "1m",
			"--code-limit", "64KiB", "--grace", "500ms", "--shutdown-timeout", "45s"}, standardEnv(),
			func(c *Config) {
				c.Mode = ModeSSE
				c.Supervisor.Workers, c.Supervisor.Warm, c.Supervisor.Queue = 4, 1, 3
				c.Supervisor.QueueTimeout, c.Supervisor.CodeLimit = time.Minute, 64<<10
				c.Supervisor.MaxCallsPerPrincipal = 2
				c.Supervisor.Grace, c.ShutdownTimeout = 500*time.Millisecond, 45*time.Second
			}},
		{"warm equal to workers", []string{"stdio", "--workers", "3", "--warm", "3"}, standardEnv(),
			func(c *Config) {
				c.Supervisor.Workers, c.Supervisor.Warm = 3, 3
				c.Supervisor.MaxCallsPerPrincipal = 2
			}},
		{"no limits and no shutdown wait", []string{"stdio", "--queue-timeout", "0", "--code-limit", "0", "--shutdown-timeout", "0s"}, standardEnv(),
			func(c *Config) { c.Supervisor.QueueTimeout, c.Supervisor.CodeLimit, c.ShutdownTimeout = 0, 0, 0 }},
		{"code limit in decimal units", []string{"stdio", "--code-limit", "100kB"}, standardEnv(),
			func(c *Config) { c.Supervisor.CodeLimit = 100000 }},
		{"env sets service flags", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_WORKERS":          "6",
			"MCP_RUN_PYTHON_WARM":             "2",
			"MCP_RUN_PYTHON_QUEUE":            "100",
			"MCP_RUN_PYTHON_QUEUE_TIMEOUT":    "5s",
			"MCP_RUN_PYTHON_CODE_LIMIT":       "2MiB",
			"MCP_RUN_PYTHON_GRACE":            "3s",
			"MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT": "1m",
		}), func(c *Config) {
			c.Supervisor.Workers, c.Supervisor.Warm, c.Supervisor.Queue = 6, 2, 100
			c.Supervisor.QueueTimeout, c.Supervisor.CodeLimit = 5*time.Second, 2<<20
			c.Supervisor.MaxCallsPerPrincipal = 3
			c.Supervisor.Grace, c.ShutdownTimeout = 3*time.Second, time.Minute
			c.Limits.RequestLimit = 13 << 20 // follows the code limit
		}},
		{"command line wins over env for service flags", []string{"stdio", "--warm", "1", "--shutdown-timeout", "3s"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_WARM":             "2",
			"MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT": "1m",
		}), func(c *Config) { c.Supervisor.Warm, c.ShutdownTimeout = 1, 3*time.Second }},
		{"decimal units and zero", []string{"stdio", "--memory-limit", "2GB", "--output-limit", "0"}, standardEnv(),
			func(c *Config) { c.Supervisor.MemoryLimit, c.Supervisor.OutputLimit = 2e9, 0 }},
		{"log level", []string{"stdio", "--log-level", "debug"}, standardEnv(),
			func(c *Config) { c.LogLevel = zapcore.DebugLevel }},
		{"calls per principal", []string{"stdio", "--max-calls-per-principal", "3"}, standardEnv(),
			func(c *Config) { c.Supervisor.MaxCallsPerPrincipal = 3 }},
		{"no limit of calls per principal", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_MAX_CALLS_PER_PRINCIPAL": "0"}),
			func(c *Config) { c.Supervisor.MaxCallsPerPrincipal = 0 }},
		{"oauth", []string{"streamable-http", "--oauth-issuer", "https://auth.example.com/realms/x", "--oauth-audience", "mcp-run-python",
			"--oauth-scopes", "mcp:run, mcp:files", "--public-url", "https://mcp.example.com/mcp", "--metrics-auth",
			"--tls-cert", "/etc/tls/crt.pem", "--tls-key", "/etc/tls/key.pem"}, standardEnv(),
			func(c *Config) {
				c.Mode = ModeStreamableHTTP
				c.Auth = Auth{OAuthIssuer: "https://auth.example.com/realms/x", OAuthAudience: "mcp-run-python", OAuthScopes: []string{"mcp:run", "mcp:files"},
					PublicURL: "https://mcp.example.com/mcp", Metrics: true}
				c.TLSCert, c.TLSKey = "/etc/tls/crt.pem", "/etc/tls/key.pem"
			}},
		{"code mode", []string{"stdio", "--tools-config", "/etc/mcp/servers.json", "--tools-allow", "calc.add,web.*",
			"--tool-calls", "50", "--tool-result-limit", "64KiB"}, standardEnv(),
			func(c *Config) {
				c.Tools = Tools{File: "/etc/mcp/servers.json", Allow: "calc.add,web.*", ResultLimit: 64 << 10}
				c.Supervisor.ToolCalls = 50
			}},
		{"code mode without limits", []string{"stdio", "--tools-config", "s.json", "--tool-calls", "0", "--tool-result-limit", "0"}, standardEnv(),
			func(c *Config) {
				c.Tools = Tools{File: "s.json"}
				c.Supervisor.ToolCalls = 0
			}},
		{"static tokens from env", []string{"sse"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_AUTH_TOKEN_FILE": "/etc/mcp/tokens"}),
			func(c *Config) { c.Mode, c.Auth.TokenFile = ModeSSE, "/etc/mcp/tokens" }},
		{"explicit deno and cache dir", []string{"stdio", "--deno", "/opt/deno", "--cache-dir", "/tmp/c"}, standardEnv(),
			func(c *Config) { c.Supervisor.Deno, c.Supervisor.CacheDir = "/opt/deno", "/tmp/c" }},
		{"deno from home when not on PATH", []string{"stdio"}, fakeEnv{cacheDir: "/home/u/.cache", home: "/home/u"},
			func(c *Config) { c.Supervisor.Deno = "/home/u/.deno/bin/deno" }},
		{"cache dir from home", []string{"stdio"}, fakeEnv{denoPath: "/usr/bin/deno", home: "/home/u"},
			func(c *Config) { c.Supervisor.CacheDir = "/home/u/.cache/mcp-run-python" }},
		{"deno from DENO_INSTALL when not on PATH", []string{"stdio"},
			withVars(fakeEnv{cacheDir: "/home/u/.cache", home: "/home/u"}, map[string]string{"DENO_INSTALL": "/opt/deno"}),
			func(c *Config) { c.Supervisor.Deno = "/opt/deno/bin/deno" }},
		{"MCP_RUN_PYTHON_DENO wins over discovery", []string{"stdio"},
			withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_DENO": "/x/deno", "DENO_INSTALL": "/opt/deno"}),
			func(c *Config) { c.Supervisor.Deno = "/x/deno" }},
		{"env sets flags", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_PORT":               "9000",
			"MCP_RUN_PYTHON_RETURN_MODE":        "json",
			"MCP_RUN_PYTHON_DEPS":               "a,b",
			"MCP_RUN_PYTHON_DISABLE_NETWORKING": "true",
			"MCP_RUN_PYTHON_MEMORY_LIMIT":       "256MiB",
			"MCP_RUN_PYTHON_TIMEOUT":            "5s",
			"MCP_RUN_PYTHON_LOG_LEVEL":          "error",
		}), func(c *Config) {
			c.Port, c.ReturnMode, c.LogLevel = 9000, ReturnJSON, zapcore.ErrorLevel
			c.Supervisor.Deps, c.Supervisor.Networking = []string{"a", "b"}, false
			c.Supervisor.MemoryLimit, c.Supervisor.Timeout = 256<<20, 5*time.Second
		}},
		{"command line wins over env", []string{"stdio", "--port", "8000"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_PORT": "9000",
		}), func(c *Config) { c.Port = 8000 }},
		{"empty env ignored", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_PORT": "",
		}), nil},
		{"env cannot ask for version or help", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_VERSION": "true",
			"MCP_RUN_PYTHON_HELP":    "true",
		}), nil},
		{"front end limits", []string{"sse", "--request-limit", "16MiB", "--read-timeout", "5s", "--max-connections", "100",
			"--max-mcp-sessions", "10", "--mcp-session-idle", "2m", "--allow-origin", "https://App.example.com:443/, http://localhost:5173"}, standardEnv(),
			func(c *Config) {
				c.Mode = ModeSSE
				c.Limits = Limits{RequestLimit: 16 << 20, ReadTimeout: 5 * time.Second, MaxConnections: 100,
					MaxMCPSessions: 10, MCPSessionIdle: 2 * time.Minute, MaxMCPSessionsPerPrincipal: 5,
					AllowOrigins: []string{"https://App.example.com:443/", "http://localhost:5173"}} // package main normalizes them
			}},
		{"front end limits off", []string{"stdio", "--request-limit", "0", "--max-connections", "0", "--max-mcp-sessions", "0",
			"--mcp-session-idle", "0", "--allow-origin", "*"}, standardEnv(),
			func(c *Config) {
				c.Limits.RequestLimit, c.Limits.MaxConnections, c.Limits.MaxMCPSessions, c.Limits.MCPSessionIdle = 0, 0, 0, 0
				c.Limits.MaxMCPSessionsPerPrincipal = 0
				c.Limits.AllowOrigins = []string{"*"}
			}},
		{"request limit follows a larger code limit", []string{"stdio", "--code-limit", "4MiB"}, standardEnv(),
			func(c *Config) { c.Supervisor.CodeLimit, c.Limits.RequestLimit = 4<<20, 25<<20 }},
		{"request limit keeps its default under a smaller code limit", []string{"stdio", "--code-limit", "0"}, standardEnv(),
			func(c *Config) { c.Supervisor.CodeLimit = 0 }},
		{"request limit follows a huge code limit without overflow", []string{"stdio", "--code-limit", strconv.Itoa(math.MaxInt)}, standardEnv(),
			func(c *Config) { c.Supervisor.CodeLimit, c.Limits.RequestLimit = math.MaxInt, math.MaxInt }},
		{"request limit equal to the code limit", []string{"stdio", "--request-limit", "1MiB"}, standardEnv(),
			func(c *Config) { c.Limits.RequestLimit = 1 << 20 }},
		{"env sets front end limits", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_REQUEST_LIMIT":    "2MB",
			"MCP_RUN_PYTHON_READ_TIMEOUT":     "1m",
			"MCP_RUN_PYTHON_MAX_CONNECTIONS":  "64",
			"MCP_RUN_PYTHON_MAX_MCP_SESSIONS": "8",
			"MCP_RUN_PYTHON_MCP_SESSION_IDLE": "90s",
			"MCP_RUN_PYTHON_ALLOW_ORIGIN":     "http://[::1]:8080",
		}), func(c *Config) {
			c.Limits = Limits{RequestLimit: 2e6, ReadTimeout: time.Minute, MaxConnections: 64,
				MaxMCPSessions: 8, MCPSessionIdle: 90 * time.Second, AllowOrigins: []string{"http://[::1]:8080"},
				MaxMCPSessionsPerPrincipal: 4}
		}},
		{"command line wins over env for front end limits", []string{"stdio", "--max-mcp-sessions", "3"},
			withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_MAX_MCP_SESSIONS": "8"}),
			func(c *Config) { c.Limits.MaxMCPSessions, c.Limits.MaxMCPSessionsPerPrincipal = 3, 2 }},
		{"pypi tool schema", []string{"stdio", "--tool-schema", "pypi"}, standardEnv(),
			func(c *Config) { c.ToolSchema, c.LogLevel = SchemaPyPI, zapcore.InfoLevel }},
		{"tool schema from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_TOOL_SCHEMA": "pypi"}),
			func(c *Config) { c.ToolSchema, c.LogLevel = SchemaPyPI, zapcore.InfoLevel }},
		{"sessions", []string{"stdio", "--sessions", "--session-idle", "5m", "--max-sessions", "1"}, standardEnv(),
			func(c *Config) {
				c.Sessions, c.SessionIdle, c.MaxSessions, c.MaxSessionsPerPrincipal = true, 5*time.Minute, 1, 1
			}},
		{"tasks", []string{"stdio", "--tasks", "--tasks-per-principal", "0", "--task-retention", "90s", "--task-results-limit", "64MiB", "--max-task-results", "0"}, standardEnv(),
			func(c *Config) {
				c.Tasks, c.TasksPerPrincipal, c.TaskRetention, c.TaskResultsLimit, c.MaxTaskResults = true, 0, 90*time.Second, 64<<20, 0
			}},
		{"session flags without --sessions", []string{"stdio", "--session-idle", "2h", "--max-sessions", "64"}, standardEnv(),
			func(c *Config) { c.SessionIdle, c.MaxSessions, c.MaxSessionsPerPrincipal = 2*time.Hour, 64, 32 }},
		{"sessions from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_SESSIONS":     "true",
			"MCP_RUN_PYTHON_SESSION_IDLE": "90s",
			"MCP_RUN_PYTHON_MAX_SESSIONS": "0x10",
		}), func(c *Config) {
			c.Sessions, c.SessionIdle, c.MaxSessions, c.MaxSessionsPerPrincipal = true, 90*time.Second, 16, 8
		}},
		{"caps per principal", []string{"stdio", "--max-sessions-per-principal", "3", "--max-mcp-sessions-per-principal", "0",
			"--max-files", "100", "--max-files-per-principal", "7", "--files-store-limit-per-principal", "64MiB"}, standardEnv(),
			func(c *Config) {
				c.MaxSessionsPerPrincipal, c.Limits.MaxMCPSessionsPerPrincipal = 3, 0
				c.MaxFiles, c.MaxFilesPerPrincipal, c.FilesStoreLimitPerPrincipal = 100, 7, 64<<20
			}},
		{"caps per principal follow the server's", []string{"stdio", "--max-files", "9", "--files-store-limit", "40MiB"}, standardEnv(),
			func(c *Config) {
				c.MaxFiles, c.MaxFilesPerPrincipal = 9, 5
				// Half would not hold one call's files (--files-limit).
				c.FilesStoreLimit, c.FilesStoreLimitPerPrincipal = 40<<20, 32<<20
			}},
		{"session idle cpu", []string{"stdio", "--session-idle-cpu", "0.5"}, standardEnv(),
			func(c *Config) { c.Supervisor.SessionIdleCPU = 0.5 }},
		{"no session idle cpu limit", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_SESSION_IDLE_CPU": "0"}),
			func(c *Config) { c.Supervisor.SessionIdleCPU = 0 }},
		{"sessions off on the command line over env", []string{"stdio", "--sessions=false"},
			withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_SESSIONS": "1"}), nil},
		{"files off", []string{"stdio", "--files=false"}, standardEnv(),
			func(c *Config) { c.Supervisor.Files = false }},
		{"files off from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_FILES": "0"}),
			func(c *Config) { c.Supervisor.Files = false }},
		{"files limits", []string{"stdio", "--files-limit", "8MiB", "--files-ttl", "1h", "--files-store-limit", "100MB", "--image-limit", "256KiB"}, standardEnv(),
			func(c *Config) {
				c.Supervisor.FilesLimit, c.FilesTTL, c.FilesStoreLimit, c.ImageLimit = 8<<20, time.Hour, 100e6, 256<<10
				c.FilesStoreLimitPerPrincipal = 50e6
			}},
		{"image limit 0 links every image", []string{"stdio", "--image-limit", "0"}, standardEnv(),
			func(c *Config) { c.ImageLimit = 0 }},
		{"files store limit equal to the files limit", []string{"stdio", "--files-limit", "1GiB"}, standardEnv(),
			func(c *Config) { c.Supervisor.FilesLimit, c.FilesStoreLimitPerPrincipal = 1<<30, 1<<30 }},
		{"files store limit below the files limit with files off", []string{"stdio", "--files=false", "--files-store-limit", "1"}, standardEnv(),
			func(c *Config) { c.Supervisor.Files, c.FilesStoreLimit, c.FilesStoreLimitPerPrincipal = false, 1, 1 }},
		{"files limits from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_FILES_LIMIT":       "2MB",
			"MCP_RUN_PYTHON_FILES_TTL":         "5m",
			"MCP_RUN_PYTHON_FILES_STORE_LIMIT": "2GiB",
			"MCP_RUN_PYTHON_IMAGE_LIMIT":       "0",
		}), func(c *Config) {
			c.Supervisor.FilesLimit, c.FilesTTL, c.FilesStoreLimit, c.ImageLimit = 2e6, 5*time.Minute, 2<<30, 0
			c.FilesStoreLimitPerPrincipal = 1 << 30
		}},
		{"mount limits", []string{"stdio", "--mount-limit", "1GB", "--mount-files", "1"}, standardEnv(),
			func(c *Config) { c.Supervisor.MountBytes, c.Supervisor.MountFiles = 1e9, 1 }},
		{"mount limits from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_MOUNT_LIMIT": "512KiB",
			"MCP_RUN_PYTHON_MOUNT_FILES": "100000",
		}), func(c *Config) { c.Supervisor.MountBytes, c.Supervisor.MountFiles = 512<<10, 100000 }},
		{"version needs no mode", []string{"--version"}, standardEnv(),
			func(c *Config) { *c = Config{Version: true} }},
		{"wrong env values do not stop version", []string{"--version"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_WORKERS": "0",
			"MCP_RUN_PYTHON_PORT":    "abc",
		}), func(c *Config) { *c = Config{Version: true} }},
		{"wrong env values do not stop help", []string{"-h"}, withVars(standardEnv(), map[string]string{
			"MCP_RUN_PYTHON_TIMEOUT": "soon",
		}), func(c *Config) { *c = Config{Help: true} }},
		{"help needs no mode", []string{"-h"}, standardEnv(),
			func(c *Config) { *c = Config{Help: true} }},
		{"long help", []string{"--help", "stdio"}, standardEnv(),
			func(c *Config) { *c = Config{Help: true} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.args, tt.env.environment(), "linux")
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			want := defaultConfig()
			if tt.change != nil {
				tt.change(&want)
			}
			got.given = nil // what package main checks, tested there
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q)\n got: %+v\nwant: %+v", tt.args, got, want)
			}
		})
	}
}

// TestParseConfigMounts covers --mount and MCP_RUN_PYTHON_MOUNT, one a
// line; package main parses the lines and resolves them (wire_test.go
// there).
func TestParseConfigMounts(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		mounts string // MCP_RUN_PYTHON_MOUNT, if not ""
		want   []string
	}{
		{name: "none", args: []string{"stdio"}},
		{name: "one", args: []string{"stdio", "--mount", "/a:/data"}, want: []string{"/a:/data"}},
		{name: "repeated", args: []string{"--mount", "/a:/a:rw", "stdio", "--mount=/b:/b:ro"}, want: []string{"/a:/a:rw", "/b:/b:ro"}},
		{name: "several from env, one a line", args: []string{"stdio"}, mounts: "/a:/a\r\n\n/b:/b:rw\n", want: []string{"/a:/a", "/b:/b:rw"}},
		{name: "command line wins over env", args: []string{"stdio", "--mount", "/b:/b"}, mounts: "/a:/a\n/a:/c", want: []string{"/b:/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := standardEnv()
			if tt.mounts != "" {
				env.vars = map[string]string{"MCP_RUN_PYTHON_MOUNT": tt.mounts}
			}
			got, err := parse(tt.args, env.environment(), "linux")
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if !reflect.DeepEqual(got.Supervisor.Mounts, tt.want) {
				t.Errorf("Parse(%q) mounts %q, want %q", tt.args, got.Supervisor.Mounts, tt.want)
			}
		})
	}
}

// withVars returns env with the environment variables vars.
func withVars(env fakeEnv, vars map[string]string) fakeEnv {
	env.vars = vars
	return env
}

func TestParseConfigUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     fakeEnv
		mention string // the message must name the culprit
	}{
		{"no mode", nil, standardEnv(), "no mode"},
		{"unknown mode", []string{"serve"}, standardEnv(), `"serve"`},
		{"two modes", []string{"stdio", "sse"}, standardEnv(), "one mode"},
		{"unknown flag", []string{"stdio", "--bogus"}, standardEnv(), "bogus"},
		{"flag without value", []string{"stdio", "--port"}, standardEnv(), "port"},
		{"port not a number", []string{"stdio", "--port", "abc"}, standardEnv(), "port"},
		{"port out of range", []string{"stdio", "--port", "70000"}, standardEnv(), "--port"},
		{"bad return mode", []string{"stdio", "--return-mode", "yaml"}, standardEnv(), "--return-mode"},
		{"zero workers", []string{"stdio", "--workers", "0"}, standardEnv(), "--workers"},
		{"bad timeout", []string{"stdio", "--timeout", "soon"}, standardEnv(), "timeout"},
		{"zero timeout", []string{"stdio", "--timeout", "0s"}, standardEnv(), "--timeout"},
		{"bad memory limit", []string{"stdio", "--memory-limit", "lots"}, standardEnv(), "--memory-limit"},
		{"negative output limit", []string{"stdio", "--output-limit", "-1KiB"}, standardEnv(), "--output-limit"},
		{"bad log level", []string{"stdio", "--log-level", "loud"}, standardEnv(), "--log-level"},
		{"zero warm", []string{"stdio", "--warm", "0"}, standardEnv(), "--warm"},
		{"warm above workers", []string{"stdio", "--workers", "2", "--warm", "3"}, standardEnv(), "need 1 to 2"},
		{"warm above workers from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_WARM": "5"}), "MCP_RUN_PYTHON_WARM"},
		{"zero queue", []string{"stdio", "--queue", "0"}, standardEnv(), "--queue"},
		{"negative calls per principal", []string{"stdio", "--max-calls-per-principal", "-1"}, standardEnv(), "--max-calls-per-principal"},
		{"issuer without audience", []string{"sse", "--oauth-issuer", "https://a.example"}, standardEnv(), "--oauth-audience"},
		{"endpoint without sampling", []string{"stdio", "--llm-url", "http://a.example/v1", "--llm-model", "m"}, standardEnv(), "are for --sampling"},
		{"endpoint without model", []string{"stdio", "--sampling", "--llm-url", "http://a.example/v1"}, standardEnv(), "--llm-url and --llm-model go together"},
		{"endpoint not a URL", []string{"stdio", "--sampling", "--llm-url", "a.example", "--llm-model", "m"}, standardEnv(), "--llm-url"},
		{"key file without endpoint", []string{"stdio", "--sampling", "--llm-key-file", "k"}, standardEnv(), "--llm-key-file needs --llm-url"},
		{"key file and key variable", []string{"stdio", "--sampling", "--llm-url", "http://a.example/v1", "--llm-model", "m", "--llm-key-file", "k"},
			withVars(standardEnv(), map[string]string{LLMKeyVariable: "sk-1"}), "--llm-key-file and MCP_RUN_PYTHON_LLM_KEY exclude each other"},
		{"zero park timeout", []string{"stdio", "--park-timeout", "0s"}, standardEnv(), "--park-timeout"},
		{"audience without issuer", []string{"sse", "--oauth-audience", "x"}, standardEnv(), "--oauth-issuer"},
		{"issuer not a URL", []string{"sse", "--oauth-issuer", "auth.example.com", "--oauth-audience", "x"}, standardEnv(), "--oauth-issuer"},
		{"bad scope", []string{"sse", "--oauth-issuer", "https://a.example", "--oauth-audience", "x", "--oauth-scopes", `a"b`}, standardEnv(), "--oauth-scopes"},
		{"oauth and token file", []string{"sse", "--oauth-issuer", "https://a.example", "--oauth-audience", "x", "--auth-token-file", "t"}, standardEnv(), "exclude each other"},
		{"tls cert without key", []string{"sse", "--tls-cert", "c.pem"}, standardEnv(), "--tls-key"},
		{"metrics auth without auth", []string{"sse", "--metrics-auth"}, standardEnv(), "--metrics-auth"},
		{"token file over stdio", []string{"stdio", "--auth-token-file", "t"}, standardEnv(), "--auth-token-file is for the HTTP modes"},
		{"tls over stdio", []string{"stdio", "--tls-cert", "c", "--tls-key", "k"}, standardEnv(), "--tls-cert is for the HTTP modes"},
		{"negative queue", []string{"stdio", "--queue", "-4"}, standardEnv(), "--queue"},
		{"queue not a number", []string{"stdio", "--queue", "many"}, standardEnv(), "queue"},
		{"negative queue timeout", []string{"stdio", "--queue-timeout", "-1s"}, standardEnv(), "--queue-timeout"},
		{"bad queue timeout", []string{"stdio", "--queue-timeout", "later"}, standardEnv(), "queue-timeout"},
		{"bad code limit", []string{"stdio", "--code-limit", "big"}, standardEnv(), "--code-limit"},
		{"negative code limit", []string{"stdio", "--code-limit", "-1"}, standardEnv(), "--code-limit"},
		{"zero grace", []string{"stdio", "--grace", "0s"}, standardEnv(), "--grace"},
		{"negative shutdown timeout", []string{"stdio", "--shutdown-timeout", "-5s"}, standardEnv(), "--shutdown-timeout"},
		{"bad shutdown timeout from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT": "soon"}), "MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT"},
		{"bad env value", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_PORT": "abc"}), "MCP_RUN_PYTHON_PORT"},
		{"bad env value checked later", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_RETURN_MODE": "yaml"}), "MCP_RUN_PYTHON_RETURN_MODE"},
		{"allow net without a host", []string{"stdio", "--allow-net", " , "}, standardEnv(), "no host given"},
		{"allow net and no network", []string{"stdio", "--allow-net", "a.com", "--disable-networking"}, standardEnv(), "--allow-net and --disable-networking exclude each other"},
		{"private networks and an allow list", []string{"stdio", "--allow-private-net", "--allow-net", "a.com"}, standardEnv(), "--allow-private-net and --allow-net exclude each other"},
		{"private networks and no network", []string{"stdio", "--allow-private-net", "--disable-networking"}, standardEnv(), "--allow-private-net and --disable-networking exclude each other"},
		{"no cache dir at all", []string{"stdio"}, fakeEnv{denoPath: "/usr/bin/deno"}, "--cache-dir"},
		{"bad request limit", []string{"stdio", "--request-limit", "huge"}, standardEnv(), "--request-limit"},
		{"negative request limit", []string{"stdio", "--request-limit", "-1"}, standardEnv(), "--request-limit"},
		{"request limit below the code limit", []string{"stdio", "--request-limit", "512KiB"}, standardEnv(), "below --code-limit (1.0 MiB)"},
		{"request limit from env below the code limit", []string{"stdio", "--code-limit", "2MiB"},
			withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_REQUEST_LIMIT": "1MiB"}), "MCP_RUN_PYTHON_REQUEST_LIMIT"},
		{"zero read timeout", []string{"stdio", "--read-timeout", "0s"}, standardEnv(), "--read-timeout"},
		{"negative max connections", []string{"stdio", "--max-connections", "-1"}, standardEnv(), "--max-connections"},
		{"negative max mcp sessions", []string{"stdio", "--max-mcp-sessions", "-2"}, standardEnv(), "--max-mcp-sessions"},
		{"negative mcp session idle", []string{"stdio", "--mcp-session-idle", "-1m"}, standardEnv(), "--mcp-session-idle"},
		{"empty host", []string{"stdio", "--host", ""}, standardEnv(), "--host"},
		{"bad bool from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_OFFLINE": "maybe"}), "MCP_RUN_PYTHON_OFFLINE"},
		{"wrong value with help", []string{"--help", "--workers", "0"}, standardEnv(), "--workers"},
		{"unknown tool schema", []string{"stdio", "--tool-schema", "mcp"}, standardEnv(), "--tool-schema"},
		{"tool schema in upper case", []string{"stdio", "--tool-schema", "PYPI"}, standardEnv(), "want jsr"},
		{"empty tool schema", []string{"stdio", "--tool-schema", ""}, standardEnv(), "--tool-schema"},
		{"bad sessions bool from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_SESSIONS": "yes"}), "MCP_RUN_PYTHON_SESSIONS"},
		{"zero session idle", []string{"stdio", "--sessions", "--session-idle", "0"}, standardEnv(), "--session-idle"},
		{"negative session idle", []string{"stdio", "--session-idle", "-1m"}, standardEnv(), "--session-idle"},
		{"bad session idle", []string{"stdio", "--session-idle", "forever"}, standardEnv(), "--session-idle"},
		{"zero max sessions", []string{"stdio", "--max-sessions", "0"}, standardEnv(), "--max-sessions"},
		{"negative max sessions", []string{"stdio", "--max-sessions", "-3"}, standardEnv(), "--max-sessions"},
		{"max sessions not a number", []string{"stdio", "--max-sessions", "few"}, standardEnv(), "--max-sessions"},
		{"negative session idle cpu", []string{"stdio", "--session-idle-cpu", "-0.1"}, standardEnv(), "--session-idle-cpu"},
		{"session idle cpu not a number", []string{"stdio", "--session-idle-cpu", "10%"}, standardEnv(), "--session-idle-cpu"},
		{"session idle cpu NaN", []string{"stdio", "--session-idle-cpu", "NaN"}, standardEnv(), "--session-idle-cpu"},
		{"bad files bool from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_FILES": "off"}), "MCP_RUN_PYTHON_FILES"},
		{"zero files limit", []string{"stdio", "--files-limit", "0"}, standardEnv(), "--files-limit"},
		{"negative files limit", []string{"stdio", "--files-limit", "-32MiB"}, standardEnv(), "--files-limit"},
		{"malformed files limit", []string{"stdio", "--files-limit", "32MiB/s"}, standardEnv(), "--files-limit"},
		{"zero files TTL", []string{"stdio", "--files-ttl", "0s"}, standardEnv(), "--files-ttl"},
		{"negative files TTL", []string{"stdio", "--files-ttl", "-5m"}, standardEnv(), "--files-ttl"},
		{"zero files store limit", []string{"stdio", "--files-store-limit", "0"}, standardEnv(), "--files-store-limit"},
		{"negative cache limit", []string{"cache", "--cache-limit", "-1GiB"}, standardEnv(), "--cache-limit"},
		{"malformed cache limit", []string{"cache", "--cache-limit", "4 gigs"}, standardEnv(), "--cache-limit"},
		{"malformed cache limit from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_CACHE_LIMIT": "lots"}), "MCP_RUN_PYTHON_CACHE_LIMIT"},
		{"prune with a server mode", []string{"stdio", "--prune"}, standardEnv(), "--prune is for the cache mode"},
		{"prune with warmup", []string{"--prune", "warmup"}, standardEnv(), "--prune is for the cache mode"},
		{"prune with an argument", []string{"cache", "--prune", "all"}, standardEnv(), "expected one mode"},
		{"fetch nothing", []string{"fetch"}, standardEnv(), "fetch needs the packages to fetch"},
		{"mirror with a server mode", []string{"stdio", "--mirror", "mirror"}, standardEnv(), "--mirror is for the fetch mode, not stdio"},
		{"fetch with TLS", []string{"fetch", "numpy", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, standardEnv(), "not fetch"},
		{"TLS with the cache mode", []string{"cache", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, standardEnv(), "not cache"},
		{"malformed files store limit", []string{"stdio", "--files-store-limit", "1 TiB of disk"}, standardEnv(), "--files-store-limit"},
		{"files store limit below the files limit", []string{"stdio", "--files-store-limit", "16MiB"}, standardEnv(), "below --files-limit (32 MiB)"},
		{"files kept per principal below the files limit", []string{"stdio", "--files-store-limit-per-principal", "16MiB"}, standardEnv(),
			"--files-store-limit-per-principal: below --files-limit (32 MiB)"},
		{"no files kept", []string{"stdio", "--max-files", "0"}, standardEnv(), "--max-files"},
		{"files limit from env above the files store limit", []string{"stdio"},
			withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_FILES_LIMIT": "2GiB"}), "below MCP_RUN_PYTHON_FILES_LIMIT"},
		{"negative image limit", []string{"stdio", "--image-limit", "-1"}, standardEnv(), "--image-limit"},
		{"malformed image limit", []string{"stdio", "--image-limit", "big"}, standardEnv(), "--image-limit"},
		{"zero mount limit", []string{"stdio", "--mount-limit", "0"}, standardEnv(), "--mount-limit"},
		{"negative mount limit", []string{"stdio", "--mount-limit", "-1GiB"}, standardEnv(), "--mount-limit"},
		{"malformed mount limit from env", []string{"stdio"}, withVars(standardEnv(), map[string]string{"MCP_RUN_PYTHON_MOUNT_LIMIT": "64 MiBs"}), "MCP_RUN_PYTHON_MOUNT_LIMIT"},
		{"zero mount files", []string{"stdio", "--mount-files", "0"}, standardEnv(), "--mount-files"},
		{"negative mount files", []string{"stdio", "--mount-files", "-10"}, standardEnv(), "--mount-files"},
		{"mount files not a number", []string{"stdio", "--mount-files", "1e4"}, standardEnv(), "--mount-files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args, tt.env.environment(), "linux")
			var usage *UsageError
			if !errors.As(err, &usage) {
				t.Fatalf("Parse(%q) error = %v, want a *UsageError", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

func TestUsageTextListsEveryFlagAndMode(t *testing.T) {
	text := Usage()
	for _, want := range []string{
		"--port", "--host", "--return-mode", "--deps", "--disable-networking", "--allow-net", "--allow-private-net", "--version", "-h, --help",
		"--workers", "--timeout", "--memory-limit", "--output-limit", "--deno", "--cache-dir", "--log-level",
		"--warm", "--queue", "--queue-timeout", "--code-limit", "--grace", "--shutdown-timeout",
		"--request-limit", "--read-timeout", "--max-connections", "--max-mcp-sessions", "--mcp-session-idle", "--allow-origin",
		"--tool-schema", "--sessions", "--session-idle", "--max-sessions", "--session-idle-cpu", "--files ", "--files-limit", "--files-ttl",
		"--files-store-limit", "--image-limit", "--mount HOST:SANDBOX[:ro|rw]", "--mount-limit", "--mount-files",
		"--cache-limit", `(default "4GiB")`, "--prune", "  cache  ",
		"MCP protocol sessions", "MCP_RUN_PYTHON_MOUNT, one a line",
		"stdio", "streamable_http_stateless", "sse", "warmup", "example", "MCP_RUN_PYTHON_",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("usage text lacks %q", want)
		}
	}
}

// TestParseConfigMessages pins whole messages: a wrong value is quoted as
// given and named with the flag, or with the environment variable that gave
// it (never with both); the reason comes from the flag's type, or from the
// rule between flags that it breaks.
func TestParseConfigMessages(t *testing.T) {
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"type", []string{"stdio", "--port", "abc"}, nil, `invalid value "abc" for --port: not a whole number`},
		{"type from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_PORT": "abc"},
			`invalid value "abc" for MCP_RUN_PYTHON_PORT: not a whole number`},
		{"range", []string{"stdio", "--port", "70000"}, nil, `invalid value "70000" for --port: need 0 to 65535`},
		{"at least one", []string{"stdio", "--workers", "0"}, nil, `invalid value "0" for --workers: need at least 1`},
		{"not negative from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_MAX_CONNECTIONS": "-1"},
			`invalid value "-1" for MCP_RUN_PYTHON_MAX_CONNECTIONS: must not be negative`},
		{"duration", []string{"stdio", "--timeout", "5"}, nil, `invalid value "5" for --timeout: not a duration such as 30s or 1m30s`},
		{"positive duration", []string{"stdio", "--grace", "0s"}, nil, `invalid value "0s" for --grace: must be positive`},
		{"duration from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_MCP_SESSION_IDLE": "-1m"},
			`invalid value "-1m" for MCP_RUN_PYTHON_MCP_SESSION_IDLE: must not be negative`},
		{"size", []string{"stdio", "--memory-limit", "lots"}, nil, `invalid value "lots" for --memory-limit: not a size such as 512MiB`},
		{"negative size", []string{"stdio", "--output-limit", "-1KiB"}, nil, `invalid value "-1KiB" for --output-limit: must not be negative`},
		{"choice", []string{"stdio", "--return-mode", "yaml"}, nil, `invalid value "yaml" for --return-mode: want xml or json`},
		{"choice from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_RETURN_MODE": "yaml"},
			`invalid value "yaml" for MCP_RUN_PYTHON_RETURN_MODE: want xml or json`},
		{"log level", []string{"stdio", "--log-level", "loud"}, nil, `invalid value "loud" for --log-level: unrecognized level: "loud"`},
		{"host", []string{"stdio", "--host", ""}, nil, `invalid value "" for --host: empty host`},
		{"empty host list", []string{"stdio", "--allow-net", ","}, nil,
			`invalid value "," for --allow-net: no host given; use --disable-networking for no network at all`},
		{"bool from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_OFFLINE": "maybe"},
			`invalid value "maybe" for MCP_RUN_PYTHON_OFFLINE: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"warm above workers", []string{"stdio", "--workers", "2", "--warm", "3"}, nil,
			`invalid value "3" for --warm: need 1 to 2 (the worker limit)`},
		{"warm from env above workers", []string{"stdio", "--workers", "2"}, map[string]string{"MCP_RUN_PYTHON_WARM": "0x3"},
			`invalid value "3" for MCP_RUN_PYTHON_WARM: need 1 to 2 (the worker limit)`},
		{"request limit below code limit", []string{"stdio", "--request-limit", "512KiB"}, nil,
			`invalid value "512KiB" for --request-limit: below --code-limit (1.0 MiB)`},
		{"request limit from env below code limit from env", []string{"stdio"},
			map[string]string{"MCP_RUN_PYTHON_REQUEST_LIMIT": "1MiB", "MCP_RUN_PYTHON_CODE_LIMIT": "2MiB"},
			`invalid value "1MiB" for MCP_RUN_PYTHON_REQUEST_LIMIT: below MCP_RUN_PYTHON_CODE_LIMIT (2.0 MiB)`},
		{"allow net and no network", []string{"stdio", "--disable-networking"}, map[string]string{"MCP_RUN_PYTHON_ALLOW_NET": "a.com"},
			`MCP_RUN_PYTHON_ALLOW_NET and --disable-networking exclude each other`},
		{"positive size", []string{"stdio", "--files-limit", "0"}, nil, `invalid value "0" for --files-limit: must be positive`},
		{"cache limit", []string{"cache", "--cache-limit", "4 gigs"}, nil, `invalid value "4 gigs" for --cache-limit: not a size such as 512MiB: unhandled size name: gigs`},
		{"prune outside the cache mode", []string{"sse", "--prune"}, nil, `--prune is for the cache mode, not sse`},
		{"files store limit below files limit", []string{"stdio", "--files-limit", "128MiB", "--files-store-limit", "64MiB"}, nil,
			`invalid value "64MiB" for --files-store-limit: below --files-limit (128 MiB)`},
		{"files store limit from env below files limit from env", []string{"stdio"},
			map[string]string{"MCP_RUN_PYTHON_FILES_STORE_LIMIT": "1MiB", "MCP_RUN_PYTHON_FILES_LIMIT": "2MiB"},
			`invalid value "1MiB" for MCP_RUN_PYTHON_FILES_STORE_LIMIT: below MCP_RUN_PYTHON_FILES_LIMIT (2.0 MiB)`},
		{"max sessions", []string{"stdio", "--max-sessions", "0"}, nil, `invalid value "0" for --max-sessions: need at least 1`},
		{"session idle from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_SESSION_IDLE": "0s"},
			`invalid value "0s" for MCP_RUN_PYTHON_SESSION_IDLE: must be positive`},
		{"tool schema", []string{"stdio", "--tool-schema", "npm"}, nil,
			`invalid value "npm" for --tool-schema: unknown tool schema "npm": want jsr (upstream's JSR release, the default) or pypi (its PyPI release 0.0.22)`},
		{"missing value", []string{"stdio", "--port"}, nil, `flag needs an argument: --port`},
		{"unknown flag", []string{"stdio", "--bogus"}, nil, `unknown flag: --bogus`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args, withVars(standardEnv(), tt.vars).environment(), "linux")
			var usage *UsageError
			if !errors.As(err, &usage) {
				t.Fatalf("Parse(%q) error = %v, want a *UsageError", tt.args, err)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error\n got: %s\nwant: %s", tt.args, err, tt.want)
			}
		})
	}
}
