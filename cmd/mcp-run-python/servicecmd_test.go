package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/service"
)

// serviceTestHost is a Linux host whose deno and mcp-run-python are
// executable files in a temporary directory, deno found on PATH, whose home
// is another one, and whose /tmp (for PrivateTmp=yes) is a third, holding
// a deno and an mcp-run-python too.
func serviceTestHost(t *testing.T, vars map[string]string) (host serviceHost, deno, home string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		// Its paths are not Linux paths; internal/service renders Windows'
		// registration on every system.
		t.Skip("a Linux host's paths")
	}
	dir := t.TempDir()
	deno = filepath.Join(dir, "bin", "deno")
	home = filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Dir(deno), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "bin", "mcp-run-python")
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{deno, exe, filepath.Join(tmp, "deno"), filepath.Join(tmp, "mcp-run-python")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := config.Environment{
		LookupEnv: func(k string) (string, bool) {
			v, ok := vars[k]
			return v, ok
		},
		LookPath:     func(string) (string, error) { return deno, nil },
		UserCacheDir: func() (string, error) { return filepath.Join(home, ".cache"), nil },
		UserHomeDir:  func() (string, error) { return home, nil },
	}
	host = serviceHost{goos: "linux", executable: func() (string, error) { return exe, nil }, env: env, tmpDirs: []string{tmp}}
	return host, deno, home
}

// TestServiceInstallPrint checks that install --print prints the unit that
// Render makes of the command line, with deno's absolute path, and installs
// nothing: no unit file, not even its directory.
func TestServiceInstallPrint(t *testing.T) {
	const systemUnit = "/etc/systemd/system/mcp-run-python.service"
	_, errBefore := os.Stat(systemUnit)
	tests := []struct {
		name     string
		args     []string
		vars     map[string]string
		wantSpec func(deno, home string) service.Spec
	}{
		{
			name: "system unit",
			args: []string{"install", "--print", "streamable_http", "--port", "3002"},
			wantSpec: func(deno, home string) service.Spec {
				return service.Spec{Manager: service.Systemd, Executable: filepath.Join(filepath.Dir(deno), "mcp-run-python"),
					Args: []string{"streamable_http", "--port", "3002", "--deno", deno}, WarmupArgs: []string{"warmup", "--deno", deno}, Home: home}
			},
		},
		{
			name: "user unit, flags before the mode, deno named by its variable",
			args: []string{"install", "--workers=3", "--user", "sse", "--print", "--cache-dir", "/srv/c"},
			// Only where deno is comes from the environment: the service
			// would not see the rest, so a bad value here changes nothing.
			vars: map[string]string{"MCP_RUN_PYTHON_DENO": "DENO", "MCP_RUN_PYTHON_TIMEOUT": "forever"},
			wantSpec: func(deno, home string) service.Spec {
				return service.Spec{Manager: service.Systemd, User: true, Executable: filepath.Join(filepath.Dir(deno), "mcp-run-python"),
					Args:       []string{"sse", "--workers=3", "--cache-dir", "/srv/c", "--deno", deno},
					WarmupArgs: []string{"warmup", "--deno", deno, "--cache-dir", "/srv/c"}, CacheDir: "/srv/c", Home: home}
			},
		},
		{
			name: "relative paths made absolute: the service's working directory is not the shell's",
			args: []string{"install", "--print", "--user", "streamable_http", "--auth-token-file", "tokens.txt", "--mount", "./data:/data",
				"--mount=data:/rw:rw", "--index-url", "simple", "--pyodide-index-url=https://mirror.example/pyodide/", "--tls-cert=c.pem", "--tls-key", "k.pem"},
			wantSpec: func(deno, home string) service.Spec {
				cwd, _ := os.Getwd()
				in := func(name string) string { return filepath.Join(cwd, name) }
				return service.Spec{Manager: service.Systemd, User: true, Executable: filepath.Join(filepath.Dir(deno), "mcp-run-python"),
					Args: []string{"streamable_http", "--auth-token-file", in("tokens.txt"), "--mount", in("data") + ":/data:ro",
						"--mount=" + in("data") + ":/rw:rw", "--index-url", in("simple"), "--pyodide-index-url=https://mirror.example/pyodide/",
						"--tls-cert=" + in("c.pem"), "--tls-key", in("k.pem"), "--deno", deno},
					WarmupArgs: []string{"warmup", "--deno", deno}, Home: home}
			},
		},
		{
			name: "--deno replaced by its absolute path",
			args: []string{"install", "--print", "--deno", "DENO", "streamable_http_stateless"},
			wantSpec: func(deno, home string) service.Spec {
				return service.Spec{Manager: service.Systemd, Executable: filepath.Join(filepath.Dir(deno), "mcp-run-python"),
					Args: []string{"streamable_http_stateless", "--deno", deno}, WarmupArgs: []string{"warmup", "--deno", deno}, Home: home}
			},
		},
	}
	// The working directory of the shell that installs, with a folder to
	// mount.
	t.Chdir(t.TempDir())
	if err := os.Mkdir("data", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{}
			host, deno, home := serviceTestHost(t, vars)
			for k, v := range tt.vars {
				vars[k] = strings.ReplaceAll(v, "DENO", deno)
			}
			args := slices.Clone(tt.args)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "DENO", deno)
			}
			var stdout, stderr bytes.Buffer
			if code := runService(args, streams{out: &stdout, err: &stderr}, host); code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			want, err := service.Render(tt.wantSpec(deno, home))
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != want.Text {
				t.Errorf("printed:\n%s\nwant:\n%s", stdout.String(), want.Text)
			}
			if !strings.Contains(stderr.String(), want.Path) {
				t.Errorf("stderr %q does not name %s", stderr.String(), want.Path)
			}
			if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--print made %s: %v", home, err)
			}
			if _, err := os.Stat(systemUnit); errBefore != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--print made %s: %v", systemUnit, err)
			}
		})
	}
}

