package main_test

// The command line of upstream's PyPI release (mcp-run-python 0.0.22, started
// as `uvx mcp-run-python ARGS`), run against the real binary. Its argparse
// definition:
//
//	--port (type int), --deps/--dependencies (a comma-separated string; the
//	last one given wins), --disable-networking, --verbose, --version (store_true),
//	-h/--help, and the optional positional mode, one of stdio, streamable-http,
//	streamable-http-stateless, example; allow_abbrev (the default) takes any
//	prefix of one long option string, such as --verb or --po.
//
// Each form runs as the README tells its users to move over:
// `mcp-run-python --tool-schema pypi ARGS`, or as ARGS alone where the
// case says so. config's TestParsePyPICommandLine checks the meaning of more
// spellings without starting anything.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// pypiForm is one invocation of the PyPI release.
type pypiForm struct {
	args []string // after `uvx mcp-run-python`; "PORT" stands for a free port
	bare bool     // without --tool-schema pypi in front
	// Forms that end at once: the exit status and what stdout starts with.
	code   int
	stdout string
	// serve is the mode a server form serves, as our log names it; a server
	// must answer initialize.
	serve string
	// stderr holds what the server's own log must show, waited for in turn.
	stderr []string
	// noDebug: no debug line by the time those have shown, the level being
	// info or above. main logs its configuration at debug before serving.
	noDebug bool
}

// TestE2EPyPICommandLine runs the PyPI release's invocation forms against
// the binary: each is accepted as there (or refused, where it refused) and
// means the same.
func TestE2EPyPICommandLine(t *testing.T) {
	s := setup(t)
	const (
		info    = "\tINFO\tmcp-run-python\t"
		debug   = "\tDEBUG\tmcp-run-python\t"
		usage   = "Usage: mcp-run-python [flags] MODE"
		version = "mcp-run-python "
		deps    = info + "resolving --deps six"
	)
	forms := []pypiForm{
		{args: []string{"--version"}, code: 0, stdout: version},
		{args: []string{"--vers"}, code: 0, stdout: version},
		{args: []string{"--version", "stdio"}, code: 0, stdout: version},
		{args: []string{"-h"}, code: 0, stdout: usage},
		{args: []string{"--he"}, code: 0, stdout: usage},
		{args: []string{"--help"}, code: 0, stdout: usage},
		// Refused there too (exit 2): no mode; prefixes of two options.
		{args: []string{}, code: 2},
		{args: []string{"--verbose"}, code: 2},
		{args: []string{"--dep", "six", "stdio"}, code: 2},
		{args: []string{"--ver", "stdio"}, code: 2},

		// As the issue tried them, without --tool-schema pypi: our default
		// level, warn, or debug with --verbose.
		{args: []string{"--dependencies", "six", "stdio"}, bare: true, serve: "stdio", noDebug: true},
		{args: []string{"--verbose", "stdio"}, bare: true, serve: "stdio",
			stderr: []string{debug + `starting	{"mode": "stdio", "deps": [], "networking": true, "tool_schema": "jsr"}`}},

		// With --tool-schema pypi: the release's level, info, without --verbose.
		{args: []string{"stdio"}, serve: "stdio", stderr: []string{info}, noDebug: true},
		{args: []string{"--", "stdio"}, serve: "stdio", stderr: []string{info}, noDebug: true},
		{args: []string{"--deps", "six", "stdio"}, serve: "stdio", stderr: []string{deps}, noDebug: true},
		{args: []string{"--dependencies=six", "stdio"}, serve: "stdio", stderr: []string{deps}, noDebug: true},
		{args: []string{"--depe", "six", "stdio"}, serve: "stdio", stderr: []string{deps}, noDebug: true},
		{args: []string{"--verb", "--dependencie=six", "--di", "stdio"}, serve: "stdio",
			stderr: []string{debug + `starting	{"mode": "stdio", "deps": ["six"], "networking": false, "tool_schema": "pypi"}`}},
		{args: []string{"stdio", "--disable-networking", "--verbose", "--deps", "six,attrs"}, serve: "stdio",
			stderr: []string{debug + `starting	{"mode": "stdio", "deps": ["six", "attrs"], "networking": false, "tool_schema": "pypi"}`}},
		{args: []string{"--port", "PORT", "streamable-http"}, serve: "streamable_http",
			stderr: []string{"serving streamable_http at http://127.0.0.1:PORT/mcp", info}, noDebug: true},
		{args: []string{"--po=PORT", "--verbose", "streamable-http-stateless"}, serve: "streamable_http_stateless",
			stderr: []string{debug + `starting	{"mode": "streamable_http_stateless"`, "serving streamable_http_stateless at http://127.0.0.1:PORT/mcp"}},
	}
	env := pypiEnv(t, s)
	for _, f := range forms {
		name := strings.Join(f.args, " ")
		if name == "" {
			name = "no arguments"
		}
		if f.bare {
			name += " without --tool-schema pypi"
		}
		t.Run(name, func(t *testing.T) {
			runPyPIForm(t, s, f, env)
		})
	}
}

