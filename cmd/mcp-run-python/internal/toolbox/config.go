// Package toolbox is the MCP client side of code mode: it connects to the
// MCP servers of an mcpServers file, keeps those connections up, and lets
// the supervisor list and call their tools for Python's mcp_tools module.
package toolbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
)

// Config is the tool servers of an mcpServers file, sorted by name; the
// disabled ones are left out.
type Config struct {
	Servers []ServerConfig
}

// Transport is how the toolbox reaches a server.
type Transport string

// The transports of ServerConfig.
const (
	Stdio          Transport = "stdio" // a command whose stdin and stdout carry MCP
	StreamableHTTP Transport = "http"  // MCP's Streamable HTTP
	SSE            Transport = "sse"   // the older HTTP+SSE transport
)

// ServerConfig is one tool server: a command (Stdio) or a URL (the HTTP
// transports).
type ServerConfig struct {
	Name      string
	Transport Transport
	Command   string
	Args      []string
	Env       map[string]string // added to the environment of Command
	URL       string
	Headers   map[string]string // sent with every HTTP request
}

// entry is one server as the file spells it. Pointers tell a key that is
// absent from one that is empty.
type entry struct {
	Type     string            `json:"type"`
	Command  *string           `json:"command"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	URL      *string           `json:"url"`
	Headers  map[string]string `json:"headers"`
	Disabled bool              `json:"disabled"`
}

// Load reads and parses the mcpServers file at path.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read the tools configuration: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse parses an mcpServers document, the format desktop MCP clients use.
// Keys beside mcpServers are ignored, so that a desktop client's own file
// can be used as it is; within a server, a key this package does not know
// is an error, since ignoring it could run a server differently from what
// its author meant.
func Parse(data []byte) (Config, error) {
	var doc struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Config{}, fmt.Errorf("parse the tools configuration: %w", err)
	}
	if doc.Servers == nil {
		return Config{}, errors.New(`the tools configuration has no "mcpServers" object`)
	}
	var cfg Config
	seen := make(map[string]string) // Identifier(name) -> name
	for _, name := range slices.Sorted(maps.Keys(doc.Servers)) {
		s, disabled, err := parseServer(name, doc.Servers[name])
		switch {
		case err != nil:
			return Config{}, fmt.Errorf("tool server %q: %w", name, err)
		case disabled:
			continue
		}
		if err := checkServerName(name); err != nil {
			return Config{}, err
		}
		id := Identifier(name)
		if other, ok := seen[id]; ok {
			return Config{}, fmt.Errorf("tool servers %q and %q are both mcp_tools.%s in Python: rename one", other, name, id)
		}
		seen[id] = name
		cfg.Servers = append(cfg.Servers, s)
	}
	return cfg, nil
}

// parseServer checks one server's entry, and reports whether it is
// disabled.
func parseServer(name string, raw json.RawMessage) (ServerConfig, bool, error) {
	var e entry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return ServerConfig{}, false, fmt.Errorf("parse: %w", err)
	}
	if e.Disabled {
		return ServerConfig{}, true, nil
	}
	s := ServerConfig{Name: name, Args: e.Args, Env: e.Env, Headers: e.Headers}
	switch {
	case e.Command != nil && e.URL != nil:
		return s, false, errors.New(`has both "command" and "url": give "command" for a local server, "url" for a remote one`)
	case e.Command == nil && e.URL == nil:
		return s, false, errors.New(`needs "command" (a local server) or "url" (a remote one)`)
	case e.Command != nil:
		return s, false, s.setCommand(*e.Command, e)
	default:
		return s, false, s.setURL(*e.URL, e)
	}
}

// setCommand makes s a stdio server.
func (s *ServerConfig) setCommand(command string, e entry) error {
	s.Transport, s.Command = Stdio, command
	switch {
	case e.Type != "" && e.Type != "stdio":
		return fmt.Errorf(`has "type": %q but a "command"`, e.Type)
	case strings.TrimSpace(command) == "":
		return errors.New(`has an empty "command"`)
	case e.Headers != nil:
		return errors.New(`has "headers", which only a "url" server takes`)
	}
	for k := range e.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf(`has an invalid "env" name %q`, k)
		}
	}
	return nil
}

// setURL makes s an HTTP server.
func (s *ServerConfig) setURL(rawURL string, e entry) error {
	s.URL = rawURL
	switch e.Type {
	case "", "http", "streamable-http", "streamableHttp":
		s.Transport = StreamableHTTP
	case "sse":
		s.Transport = SSE
	default:
		return fmt.Errorf(`has "type": %q but a "url"; want "http" or "sse"`, e.Type)
	}
	if e.Args != nil || e.Env != nil {
		return errors.New(`has "args" or "env", which only a "command" server takes`)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf(`has an invalid "url": %w`, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf(`has "url" %q; want an http:// or https:// URL`, rawURL)
	}
	return nil
}

// checkServerName refuses a name that does not make a Python attribute
// code can write as mcp_tools.<name>.
func checkServerName(name string) error {
	id := Identifier(name)
	switch {
	case name == "":
		return errors.New("a tool server has an empty name")
	case !isPythonIdentifier(id):
		return fmt.Errorf("tool server %q: the name must make a Python identifier (mcp_tools.%s is not one)", name, id)
	case id == "ToolError", strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		// ToolError is mcp_tools' exception, and dunder names are the
		// module's own.
		return fmt.Errorf("tool server %q: mcp_tools.%s is taken; rename the server", name, id)
	}
	return nil
}

// Identifier is the Python name of a server or tool in mcp_tools: name with
// every character outside [A-Za-z0-9_] replaced by "_". Python's mcp_tools
// module (js/tools.py) maps names the same way, so the two must change
// together.
func Identifier(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// pythonKeywords are the names Python's parser will not take after a dot.
const pythonKeywords = "False None True and as assert async await break class continue def del elif else except " +
	"finally for from global if import in is lambda nonlocal not or pass raise return try while with yield"

// isPythonIdentifier reports whether code can write id after a dot.
func isPythonIdentifier(id string) bool {
	return id != "" && !(id[0] >= '0' && id[0] <= '9') && Identifier(id) == id &&
		!slices.Contains(strings.Fields(pythonKeywords), id)
}

// inheritedEnv names the variables a stdio server gets from this process:
// the list of the MCP SDKs' getDefaultEnvironment, which desktop clients
// use, so that servers started through npx or uvx find their tools and
// caches as they do there, while the rest of our environment (tokens among
// it) stays with us.
func inheritedEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{
			"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH",
			"PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP",
			"USERNAME", "USERPROFILE", "PROGRAMFILES",
		}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
}

// environ is the environment of s's command: the inherited variables that
// are set, then s.Env in name order (exec keeps the last of duplicates, so
// s.Env wins).
func (s ServerConfig) environ() []string {
	var env []string
	for _, k := range inheritedEnv() {
		// A value starting with "()" is a shell function, which the SDKs
		// leave out as a security risk.
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	return env
}
