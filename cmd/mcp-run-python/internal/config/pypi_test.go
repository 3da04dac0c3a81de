package config

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

// TestParsePyPICommandLine parses invocations of upstream's PyPI release
// (0.0.22, argparse): each must mean here what it meant there. The binary
// runs them in e2e_pypi_cli_test.go.
func TestParsePyPICommandLine(t *testing.T) {
	deps := func(d ...string) func(*Config) { return func(c *Config) { c.Supervisor.Deps = d } }
	port := func(mode Mode, p int) func(*Config) { return func(c *Config) { c.Mode, c.Port = mode, p } }
	level := func(l zapcore.Level) func(*Config) { return func(c *Config) { c.LogLevel = l } }
	noNetwork := func(c *Config) { c.Supervisor.Networking = false }
	tests := []struct {
		args   []string
		vars   map[string]string
		change func(*Config)
	}{
		{args: []string{"stdio"}},
		{args: []string{"--", "stdio"}},
		{args: []string{"streamable-http"}, change: func(c *Config) { c.Mode = ModeStreamableHTTP }},
		{args: []string{"streamable-http-stateless"}, change: func(c *Config) { c.Mode = ModeStreamableHTTPStateless }},
		{args: []string{"example"}, change: func(c *Config) { c.Mode = ModeExample }},

		{args: []string{"--port", "8080", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"--port=8080", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"--p", "8080", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"--po=8080", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"streamable-http", "--por", "8080"}, change: port(ModeStreamableHTTP, 8080)},
		// Python's int(): leading zeros are decimal, a sign and spaces pass.
		{args: []string{"--port", "08080", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"--port", "010", "streamable-http"}, change: port(ModeStreamableHTTP, 10)},
		{args: []string{"--port", " +8080 ", "streamable-http"}, change: port(ModeStreamableHTTP, 8080)},
		{args: []string{"--port", "000", "streamable-http"}, change: port(ModeStreamableHTTP, 0)},

		{args: []string{"--deps", "numpy,pandas", "stdio"}, change: deps("numpy", "pandas")},
		{args: []string{"--deps=numpy", "stdio"}, change: deps("numpy")},
		{args: []string{"--dependencies", "numpy,pandas", "stdio"}, change: deps("numpy", "pandas")},
		{args: []string{"--dependencies=numpy", "stdio"}, change: deps("numpy")},
		{args: []string{"--depe", "numpy", "stdio"}, change: deps("numpy")},
		{args: []string{"--dependencie=numpy", "stdio"}, change: deps("numpy")},
		{args: []string{"--deps", "numpy", "--dependencies", "six", "stdio"}, change: deps("six")}, // the last wins
		{args: []string{"--deps=", "stdio"}},

		{args: []string{"--disable-networking", "stdio"}, change: noNetwork},
		{args: []string{"--di", "stdio"}, change: noNetwork},
		{args: []string{"--disable-networkin", "stdio"}, change: noNetwork},

		{args: []string{"--verbose", "stdio"}, change: level(zapcore.DebugLevel)},
		{args: []string{"stdio", "--verbose"}, change: level(zapcore.DebugLevel)},
		{args: []string{"--verb", "stdio"}, change: level(zapcore.DebugLevel)},
		{args: []string{"--verbos", "--verbose", "stdio"}, change: level(zapcore.DebugLevel)},

		{args: []string{"--port", "3002", "--deps", "six", "--disable-networking", "--verbose", "streamable-http-stateless"},
			change: func(c *Config) {
				c.Mode, c.Port, c.Supervisor.Deps, c.Supervisor.Networking, c.LogLevel = ModeStreamableHTTPStateless, 3002, []string{"six"}, false, zapcore.DebugLevel
			}},

		// Moving over with --tool-schema pypi brings the release's default
		// level, info.
		{args: []string{"--tool-schema", "pypi", "stdio"},
			change: func(c *Config) { c.ToolSchema, c.LogLevel = SchemaPyPI, zapcore.InfoLevel }},
		{args: []string{"--tool-schema", "pypi", "--verbose", "stdio"},
			change: func(c *Config) { c.ToolSchema, c.LogLevel = SchemaPyPI, zapcore.DebugLevel }},
		{args: []string{"--tool-schema", "pypi", "--log-level", "error", "stdio"},
			change: func(c *Config) { c.ToolSchema, c.LogLevel = SchemaPyPI, zapcore.ErrorLevel }},

		// The command line wins over the environment.
		{args: []string{"stdio"}, vars: map[string]string{"MCP_RUN_PYTHON_VERBOSE": "1"}, change: level(zapcore.DebugLevel)},
		{args: []string{"--verbose", "stdio"}, vars: map[string]string{"MCP_RUN_PYTHON_LOG_LEVEL": "error"}, change: level(zapcore.DebugLevel)},
		{args: []string{"--log-level", "error", "stdio"}, vars: map[string]string{"MCP_RUN_PYTHON_VERBOSE": "1"}, change: level(zapcore.ErrorLevel)},
	}
	for _, tt := range tests {
		t.Run(pypiCaseName(tt.args, tt.vars), func(t *testing.T) {
			got, err := parse(tt.args, withVars(standardEnv(), tt.vars).environment(), "linux")
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

// TestParsePyPIActions checks the release's --version and -h, in each of
// their spellings there.
func TestParsePyPIActions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want Config
	}{
		{[]string{"--version"}, Config{Version: true}},
		{[]string{"--vers"}, Config{Version: true}},
		{[]string{"--versio"}, Config{Version: true}},
		{[]string{"--version", "stdio"}, Config{Version: true}},
		{[]string{"--deps", "numpy", "--version", "example"}, Config{Version: true}},
		{[]string{"-h"}, Config{Help: true}},
		{[]string{"--h"}, Config{Help: true}},
		{[]string{"--he"}, Config{Help: true}},
		{[]string{"--hel", "stdio"}, Config{Help: true}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parse(tt.args, standardEnv().environment(), "linux")
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
			}
		})
	}
}