// pypiEnv is the environment of the forms: it only says where deno and the
// cache are, and where --deps come from without a download (the argv is the
// release's): an index in a local directory holding six and attrs at the
// versions Pyodide ships, which stand in for Pyodide's builds with its
// package host unreachable. A server whose --deps cannot be installed
// ends at start.
func pypiEnv(t *testing.T, s *e2eSetup) []string {
	t.Helper()
	version, err := js.PyodideVersion()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := packages.ReadLock(filepath.Join(s.cacheDir, "pyodide", version, "node_modules", "pyodide", packages.LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	r := &pt.Repo{}
	for _, name := range []string{"six", "attrs"} {
		p, ok := lock.Package(name)
		if !ok {
			t.Fatalf("Pyodide ships no %s", name)
		}
		r.Add(pt.Wheel{Name: name, Version: p.Version, Requires: p.Depends})
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	return append(serverEnv(), "MCP_RUN_PYTHON_DENO="+s.deno, "MCP_RUN_PYTHON_CACHE_DIR="+s.cacheDir,
		"MCP_RUN_PYTHON_INDEX_URL="+r.Location(t, pt.Variant{JSON: true, Dir: true}),
		"MCP_RUN_PYTHON_PYODIDE_INDEX_URL="+down.URL+"/", "MCP_RUN_PYTHON_WORKERS=1")
}

// runPyPIForm runs one form, in env, and checks what it did.
func runPyPIForm(t *testing.T, s *e2eSetup, f pypiForm, env []string) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	args := slices.Clone(f.args)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "PORT", port)
	}
	if !f.bare {
		args = append([]string{"--tool-schema", "pypi"}, args...)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ownProcessGroup(cmd)

	if f.serve == "" {
		var stdout strings.Builder
		cmd.Stdout = &stdout
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != f.code || !strings.HasPrefix(stdout.String(), f.stdout) {
			t.Fatalf("mcp-run-python %q: exit %d (%v), stdout %q; want exit %d, stdout starting %q; stderr:\n%s",
				args, code, err, stdout.String(), f.code, f.stdout, stderr)
		}
		return
	}

	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	if f.serve == modeStdio {
		answerInitializeOverStdio(t, stdin, stdout, stderr)
	} else {
		tg := &target{setup: s, mode: f.serve, url: "http://127.0.0.1:" + port, cmd: cmd, stderr: stderr, done: exited}
		waitForPort(t, tg)
		_ = tg.connect(t).Close()
	}
	for _, want := range f.stderr {
		waitForStderr(t, stderr, strings.ReplaceAll(want, "PORT", port))
	}
	if f.noDebug && strings.Contains(stderr.String(), "\tDEBUG\t") {
		t.Errorf("mcp-run-python %q logged at debug level:\n%s", args, stderr)
	}

	if f.serve == modeStdio {
		_ = stdin.Close()
	} else if err := stopServer(cmd.Process); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("mcp-run-python %q: %v, want exit status 0; stderr:\n%s", args, waitErr, stderr)
		}
	case <-time.After(stopTimeout):
		t.Errorf("mcp-run-python %q did not stop within %v; stderr:\n%s", args, stopTimeout, stderr)
	}
}

// answerInitializeOverStdio sends initialize and waits for its answer.
func answerInitializeOverStdio(t *testing.T, stdin io.Writer, stdout io.Reader, stderr *syncBuffer) {
	t.Helper()
	if _, err := io.WriteString(stdin, pipedInitialize+"\n"); err != nil {
		t.Fatalf("send initialize: %v; stderr:\n%s", err, stderr)
	}
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		answer <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-answer:
		if !strings.Contains(line, `"id":1,"result"`) || !strings.Contains(line, `"name":"`+wantServerName+`"`) {
			t.Fatalf("initialize answered %q; stderr:\n%s", line, stderr)
		}
	case <-time.After(startTimeout):
		t.Fatalf("no answer to initialize after %v; stderr:\n%s", startTimeout, stderr)
	}
}

// waitForStderr polls the server's stderr until it holds want.
func waitForStderr(t *testing.T, stderr *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after %v:\n%s", want, startTimeout, stderr)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling, as waitForPort
	}
}
