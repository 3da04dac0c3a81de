package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/llmendpoint"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// envWith is testEnv with the environment variables vars.
func envWith(vars map[string]string) config.Environment {
	env := testEnv()
	env.LookupEnv = func(key string) (string, bool) {
		v, ok := vars[key]
		return v, ok
	}
	return env
}

// TestConfigureDefaults holds the command line's defaults, which package
// config states, equal to those of the packages that also default the
// values left 0: each default is decided once.
func TestConfigureDefaults(t *testing.T) {
	_, w, err := configure([]string{"stdio"}, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := w.supervisor
	if want := (supervisor.Config{Workers: s.Workers}).WithDefaults(); s.Warm != want.Warm || s.Queue != want.Queue {
		t.Errorf("warm %d, queue %d; the supervisor's defaults are %d, %d", s.Warm, s.Queue, want.Warm, want.Queue)
	}
	if s.Grace != supervisor.DefaultGrace || s.FilesLimit != supervisor.DefaultFilesLimit ||
		s.MountLimits != (mount.Limits{MaxBytes: supervisor.DefaultMountBytes, MaxFiles: supervisor.DefaultMountFiles}) {
		t.Errorf("grace %v, files limit %d, mount limits %+v: not the supervisor's defaults", s.Grace, s.FilesLimit, s.MountLimits)
	}
	if s.IndexURL != packages.DefaultIndexURL {
		t.Errorf("index URL %q, want packages.DefaultIndexURL %q", s.IndexURL, packages.DefaultIndexURL)
	}
	for _, code := range []string{"1MiB", "0", "4MiB", "1GiB"} {
		_, w, err := configure([]string{"stdio", "--code-limit", code}, testEnv())
		if err != nil {
			t.Fatal(err)
		}
		want := transport.DefaultLimits(int64(w.supervisor.CodeLimit))
		want.MaxMCPSessionsPerPrincipal = want.MaxMCPSessions - want.MaxMCPSessions/2
		if !reflect.DeepEqual(w.limits, want) {
			t.Errorf("--code-limit %s: front-end limits %+v, want transport.DefaultLimits %+v", code, w.limits, want)
		}
	}
	for _, tt := range []struct {
		args   []string
		format render.ReturnMode
		schema mcpserver.ToolSchema
	}{
		{[]string{"stdio"}, render.ReturnXML, mcpserver.SchemaJSR},
		{[]string{"stdio", "--return-mode", "JSON", "--tool-schema", "pypi"}, render.ReturnJSON, mcpserver.SchemaPyPI},
	} {
		_, w, err := configure(tt.args, testEnv())
		if err != nil || w.returnMode != tt.format || w.toolSchema != tt.schema {
			t.Errorf("configure(%q): return mode %q, tool schema %q, %v; want %q, %q", tt.args, w.returnMode, w.toolSchema, err, tt.format, tt.schema)
		}
	}
	usage := config.Usage()
	for _, fact := range []string{
		fmt.Sprintf("(default: %d times --workers)", supervisor.DefaultQueuePerWorker),
		"(" + supervisor.WorkDir + ")",
	} {
		if !strings.Contains(usage, fact) {
			t.Errorf("usage lacks %q", fact)
		}
	}
}

// TestConfigureZero shows that 0 means in the supervisor's configuration
// what it means on the command line, and that a value not set gets its
// default.
func TestConfigureZero(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(*supervisor.Config)
	}{
		{"defaults", nil, func(c *supervisor.Config) {
			c.Warm, c.Queue, c.MaxCallsPerPrincipal, c.ToolCalls, c.SessionIdleCPU = 4, 256, 2, 1000, 0.1
		}},
		{"set", []string{"--warm", "1", "--queue", "3", "--max-calls-per-principal", "3", "--tool-calls", "7", "--session-idle-cpu", "0.5"},
			func(c *supervisor.Config) {
				c.Warm, c.Queue, c.MaxCallsPerPrincipal, c.ToolCalls, c.SessionIdleCPU = 1, 3, 3, 7, 0.5
			}},
		{"no limits", []string{"--max-calls-per-principal", "0", "--tool-calls", "0", "--session-idle-cpu", "0"},
			func(c *supervisor.Config) {
				c.Warm, c.Queue, c.MaxCallsPerPrincipal, c.ToolCalls, c.SessionIdleCPU = 4, 256, 0, 0, 0
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, w, err := configure(append([]string{"stdio", "--workers", "4"}, tt.args...), testEnv())
			if err != nil {
				t.Fatal(err)
			}
			got := w.supervisor
			var want supervisor.Config
			tt.want(&want)
			if got.Warm != want.Warm || got.Queue != want.Queue || got.MaxCallsPerPrincipal != want.MaxCallsPerPrincipal ||
				got.ToolCalls != want.ToolCalls || got.SessionIdleCPU != want.SessionIdleCPU {
				t.Errorf("warm, queue, calls per principal, tool calls, idle CPU = %d, %d, %d, %d, %v; want %d, %d, %d, %d, %v",
					got.Warm, got.Queue, got.MaxCallsPerPrincipal, got.ToolCalls, got.SessionIdleCPU,
					want.Warm, want.Queue, want.MaxCallsPerPrincipal, want.ToolCalls, want.SessionIdleCPU)
			}
		})
	}
}

