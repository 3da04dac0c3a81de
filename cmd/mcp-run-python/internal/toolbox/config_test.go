package toolbox

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []ServerConfig
	}{{
		name: "stdio",
		json: `{"mcpServers": {"calc": {"command": "calc-server", "args": ["--fast"], "env": {"K": "V"}}}}`,
		want: []ServerConfig{{Name: "calc", Transport: Stdio, Command: "calc-server", Args: []string{"--fast"}, Env: map[string]string{"K": "V"}}},
	}, {
		name: "stdio with type",
		json: `{"mcpServers": {"calc": {"type": "stdio", "command": "calc-server"}}}`,
		want: []ServerConfig{{Name: "calc", Transport: Stdio, Command: "calc-server"}},
	}, {
		name: "http",
		json: `{"mcpServers": {"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}}}}`,
		want: []ServerConfig{{Name: "web", Transport: StreamableHTTP, URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}},
	}, {
		name: "streamable-http type",
		json: `{"mcpServers": {"web": {"type": "streamable-http", "url": "http://localhost:8000/mcp"}}}`,
		want: []ServerConfig{{Name: "web", Transport: StreamableHTTP, URL: "http://localhost:8000/mcp"}},
	}, {
		name: "sse",
		json: `{"mcpServers": {"old": {"type": "sse", "url": "http://localhost:8000/sse"}}}`,
		want: []ServerConfig{{Name: "old", Transport: SSE, URL: "http://localhost:8000/sse"}},
	}, {
		name: "disabled servers are left out, even broken ones; the others sorted",
		json: `{"mcpServers": {"z": {"url": "http://z"}, "off": {"disabled": true, "command": ""}, "a-b": {"command": "a"}}}`,
		want: []ServerConfig{{Name: "a-b", Transport: Stdio, Command: "a"}, {Name: "z", Transport: StreamableHTTP, URL: "http://z"}},
	}, {
		name: "other top-level keys of a desktop file are ignored",
		json: `{"globalShortcut": "Ctrl+Space", "mcpServers": {}}`,
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.json))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(cfg.Servers, tt.want) {
				t.Errorf("Parse = %+v, want %+v", cfg.Servers, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string // substrings of the error
	}{
		{"not JSON", `{`, []string{"parse the tools configuration"}},
		{"no mcpServers", `{"servers": {}}`, []string{`no "mcpServers"`}},
		{"both", `{"mcpServers": {"calc": {"command": "c", "url": "http://x"}}}`, []string{`"calc"`, `both "command" and "url"`}},
		{"neither", `{"mcpServers": {"calc": {"args": ["x"]}}}`, []string{`"calc"`, `needs "command"`}},
		{"empty command", `{"mcpServers": {"calc": {"command": " "}}}`, []string{`"calc"`, `empty "command"`}},
		{"unknown field", `{"mcpServers": {"calc": {"command": "c", "cwd": "/tmp"}}}`, []string{`"calc"`, `unknown field "cwd"`}},
		{"bad url scheme", `{"mcpServers": {"web": {"url": "ftp://example.com"}}}`, []string{`"web"`, "http:// or https://"}},
		{"url without host", `{"mcpServers": {"web": {"url": "http://"}}}`, []string{`"web"`, "http:// or https://"}},
		{"unknown type", `{"mcpServers": {"web": {"type": "websocket", "url": "http://x"}}}`, []string{`"web"`, `"websocket"`}},
		{"stdio type with url", `{"mcpServers": {"web": {"type": "stdio", "url": "http://x"}}}`, []string{`"web"`, `"stdio"`}},
		{"http type with command", `{"mcpServers": {"calc": {"type": "http", "command": "c"}}}`, []string{`"calc"`, `"http"`}},
		{"headers on stdio", `{"mcpServers": {"calc": {"command": "c", "headers": {}}}}`, []string{`"calc"`, `"headers"`}},
		{"env on http", `{"mcpServers": {"web": {"url": "http://x", "env": {}}}}`, []string{`"web"`, `"env"`}},
		{"bad env name", `{"mcpServers": {"calc": {"command": "c", "env": {"A=B": "x"}}}}`, []string{`"calc"`, `"A=B"`}},
		{"colliding names", `{"mcpServers": {"my-calc": {"command": "c"}, "my.calc": {"command": "c"}}}`, []string{`"my-calc"`, `"my.calc"`, "mcp_tools.my_calc"}},
		{"leading digit", `{"mcpServers": {"1calc": {"command": "c"}}}`, []string{`"1calc"`, "Python identifier"}},
		{"keyword", `{"mcpServers": {"class": {"command": "c"}}}`, []string{`"class"`, "Python identifier"}},
		{"ToolError", `{"mcpServers": {"ToolError": {"command": "c"}}}`, []string{`"ToolError"`, "taken"}},
		{"empty name", `{"mcpServers": {"": {"command": "c"}}}`, []string{"empty name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			wantError(t, err, tt.want...)
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"calc": {"command": "c"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil || len(cfg.Servers) != 1 || cfg.Servers[0].Name != "calc" {
		t.Fatalf("Load = %+v, %v", cfg, err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.json"))
	wantError(t, err, "read the tools configuration")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"calc": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	wantError(t, err, path, `"calc"`)
}

func TestIdentifier(t *testing.T) {
	for name, want := range map[string]string{
		"calc": "calc", "my-calc": "my_calc", "a.b c": "a_b_c", "ünï": "_n_", "get_2": "get_2",
	} {
		if got := Identifier(name); got != want {
			t.Errorf("Identifier(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestEnviron(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the inherited variables differ on Windows")
	}
	t.Setenv("HOME", "/home/test")
	t.Setenv("USER", "()  { :; }; echo pwned") // a shell function is not passed on
	t.Setenv("SECRET_TOKEN", "do not leak")
	s := ServerConfig{Env: map[string]string{"HOME": "/override", "B": "2", "A": "1"}}
	env := s.environ()
	if slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "SECRET_TOKEN=") || strings.HasPrefix(e, "USER=") }) {
		t.Errorf("environ passes on a variable it must not: %q", env)
	}
	i := slices.Index(env, "HOME=/home/test")
	if i < 0 || !slices.Equal(env[len(env)-3:], []string{"A=1", "B=2", "HOME=/override"}) {
		t.Errorf("environ = %q, want the inherited HOME then the server's env by name", env)
	}
}

// wantError fails t unless err is an error whose text has every one of
// parts.
func wantError(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one with %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}