// TestParsePyPIUsageErrors checks that what the release refused is refused
// here too: argparse's ambiguous prefixes, a missing mode; and --verbose with
// --log-level, which it did not have.
func TestParsePyPIUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		vars    map[string]string
		message string
	}{
		{args: []string{"--dep", "six", "stdio"}, message: "unknown flag: --dep"}, // --deps or --dependencies
		{args: []string{"--de", "six", "stdio"}, message: "unknown flag: --de"},
		{args: []string{"--d", "stdio"}, message: "unknown flag: --d"},
		{args: []string{"--v", "stdio"}, message: "unknown flag: --v"}, // --verbose or --version
		{args: []string{"--ver", "stdio"}, message: "unknown flag: --ver"},
		{args: []string{"--verbose"}, message: "no mode given"},
		{args: []string{"--verbose", "--log-level", "info", "stdio"}, message: "--verbose and --log-level exclude each other"},
		{args: []string{"stdio"}, vars: map[string]string{"MCP_RUN_PYTHON_VERBOSE": "true", "MCP_RUN_PYTHON_LOG_LEVEL": "info"},
			message: "MCP_RUN_PYTHON_VERBOSE and MCP_RUN_PYTHON_LOG_LEVEL exclude each other"},
		{args: []string{"--port", "-1", "streamable-http"}, message: `invalid value "-1" for --port: need 0 to 65535`},
		{args: []string{"--port", "65536", "streamable-http"}, message: `invalid value "65536" for --port: need 0 to 65535`},
		{args: []string{"--port", "08x", "streamable-http"}, message: `invalid value "08x" for --port: not a whole number`},
	} {
		t.Run(pypiCaseName(tt.args, tt.vars), func(t *testing.T) {
			_, err := parse(tt.args, withVars(standardEnv(), tt.vars).environment(), "linux")
			var usage *UsageError
			if !errors.As(err, &usage) || err.Error() != tt.message {
				t.Errorf("Parse(%q) error = %v, want the *UsageError %q", tt.args, err, tt.message)
			}
		})
	}
}

// pypiCaseName names a case by its arguments and the variables it sets.
func pypiCaseName(args []string, vars map[string]string) string {
	name := strings.Join(args, " ")
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		name += " " + key + "=" + vars[key]
	}
	return name
}