// TestServiceRefuses checks the command lines that would not give a running
// service.
func TestServiceRefuses(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no action", nil, exitUsage, "no action given"},
		{"an unknown action", []string{"restart"}, exitUsage, `unknown action "restart"`},
		{"flags for status", []string{"status", "--port", "1"}, exitUsage, "status takes only --user"},
		{"no mode", []string{"install", "--print"}, exitUsage, "no mode given"},
		{"stdio", []string{"install", "--print", "stdio"}, exitUsage, "a service serves HTTP"},
		{"a bad flag", []string{"install", "--print", "sse", "--workers", "0"}, exitUsage, "workers"},
		{"a relative cache", []string{"install", "--print", "--user", "sse", "--cache-dir", "c"}, exitUsage, "absolute path"},
		{"a cache for the system unit", []string{"install", "--print", "sse", "--cache-dir", "/c"}, exitUsage, "drop --cache-dir"},
		{"no deno", []string{"install", "--print", "sse", "--deno", "deno"}, exitFailure, "deno not found"},
		{"a missing deno", []string{"install", "--print", "sse", "--deno", "/nonexistent/deno"}, exitFailure, "no such file"},
		{"a deno that cannot run", []string{"install", "--print", "sse", "--deno", "NOEXEC"}, exitFailure, "not executable"},
		{"a deno in /tmp", []string{"install", "--print", "--user", "sse", "--deno", "TMP/deno"}, exitFailure,
			"deno TMP/deno is in TMP, which the unit's PrivateTmp=yes replaces with an empty one of its own"},
		{"a token file in /tmp", []string{"install", "--print", "sse", "--auth-token-file=TMP/tokens.txt"}, exitUsage,
			"--auth-token-file TMP/tokens.txt is in TMP, which the unit's PrivateTmp=yes"},
		{"a cache in /tmp", []string{"install", "--print", "--user", "sse", "--cache-dir", "TMP/cache"}, exitUsage,
			"--cache-dir TMP/cache is in TMP, which the unit's PrivateTmp=yes"},
		{"a certificate in a home directory for the system unit", []string{"install", "--print", "sse", "--tls-cert", "/home/ann/c.pem", "--tls-key", "/etc/k.pem"},
			exitUsage, "--tls-cert /home/ann/c.pem is in a home directory, which the service's user cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, deno, _ := serviceTestHost(t, map[string]string{})
			noexec := filepath.Join(filepath.Dir(deno), "noexec")
			if err := os.WriteFile(noexec, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			tmp := host.tmpDirs[0]
			args := slices.Clone(tt.args)
			for i, a := range args {
				args[i] = strings.ReplaceAll(strings.ReplaceAll(a, "NOEXEC", noexec), "TMP", tmp)
			}
			var stdout, stderr bytes.Buffer
			code := runService(args, streams{out: &stdout, err: &stderr}, host)
			if want := strings.ReplaceAll(tt.want, "TMP", tmp); code != tt.wantCode || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

func TestUnderHome(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/root/.deno/bin/deno", true},
		{"/home/ann/.deno/bin/deno", true},
		{"/run/user/1000/deno", true},
		{"/usr/local/bin/deno", false},
		{"/homework/deno", false},
		{"/opt/deno", false},
	}
	for _, tt := range tests {
		if got := underHome(tt.path); got != tt.want {
			t.Errorf("underHome(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestRunService checks that the program hands `service` to the service
// command, before the server's own flags are parsed.
func TestRunService(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"service", "--help"}, exitOK, serviceUsage, ""},
		{"usage error", []string{"service", "install", "--print"}, exitUsage, "",
			"mcp-run-python service: no mode given\nRun 'mcp-run-python service --help' for its usage.\n"},
		// testEnv's deno, /usr/bin/deno, is not here to run.
		{"install (not on Windows, where the path differs)", []string{"service", "install", "--print", "sse", "--deno", "/nonexistent/deno"}, exitFailure, "",
			"mcp-run-python service: deno: stat /nonexistent/deno: no such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && strings.HasPrefix(tt.name, "install") {
				t.Skip("a Unix path")
			}
			got := runProgram(t, tt.args, &fakeEngine{})
			if got.code != tt.code || got.stdout != tt.stdout || got.stderr != tt.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", got.code, got.stdout, got.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestServiceExecutableInTmp: the service cannot run an mcp-run-python in
// /tmp, which its PrivateTmp=yes replaces; install says so and what to do.
func TestServiceExecutableInTmp(t *testing.T) {
	host, _, _ := serviceTestHost(t, map[string]string{})
	exe := filepath.Join(host.tmpDirs[0], "mcp-run-python")
	host.executable = func() (string, error) { return exe, nil }
	var stdout, stderr bytes.Buffer
	code := runService([]string{"install", "--print", "--user", "sse"}, streams{out: &stdout, err: &stderr}, host)
	want := "mcp-run-python " + exe + " is in " + host.tmpDirs[0] + ", which the unit's PrivateTmp=yes replaces with an empty one of its own: install it where every user can run it"
	if code != exitFailure || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitFailure, want)
	}
}