// TestConfigureLists covers the entries of --allow-net and --allow-origin
// as the program takes them.
func TestConfigureLists(t *testing.T) {
	tests := []struct {
		args           []string
		hosts, origins []string
	}{
		{args: []string{"stdio"}},
		{args: []string{"stdio", "--allow-net", "Example.com:443, 127.0.0.1:8000,::1,[::1]:80,example.com:443,"},
			hosts: []string{"example.com:443", "127.0.0.1:8000", "[::1]", "[::1]:80"}},
		{args: []string{"stdio", "--allow-net", "a.com,A.COM"}, hosts: []string{"a.com"}},
		{args: []string{"stdio", "--allow-net", "localhost"}, hosts: []string{"localhost"}},
		{args: []string{"stdio", "--allow-origin", "https://App.example.com:443/, http://localhost:5173"},
			origins: []string{"https://app.example.com", "http://localhost:5173"}},
		{args: []string{"stdio", "--allow-origin", "*"}, origins: []string{"*"}},
		{args: []string{"stdio", "--allow-origin", "http://localhost:80, https://a.example:443,https://b.example:8443"},
			origins: []string{"http://localhost", "https://a.example", "https://b.example:8443"}},
		{args: []string{"stdio", "--allow-origin", "http://[::1]:5173"}, origins: []string{"http://[::1]:5173"}},
	}
	for _, tt := range tests {
		_, w, err := configure(tt.args, testEnv())
		if err != nil {
			t.Errorf("configure(%q): %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(w.supervisor.AllowNet, tt.hosts) || !reflect.DeepEqual(w.limits.AllowOrigins, tt.origins) {
			t.Errorf("configure(%q): hosts %q, origins %q; want %q, %q", tt.args, w.supervisor.AllowNet, w.limits.AllowOrigins, tt.hosts, tt.origins)
		}
	}
}

// TestConfigureUsageErrors covers the values that the program's packages
// refuse: each is a usage error that names the flag or its variable.
func TestConfigureUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		vars    map[string]string
		mention string
	}{
		{"index URL of another scheme", []string{"stdio", "--index-url", "ftp://mirror/simple"}, nil, "--index-url"},
		{"empty index URL", []string{"stdio", "--index-url", ""}, nil, "--index-url"},
		{"pyodide index URL of another scheme", []string{"stdio", "--pyodide-index-url", "s3://bucket/"}, nil, "--pyodide-index-url"},
		{"bad requirement in deps", []string{"stdio", "--deps", "numpy,pydantic>=>2"}, nil, "--deps"},
		{"allow net with a URL", []string{"stdio", "--allow-net", "https://example.com"}, nil, "--allow-net"},
		{"allow net with a bad port", []string{"stdio", "--allow-net", "a.com:1,b.com:99999"}, nil, `"b.com:99999"`},
		{"allow net from env with a bad host", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_ALLOW_NET": "a b"}, "MCP_RUN_PYTHON_ALLOW_NET"},
		{"allow origin with a path", []string{"stdio", "--allow-origin", "https://a.example.com/app"}, nil, "--allow-origin"},
		{"allow origin without a scheme", []string{"stdio", "--allow-origin", "a.example.com"}, nil, `"a.example.com" is not an origin`},
		{"allow origin null", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_ALLOW_ORIGIN": "null"}, "MCP_RUN_PYTHON_ALLOW_ORIGIN"},
		{"fetch a bad requirement", []string{"fetch", "numpy>>2"}, nil, "fetch: "},
		{"mount without a sandbox path", []string{"stdio", "--mount", "data"}, nil, "no SANDBOX path"},
		{"mount of a missing host folder", []string{"stdio", "--mount", "/nonexistent-mcp-run-python-test:/data"}, nil, "host folder"},
		{"repeated deps, the first bad", []string{"stdio", "--deps", "a>=>2", "--deps", "numpy"}, nil, `invalid value "a>=>2" for --deps`},
		{"allow origin with credentials", []string{"stdio", "--allow-origin", "https://user@app.example.com"}, nil, "--allow-origin"},
		{"allow origin with a path", []string{"stdio", "--allow-origin", "https://app.example.com/path"}, nil, "is not an origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := configure(tt.args, envWith(tt.vars))
			if _, ok := errors.AsType[*config.UsageError](err); !ok {
				t.Fatalf("configure(%q) error = %v, want a *config.UsageError", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

// TestConfigureMessages pins whole messages of the values that the
// program's packages refuse, as config's own are pinned there.
func TestConfigureMessages(t *testing.T) {
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"mount spec", []string{"stdio", "--mount", "data"}, nil,
			`invalid value "data" for --mount: "data": no SANDBOX path; want HOST:SANDBOX[:ro|rw], such as ./data:/data or C:\data:/data:rw`},
		{"mount spec from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_MOUNT": "/:/x:rx"},
			`invalid value "/:/x:rx" for MCP_RUN_PYTHON_MOUNT: "/:/x:rx": mode "rx" is neither ro nor rw; want HOST:SANDBOX[:ro|rw], such as ./data:/data or C:\data:/data:rw`},
		{"requirement", []string{"stdio", "--deps", "numpy,pydantic>=>2"}, nil, `invalid value "numpy,pydantic>=>2" for --deps: invalid requirement "pydantic>=>2"`},
		{"host from env", []string{"stdio"}, map[string]string{"MCP_RUN_PYTHON_ALLOW_NET": "a.com:1,https://b.com"},
			`invalid value "a.com:1,https://b.com" for MCP_RUN_PYTHON_ALLOW_NET: "https://b.com": a host such as example.com:443, not a URL or path`},
		{"origin", []string{"stdio", "--allow-origin", "null"}, nil,
			`invalid value "null" for --allow-origin: "null" is not an origin such as https://app.example.com or http://localhost:5173`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := configure(tt.args, envWith(tt.vars))
			if _, ok := errors.AsType[*config.UsageError](err); !ok {
				t.Fatalf("configure(%q) error = %v, want a *config.UsageError", tt.args, err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("configure(%q) error\n got: %s\nwant: %s", tt.args, err, tt.want)
			}
		})
	}
}

// mountFolders returns a temporary folder and two folders a and b in it.
func mountFolders(t *testing.T) (dir, a, b string) {
	t.Helper()
	dir = t.TempDir()
	a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir, a, b
}

// ro and rw are the mounts of host at sandbox, read-only and writable.
func ro(host, sandbox string) mount.Mount { return mount.Mount{Host: host, Sandbox: sandbox} }
func rw(host, sandbox string) mount.Mount {
	return mount.Mount{Host: host, Sandbox: sandbox, Writable: true}
}

// TestConfigureMounts covers --mount and MCP_RUN_PYTHON_MOUNT, parsed and
// resolved here, which need folders that exist.
func TestConfigureMounts(t *testing.T) {
	dir, a, b := mountFolders(t)
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		args    []string
		mounts  string // MCP_RUN_PYTHON_MOUNT, if not ""
		want    []mount.Mount
		wantErr string // the whole message
	}{
		{name: "none", args: []string{"stdio"}},
		{name: "one", args: []string{"stdio", "--mount", a + ":/data"}, want: []mount.Mount{ro(a, "/data")}},
		{name: "repeated", args: []string{"--mount", a + ":/a:rw", "stdio", "--mount=" + b + ":/b:ro"},
			want: []mount.Mount{rw(a, "/a"), ro(b, "/b")}},
		{name: "one from env", args: []string{"stdio"}, mounts: a + ":/data:rw", want: []mount.Mount{rw(a, "/data")}},
		{name: "several from env, one a line", args: []string{"stdio"}, mounts: a + ":/a\r\n\n" + b + ":/b:rw\n",
			want: []mount.Mount{ro(a, "/a"), rw(b, "/b")}},
		{name: "command line wins over env", args: []string{"stdio", "--mount", b + ":/b"}, mounts: a + ":/a\n" + a + ":/c",
			want: []mount.Mount{ro(b, "/b")}},
		{name: "missing host folder", args: []string{"stdio", "--mount", missing + ":/data"},
			wantErr: "invalid value " + strconv.Quote(missing+":/data") + " for --mount: " + missing + ":/data:ro: host folder: "},
		{name: "missing host folder from env", args: []string{"stdio"}, mounts: a + ":/a\n" + missing + ":/m",
			wantErr: "invalid value " + strconv.Quote(a+":/a\n"+missing+":/m") + " for MCP_RUN_PYTHON_MOUNT: " + missing + ":/m:ro: host folder: "},
		{name: "bad spec from env", args: []string{"stdio"}, mounts: a + ":/a\nb:data",
			wantErr: `" for MCP_RUN_PYTHON_MOUNT: "b:data": SANDBOX "data" is not an absolute path`},
		{name: "overlap", args: []string{"stdio", "--mount", a + ":/data", "--mount", b + ":/data/b"},
			wantErr: "invalid value " + strconv.Quote(b+":/data/b") + " for --mount: --mount " + a + ":/data:ro and --mount " + b + ":/data/b:ro overlap in the sandbox"},
		{name: "overlap from env", args: []string{"stdio"}, mounts: a + ":/data:rw\n" + b + ":/data",
			wantErr: "overlap in the sandbox; give each its own path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vars map[string]string
			if tt.mounts != "" {
				vars = map[string]string{"MCP_RUN_PYTHON_MOUNT": tt.mounts}
			}
			_, got, err := configure(tt.args, envWith(vars))
			if tt.wantErr != "" {
				if _, ok := errors.AsType[*config.UsageError](err); !ok || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want a *UsageError with %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if !reflect.DeepEqual(got.supervisor.Mounts, tt.want) {
				t.Errorf("Parse(%q) mounts %v, want %v", tt.args, got.supervisor.Mounts, tt.want)
			}
		})
	}
}

// TestAskWiring checks that the flags of what code asks reach the
// supervisor's AskLimits and the MCP server's AskOptions, the endpoint's
// key read from its file, and that without --sampling and --elicitation
// the server is given none.
func TestAskWiring(t *testing.T) {
	_, w, err := configure([]string{"stdio"}, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if o, err := askOptions(config.Ask{}); o != nil || err != nil {
		t.Errorf("without the flags: %+v, %v", o, err)
	}
	if want := (supervisor.AskLimits{Requests: 100, Batch: 64, PromptBytes: 256 << 10, AnswerBytes: 64 << 10, MaxTokens: 4096, Wait: 5 * time.Minute}); w.supervisor.AskLimits != want {
		t.Errorf("AskLimits %+v, want %+v", w.supervisor.AskLimits, want)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, w, err := configure([]string{"stdio", "--sampling", "--llm-url", "http://127.0.0.1:1/v1", "--llm-model", "m",
		"--llm-key-file", keyFile, "--llm-requests", "7", "--llm-concurrency", "3", "--park-timeout", "9s", "--max-parked-calls-per-principal", "2"}, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if w.supervisor.AskLimits.Requests != 7 {
		t.Errorf("AskLimits %+v, want 7 requests", w.supervisor.AskLimits)
	}
	o, err := askOptions(cfg.Ask)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, ok := o.Endpoint.(*llmendpoint.Client)
	if !o.Model || o.Person || o.Concurrency != 3 || o.MaxTokens != 4096 || o.ParkTimeout != 9*time.Second || o.ParkedPerPrincipal != 2 || !ok ||
		endpoint.Key != "sk-file" || endpoint.URL != "http://127.0.0.1:1/v1" || endpoint.Model != "m" || endpoint.Concurrency != 3 {
		t.Errorf("options %+v, endpoint %+v", o, o.Endpoint)
	}
	if _, err := askOptions(config.Ask{Sampling: true, LLMURL: "http://a/v1", LLMKeyFile: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a missing key file was accepted")
	}
}
