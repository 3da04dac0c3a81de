package main_test

// The hostile corpus: code that tries to get out of the sandbox, or to take
// the server down, through every door a security review asked about. Each
// probe's result is compared byte for byte with its golden file under
// testdata/e2e/hostile (rewrite them with -update, then read every diff), and
// once its probes are done each server must still serve a call. A probe that
// took a server down fails the probes after it too: they share the server.
//
// Workers refuse to make code from strings (V8's
// --disallow-code-generation-from-strings: js.eval, js.Function and run_js
// raise EvalError), so the probes build JavaScript objects with to_js
// (jsObject), reach node's modules through process.getBuiltinModule, and run
// JavaScript of their own in a module Worker made from a data: URL
// (inWorker), which has the runner's permissions.
//
// The probes run over stdio against three servers: one with the default
// network (as upstream, user code may use it), one with --disable-networking
// and one with --allow-net for a single local port. "The network" is local
// HTTP servers of this test: nothing leaves the loopback interface.
//
//	go test ./cmd/mcp-run-python/ -run Hostile -count=1 -v

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// hostileServer names the server a probe runs on.
type hostileServer int

const (
	serverDefault   hostileServer = iota // user code may use the network, as upstream
	serverOffline                        // --disable-networking
	serverAllowNet                       // --allow-net for the local service only
	serverImpatient                      // a short time limit, for code that will not stop
)

// hostileCase is one probe. Its code may name the places it attacks with
// the placeholders of hostileEnv.pairs; the same placeholders stand for
// them in the golden file.
type hostileCase struct {
	name   string
	server hostileServer
	code   string
	// check, when set, runs after the probe.
	check func(t *testing.T, w hostileWorld)
	// content, when set, puts every content item of the result in the
	// golden file, not only its one text (see contentSummary).
	content bool
}

// Limits of the hostile servers: low, so that bombs end fast, but with room
// for Pyodide itself, and time for a bomb to reach the memory limit on a
// loaded machine.
var hostileArgs = []string{
	"--queue", "100", "--timeout", "8s", "--grace", "1s",
	"--output-limit", "4KiB", "--memory-limit", "768MiB",
}

// TestHostile runs the corpus of hostileCases; see the top of this file.
func TestHostile(t *testing.T) {
	s := setup(t)
	local := startLocalService(t, "hello from a local service")
	other := startLocalService(t, "hello from another local service")
	dir := t.TempDir()
	evil := filepath.Join(dir, "evil.js")
	if err := os.WriteFile(evil, []byte("export const pwned = true;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := unixService(t, filepath.Join(dir, "service.sock"))
	pyodide, err := pyodideDir(s.cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	deno, err := filepath.EvalSymlinks(s.deno) // as Deno.execPath tells it
	if err != nil {
		t.Fatal(err)
	}

	cases := hostileCases()
	used := map[string]bool{}
	for _, tc := range cases {
		if used[tc.name] {
			t.Fatalf("two probes named %s", tc.name)
		}
		used[tc.name] = true
	}
	servers := []struct {
		name    string
		server  hostileServer
		args    []string // after hostileArgs, so they win
		workers int
	}{
		{"default", serverDefault, nil, 3},
		{"no_network", serverOffline, []string{"--disable-networking"}, 2},
		{"allow_net", serverAllowNet, []string{"--allow-net", local.addr}, 2},
		{"short_timeout", serverImpatient, []string{"--timeout", "2s", "--grace", "500ms"}, 2},
	}
	start := time.Now()
	t.Cleanup(func() {
		t.Logf("hostile corpus: %d probes in %v", len(cases), time.Since(start).Round(time.Millisecond))
	})
	// All servers start at once, so that their workers warm up together.
	clients := make([]*e2eClient, len(servers))
	for i, srv := range servers {
		args := append(append([]string{"--workers", strconv.Itoa(srv.workers)}, hostileArgs...), srv.args...)
		clients[i] = startTarget(t, s, modeStdio, args...).connect(t)
	}
	for i, srv := range servers {
		c := clients[i]
		t.Run(srv.name, func(t *testing.T) {
			env := hostileEnv{
				deno:    deno,
				cache:   s.cacheDir,
				pyodide: pyodide,
				program: workerProgram(t, c.pid),
				bridge:  bridgeSocket(t, c.pid),
				own:     ownAddress(t),
				local:   local.addr,
				other:   other.addr,
				evil:    evil,
				socket:  socket,
			}
			// Probes run from goroutines of their own rather than with
			// t.Parallel, which -parallel caps at GOMAXPROCS: most of a
			// probe's time is spent waiting for a worker, not on a core.
			next := make(chan hostileCase)
			var wg sync.WaitGroup
			for range srv.workers + 1 {
				wg.Go(func() {
					for tc := range next {
						t.Run(tc.name, func(t *testing.T) {
							var got string
							if tc.content {
								res, _ := c.runArgs(t, map[string]any{"python_code": env.expand(tc.code)})
								got = env.normalise(contentSummary(res))
							} else {
								got = env.normalise(c.run(t, env.expand(tc.code)))
							}
							golden(t, filepath.Join("hostile", tc.name+".txt"), got)
							if tc.check != nil {
								tc.check(t, hostileWorld{stderr: c.stderr.String, local: local, run: c.run})
							}
						})
					}
				})
			}
			for _, tc := range cases {
				if tc.server == srv.server {
					next <- tc
				}
			}
			close(next)
			wg.Wait()
			c.expectWorks(t)
		})
	}
}

// hostileEnv holds what probes attack: paths and addresses that differ from
// machine to machine and from run to run.
type hostileEnv struct {
	deno    string // the deno executable, symlinks resolved
	cache   string // the cache directory
	pyodide string // the Pyodide package, symlinks resolved
	program string // the worker program's directory
	bridge  string // the Unix socket of the server's bridge
	own     string // an address of this machine's, not loopback
	local   string // host:port of a local HTTP service
	other   string // host:port of another one
	evil    string // a JavaScript module outside every allowed path
	socket  string // a Unix socket a local service listens on
}

func (e hostileEnv) pairs() []string {
	// At each place the first match wins: the program and Pyodide, which
	// live inside the cache, before it; $LOCAL_PORT before $LOCAL, its
	// prefix. A value's port never starts where its address does.
	return []string{
		"$PROGRAM", e.program,
		"$PYODIDE", e.pyodide,
		"$CACHE", e.cache,
		"$DENO", e.deno,
		"$BRIDGE", e.bridge,
		"$OWN", e.own,
		"$LOCAL_PORT", e.local[strings.LastIndexByte(e.local, ':')+1:],
		"$LOCAL", e.local,
		"$OTHER", e.other,
		"$EVIL", e.evil,
		"$SOCKET", e.socket,
	}
}

// expand puts the real values in place of the placeholders.
func (e hostileEnv) expand(code string) string {
	return strings.NewReplacer(e.pairs()...).Replace(code)
}

// webCacheDir is the directory deno's Cache API wants; its name is a hash of
// the worker program's path, which changes with every version of the program.
var webCacheDir = regexp.MustCompile(`/web_cache/[0-9a-f]{64}`)

// workerDenoDir is the DENO_DIR a worker gets, a fresh directory in its
// server's run directory.
var workerDenoDir = regexp.MustCompile(regexp.QuoteMeta(filepath.Join(os.TempDir(), "mcp-run-python-")) + `\d+/worker-\d+`)

// normalise is expand's reverse, for results: the golden files then hold
// the placeholders, $HASH stands for the web cache's name, $DENO_DIR for
// the worker's own DENO_DIR, and $CARETS for the position marks under a
// line whose length varies with them. Nothing else varies between runs.
func (e hostileEnv) normalise(result string) string {
	p := e.pairs()
	reverse := make([]string, 0, len(p))
	for i := 0; i < len(p); i += 2 {
		reverse = append(reverse, p[i+1], p[i])
	}
	result = strings.NewReplacer(reverse...).Replace(result)
	result = workerDenoDir.ReplaceAllString(result, "$$DENO_DIR")
	result = webCacheDir.ReplaceAllString(result, "/web_cache/$$HASH")
	// A traceback marks the failing expression of a source line with ~ and
	// ^ under it, as long as the text was: under a line that held a value
	// of this machine, the marks become $CARETS.
	lines := strings.Split(result, "\n")
	for i := 1; i < len(lines); i++ {
		if caretLine.MatchString(lines[i]) && hasPlaceholder(lines[i-1], p) {
			lines[i] = "    $CARETS"
		}
	}
	return strings.Join(lines, "\n")
}

// caretLine is a line of a traceback's position marks.
var caretLine = regexp.MustCompile(`^ *[~^]+ *$`)

// hasPlaceholder reports whether line holds one of pairs' placeholders.
func hasPlaceholder(line string, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if strings.Contains(line, pairs[i]) {
			return true
		}
	}
	return false
}

// localService is an HTTP server on the loopback interface that answers
// every request with its text, /mod.js with a JavaScript module, and
// /redirect?to=URL with a redirect there.
type localService struct {
	addr string // host:port
	mu   sync.Mutex
	hits map[string]int // requests by path
}

// startLocalService starts a localService until the end of the test.
func startLocalService(t *testing.T, text string) *localService {
	t.Helper()
	l := &localService{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.hits[r.URL.Path]++
		l.mu.Unlock()
		switch r.URL.Path {
		case "/mod.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprintln(w, "export const pwned = true;")
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			fmt.Fprint(w, text)
		}
	}))
	t.Cleanup(srv.Close)
	l.addr = strings.TrimPrefix(srv.URL, "http://")
	return l
}

// requests returns how many requests for path the service has had.
func (l *localService) requests(path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[path]
}

// hostileWorld is what a probe's check looks at.
type hostileWorld struct {
	stderr func() string // the server's stderr so far
	local  *localService
	run    func(t *testing.T, code string) string // another call on the same server
}

// moduleNeverFetched checks that no worker ever fetched the local service's
// module: remote code is refused before any request.
func moduleNeverFetched(t *testing.T, w hostileWorld) {
	t.Helper()
	if n := w.local.requests("/mod.js"); n != 0 {
		t.Errorf("the local service served /mod.js %d times", n)
	}
}

// unixService listens on a Unix socket at path, as the Docker daemon does,
// and greets whoever connects; it returns path.
func unixService(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			fmt.Fprintln(conn, "hello from a unix socket")
			_ = conn.Close()
		}
	}()
	return path
}

// pyodideDir returns the Pyodide package of the cache, as workers read it.
func pyodideDir(cache string) (string, error) {
	found, err := filepath.Glob(filepath.Join(cache, "pyodide", "*", "node_modules", "pyodide"))
	if err != nil || len(found) != 1 {
		return "", fmt.Errorf("the Pyodide package in %s: %q, %v", cache, found, err)
	}
	return filepath.EvalSymlinks(found[0])
}

// workerProgram returns the directory of the program the server's workers
// run: the last argument of a worker's command line.
func workerProgram(t *testing.T, pid int) string {
	t.Helper()
	args := workerArgs(t, pid)
	return filepath.Dir(args[len(args)-1])
}

// workerArgs returns the command line of one of the server's workers.
func workerArgs(t *testing.T, pid int) []string {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		for _, w := range denoChildren(t, pid) {
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.pid))
			if err != nil {
				continue
			}
			args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
			if filepath.Base(args[len(args)-1]) == "worker.ts" { // not deno --version
				return args
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d started no worker within %v", pid, startTimeout)
		}
		time.Sleep(50 * time.Millisecond) // polling for the first worker
	}
}

// bridgeSocket returns the Unix socket of the server's bridge: the one
// path its workers may write.
func bridgeSocket(t *testing.T, pid int) string {
	t.Helper()
	for _, arg := range workerArgs(t, pid) {
		if path, ok := strings.CutPrefix(arg, "--allow-write="); ok {
			return path
		}
	}
	t.Fatalf("server %d: its workers may write nowhere, so its bridge has no socket", pid)
	return ""
}

// ownAddress returns an address of this machine's other than loopback, or
// a documentation address where it has none.
func ownAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return "192.0.2.7"
}

// hostileCases is the corpus, by family. Probes that would change
// something if they got through aim at harmless targets (new files, the
// modes files already have, SIGCONT): a broken sandbox must not break the
// shared cache or the machine.
func hostileCases() []hostileCase {
	return []hostileCase{
		// Host files through Deno's API: no write anywhere, reads only of
		// Pyodide's files and the snapshot.
		{name: "deno_read_passwd", code: "import js\njs.Deno.readTextFileSync('/etc/passwd')"},
		{name: "deno_read_cache_dir", code: "import js\nlist(js.Deno.readDirSync('$CACHE'))"},
		{name: "deno_read_worker_program", code: "import js\njs.Deno.readTextFileSync('$PROGRAM/worker.ts')"},
		{name: "deno_read_proc_environ", code: "import js\njs.Deno.readFileSync('/proc/self/environ')"},
		{name: "deno_read_dotdot", code: "import js\njs.Deno.readTextFileSync('$PYODIDE/../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../etc/passwd')"},
		{name: "deno_exec_path", code: "import js\njs.Deno.execPath()"},
		{name: "deno_write_tmp", code: "import js\njs.Deno.writeTextFileSync('/tmp/mcp-run-python-hostile.txt', 'x')"},
		{name: "deno_write_pyodide", code: "import js\njs.Deno.writeTextFileSync('$PYODIDE/poison.mjs', 'poisoned')"},
		{name: "deno_open_pyodide_for_write", code: jsObject + "js.Deno.openSync('$PYODIDE/pyodide.asm.js', obj({'write': True}))"},
		{name: "deno_remove", code: "import js\njs.Deno.removeSync('$PYODIDE/poison.mjs')"},
		{name: "deno_symlink", code: "import js\njs.Deno.symlinkSync('/etc/passwd', '$PYODIDE/poison-link')"},
		{name: "deno_caches", code: "import js\nawait js.caches.open('mcp-run-python-hostile')"},
		{name: "deno_local_storage", code: "import js\njs.localStorage.setItem('k', 'v')"},

		// The same through node's API and file URLs.
		{name: "node_fs_read", code: "import js\nfs = js.process.getBuiltinModule('node:fs')\nfs.readFileSync('/etc/passwd', 'utf8')"},
		{name: "node_fs_write", code: "import js\nfs = js.process.getBuiltinModule('node:fs')\nfs.writeFileSync('$PYODIDE/poison.mjs', 'poisoned')"},
		{name: "fetch_file_passwd", code: "import js\nawait js.fetch('file:///etc/passwd')"},
		{name: "fetch_file_worker_program", code: "import js\nawait js.fetch('file://$PROGRAM/worker.ts')"},
		// Python's own files are Pyodide's in-memory file system, not the host's.
		{name: "python_open_host_file", code: "open('/etc/passwd').read()"},
		{name: "python_listdir_root", code: "import os\nsorted(os.listdir('/'))"},

		// Environment variables.
		{name: "deno_env_get", code: "import js\njs.Deno.env.get('HOME')"},
		{name: "deno_env_to_object", code: "import js\njs.Deno.env.toObject()"},
		{name: "node_process_env", code: "import js\np = js.process.getBuiltinModule('node:process')\np.env.HOME"},
		{name: "python_environ", code: "import os\nsorted(os.environ)"},

		// Processes, FFI and the system.
		{name: "deno_command", code: jsObject + "js.Deno.Command.new('/bin/sh', obj({'args': ['-c', 'id']})).outputSync()"},
		{name: "deno_run", code: jsObject + "js.Deno.run(obj({'cmd': ['/bin/sh', '-c', 'id']}))"},
		{name: "node_child_process", code: jsObject + "cp = js.process.getBuiltinModule('node:child_process')\ncp.spawnSync('/bin/sh', to_js(['-c', 'id']), obj({'env': {}}))"},
		{name: "deno_kill", code: "import js\njs.Deno.kill(1, 'SIGCONT')"},
		{name: "python_subprocess", code: "import subprocess\nsubprocess.run(['id'])"},
		{name: "deno_dlopen", code: jsObject + "js.Deno.dlopen('libc.so.6', obj({'getpid': {'parameters': [], 'result': 'i32'}}))"},
		{name: "deno_hostname", code: "import js\njs.Deno.hostname()"},
		{name: "deno_permission_request", code: jsObject + "status = await js.Deno.permissions.request(obj({'name': 'write'}))\nstatus.state"},
		{name: "worker_escalates_permissions", code: jsObject + "js.Worker.new('data:text/javascript,', obj({'type': 'module', 'deno': {'permissions': {'write': True}}}))"},

		// Code from elsewhere. Python has no import() of its own: the
		// imports run in a Worker with the runner's permissions.
		{name: "import_remote", code: workerImport("http://$LOCAL/mod.js"), check: moduleNeverFetched},
		{name: "import_npm", code: workerImport("npm:left-pad")},
		{name: "import_local_module", code: workerImport("file://$EVIL")},
		{name: "import_worker_program", code: workerImport("file://$PROGRAM/worker.ts")},
		{name: "worker_from_remote", check: moduleNeverFetched, code: `import js
from asyncio import Future
from pyodide.ffi import create_proxy, to_js
failed = Future()
def on_error(e):
    e.preventDefault()
    failed.set_result(e.message)
worker = js.Worker.new('http://$LOCAL/mod.js', to_js({'type': 'module'}, dict_converter=js.Object.fromEntries))
worker.onerror = create_proxy(on_error)
await failed`},

		// Code from strings: V8 refuses it in every worker. Deno's internal
		// core.evalContext compiles through V8's embedder API, which the
		// flag does not cover: it is not refused (yet), and what such code
		// may do stays within the permissions the other probes meet.
		{name: "js_eval_refused", code: "import js\njs.eval('1 + 1')"},
		{name: "js_function_refused", code: "import js\njs.Function('return 1')"},
		{name: "run_js_refused", code: "from pyodide.code import run_js\nrun_js('1 + 1')"},
		{name: "deno_core_eval_context", code: "import js\ncore = js.Reflect.get(js.Deno, js.Deno.internal).core\ncore.evalContext('6 * 7', 'file:///probe.js')[0]"},

		// The network: by default user code reaches the internet, as
		// upstream, but not this machine (loopback and its own addresses),
		// nor link-local addresses where clouds serve their metadata. A
		// port scan finds nothing; the bridge is a Unix socket that only
		// the worker's own thread may open.
		{name: "net_default_internet_granted", code: jsObject + "js.Deno.permissions.querySync(obj({'name': 'net', 'host': 'example.com:443'})).state"},
		{name: "net_default_local_service", code: "import js\nr = await js.fetch('http://$LOCAL/')\nawait r.text()"},
		{name: "net_default_localhost", code: "import js\nawait js.fetch('http://localhost:$LOCAL_PORT/')"},
		{name: "net_default_ipv6_loopback", code: "import js\nawait js.fetch('http://[::1]:$LOCAL_PORT/')"},
		{name: "net_default_mapped_loopback", code: "import js\nawait js.fetch('http://[::ffff:127.0.0.1]:$LOCAL_PORT/')"},
		{name: "net_default_zero_address", code: "import js\nawait js.fetch('http://0.0.0.0:$LOCAL_PORT/')"},
		{name: "net_default_own_address", code: "import js\nawait js.fetch('http://$OWN:$LOCAL_PORT/')"},
		{name: "net_default_cloud_metadata", code: "import js\nawait js.fetch('http://169.254.169.254/latest/meta-data/')"},
		// Nor private networks, as browsers keep web pages from them (this
		// machine is on none: the probe shows the refusal, not a host).
		{name: "net_default_private_networks", code: jsObject + `hosts = ['10.0.0.1:80', '172.16.0.1:80', '172.31.255.254:443', '192.168.1.1:80', '100.64.0.1:80', '[::ffff:192.168.1.1]:80', '8.8.8.8:53']
for h in hosts:
    print(h, js.Deno.permissions.querySync(obj({'name': 'net', 'host': h})).state)
await js.fetch('http://192.168.1.1/')`},
		{name: "net_default_port_scan", code: portScan},
		// Python's own HTTP clients fetch too (js/fetch.py's _fetch), under the
		// same policy; a refusal names the flags.
		{name: "net_default_urlopen_local_service", code: "import urllib.request\nurllib.request.urlopen('http://$LOCAL/')"},
		{name: "unix_socket", code: jsObject + "await js.Deno.connect(obj({'transport': 'unix', 'path': '$SOCKET'}))"},
		{name: "vsock", code: jsObject + "await js.Deno.connect(obj({'transport': 'vsock', 'cid': 1, 'port': 1234}))"},
		{name: "bridge_connect", code: jsObject + "await js.Deno.connect(obj({'transport': 'unix', 'path': '$BRIDGE'}))"},
		{name: "bridge_websocket", code: bridgeWebSocket},

		// --disable-networking: nothing to reach, not even the bridge.
		{name: "off_fetch_local_service", server: serverOffline, code: "import js\nawait js.fetch('http://$LOCAL/')"},
		{name: "off_connect_bridge", server: serverOffline, code: jsObject + "await js.Deno.connect(obj({'transport': 'unix', 'path': '$BRIDGE'}))"},
		{name: "off_websocket_bridge", server: serverOffline, code: bridgeWebSocket},
		{name: "off_listen", server: serverOffline, code: jsObject + "js.Deno.listen(obj({'hostname': '127.0.0.1', 'port': 0}))"},
		{name: "off_resolve_dns", server: serverOffline, code: jsObject + "await js.Deno.resolveDns('localhost', 'A', obj({'nameServer': {'ipAddr': '127.0.0.1', 'port': 53}}))"},
		{name: "off_pyfetch", server: serverOffline, code: "from pyodide.http import pyfetch\nawait pyfetch('http://$OTHER/')"},
		{name: "off_http_client", server: serverOffline, code: "import http.client\nc = http.client.HTTPConnection('$LOCAL')\nc.request('GET', '/')"},

		// --allow-net for one local port: that port only, even on loopback.
		{name: "allow_fetch_allowed", server: serverAllowNet, code: "import js\nr = await js.fetch('http://$LOCAL/')\nawait r.text()"},
		{name: "allow_fetch_other_port", server: serverAllowNet, code: "import js\nawait js.fetch('http://$OTHER/')"},
		{name: "allow_redirect_to_other_port", server: serverAllowNet, code: "import js\nawait js.fetch('http://$LOCAL/redirect?to=http://$OTHER/')"},
		{name: "allow_fetch_localhost_alias", server: serverAllowNet, code: "import js\nawait js.fetch('http://localhost:$LOCAL_PORT/')"},
		{name: "allow_urlopen_allowed", server: serverAllowNet, code: "import urllib.request\nr = urllib.request.urlopen('http://$LOCAL/', timeout=5)\nr.status, r.read()"},
		{name: "allow_http_client_allowed", server: serverAllowNet, code: "import http.client\nc = http.client.HTTPConnection('$LOCAL', timeout=5)\nc.request('POST', '/', body=b'x')\nr = c.getresponse()\nfirst = r.status, r.read()\nc.request('GET', '/again')\nfirst, c.getresponse().read()"},
		// What urllib3 2.x's Emscripten backend (and so requests) fetches with.
		{name: "allow_run_sync_fetch", server: serverAllowNet, code: "import js\nfrom pyodide.ffi import can_run_sync, run_sync\nr = run_sync(js.fetch('http://$LOCAL/'))\ncan_run_sync(), r.status, run_sync(r.text())"},
		{name: "allow_urlopen_other_port", server: serverAllowNet, code: "import urllib.request\nurllib.request.urlopen('http://$OTHER/')"},
		{name: "allow_urlopen_redirect_to_other_port", server: serverAllowNet, code: "import urllib.request\nurllib.request.urlopen('http://$LOCAL/redirect?to=http://$OTHER/')"},
		{name: "allow_connect_bridge", server: serverAllowNet, code: jsObject + "await js.Deno.connect(obj({'transport': 'unix', 'path': '$BRIDGE'}))"},
		{name: "allow_websocket_bridge", server: serverAllowNet, code: bridgeWebSocket},

		// Frames forged from Python: the runner's postMessage reaches the
		// bridge, so Go checks every frame, and a forgery only ever concerns
		// the forger's own call on a worker about to be retired.
		{name: "forge_result", code: "import js\njs.postMessage('{\"type\": \"result\", \"status\": \"success\", \"return_string\": true, \"return_value\": \"forged\"}')\nimport time\ntime.sleep(1)\n'real'"},
		{name: "forge_unknown_status", code: "import js\njs.postMessage('{\"type\": \"result\", \"status\": \"pwned\"}')"},
		{name: "forge_malformed", code: "import js\njs.postMessage('{not json')"},
		{name: "forge_binary", code: "import js\njs.postMessage(js.Uint8Array.new(16))"},
		{name: "forge_fatal", code: "import js\njs.postMessage('{\"type\": \"fatal\", \"error\": \"forged\"}')"},
		// A round of questions from a call that may ask nothing (no
		// --sampling, no --elicitation): refused, the interpreter upstream's.
		{name: "forge_ask", code: "import json\nfrom _mcp_ask_bridge import ask\nfrom pyodide.ffi import run_sync\n" +
			"json.loads(run_sync(ask('[{\"kind\": \"model\", \"prompt\": \"x\"}, {\"kind\": \"person\", \"message\": \"y\"}]')))"},
		{name: "forge_output_past_limit", code: "import js, json\njs.postMessage(json.dumps({'type': 'output', 'stream': 'stdout', 'lines': ['x' * 100] * 1000}))\n'done'"},
		{name: "forge_huge_frame", code: "import js\njs.postMessage('x' * (80 << 20))"},
		// Forged files frames: past bridge.MaxEntries entries are refused,
		// said in one note, and a result shows at most 20 images.
		{name: "forge_files_400000", content: true, code: forgeFiles},
		{name: "forge_figures_20000", content: true, code: forgeFigures},
		// An SVG may carry scripts: linked, never image content; a file
		// whose name says PNG and whose bytes are HTML is not served as HTML.
		{name: "figure_svg_script", content: true, code: "class Pic:\n    def __repr__(self):\n        return 'Pic()'\n    def _repr_svg_(self):\n        return '<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>'\nPic()"},
		{name: "file_png_holding_html", content: true, code: "open('page.png', 'w').write('<html><script>alert(1)</script></html>')"},
		{name: "forge_globals", server: serverImpatient, code: "import js\nfrom pyodide.ffi import create_proxy\njs.globalThis.postMessage = create_proxy(lambda *args: None)\njs.self.onmessage = None\njs.Deno.exit = create_proxy(lambda *args: None)\nprint('replaced')\n'still delivered'"},
		{name: "runner_close", server: serverImpatient, code: "import js\njs.close()\n'closed'"},
		{name: "deno_exit", server: serverImpatient, code: "import js\njs.Deno.exit(0)"},

		// Many Web Workers.
		{name: "many_workers", code: inWorker + "for i in range(16):\n    start_worker('const a = new Uint8Array(128 << 20).fill(1); setInterval(() => a[0]++, 1000)')\nimport time\ntime.sleep(30)"},

		// Bombs, recursion, and code that will not stop.
		{name: "memory_bomb_python", code: "a = []\nwhile True:\n    a.append(bytearray(10**7))"},
		{name: "memory_bomb_js", code: inWorker + "start_worker('const a = []; for (;;) a.push(new Uint8Array(64 << 20).fill(1))')\nimport time\ntime.sleep(30)"},
		{name: "output_bomb", code: "for i in range(100000):\n    print('x' * 100)"},
		{name: "output_bomb_one_line", code: "print('x' * 10_000_000)"},
		{name: "recursion", code: "def f(n):\n    return f(n + 1)\n\nf(0)"},
		{name: "recursion_unlimited", code: "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\n\nf(0)"},
		{name: "keyboard_interrupt_ignored", server: serverImpatient, code: "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass"},
		{name: "sigint_ignored", server: serverImpatient, code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"},
		// JavaScript that never returns: in the runner's own thread, where
		// Python's interrupt cannot reach (a regular expression that
		// backtracks for ever), and in a Worker the call waits for.
		{name: "js_busy_loop", server: serverImpatient, code: "import js\njs.RegExp.new('^(a+)+$').test('a' * 64 + '!')"},
		{name: "js_busy_worker", server: serverImpatient, code: inWorker + "await in_worker('for (;;) {}')"},
		// stdin is the worker's lifeline, held open by the server: the
		// secret on its first line was read before any code ran, and a read
		// of what follows waits for the server to go away.
		{name: "deno_read_stdin_secret", server: serverImpatient, code: "import js\nbuf = js.Uint8Array.new(1024)\nstr(js.Deno.stdin.readSync(buf))"},
		{name: "asyncio_sleep_forever", server: serverImpatient, code: "import asyncio\nawait asyncio.sleep(10**6)"},

		// The standard streams.
		{name: "close_stdout", code: "import sys\nprint('before')\nsys.stdout.close()\nprint('after')"},
		{name: "os_close_fds", code: "import os\nprint('before', flush=True)\nos.close(1)\nos.close(2)\nprint('after')"},
		{name: "os_write_fds", code: "import os\nos.write(1, b'to fd 1\\n')\nos.write(2, b'to fd 2\\n')\n'written'"},
		{name: "deno_stdout_write", code: "import js\njs.Deno.stdout.writeSync(js.TextEncoder.new().encode('{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}\\n'))"},
		{name: "deno_stderr_write", code: "import js\njs.Deno.stderr.writeSync(js.TextEncoder.new().encode('forged log line\\n'))"},
		{name: "deno_stdout_close", code: "import js\njs.Deno.stdout.close()\njs.Deno.stderr.close()\nprint('still printing')"},

		// Every interpreter is restored from one memory snapshot: what a
		// module seeded at import must be seeded again in each, or every
		// caller gets the same "random" password and temporary names.
		{name: "random_state_per_interpreter", code: randomState + "\nlen(state.split())", check: randomStateDiffers},
	}
}

// randomState is code that puts in state what the random state of its
// interpreter makes: numbers, a password and a temporary file's name.
const randomState = `import random, string, tempfile
bits = random.getrandbits(64)
password = ''.join(random.choices(string.ascii_letters + string.digits, k=16))
name = next(tempfile._get_candidate_names())
state = f'{bits} {password} {name}'`

// randomStateDiffers runs randomState in two more interpreters: what each
// part of their random state makes must differ between them.
func randomStateDiffers(t *testing.T, w hostileWorld) {
	t.Helper()
	var outputs [2][]string
	for i := range outputs {
		got := w.run(t, randomState+"\nprint(state)")
		_, out, _ := strings.Cut(got, "<output>\n")
		out, _, _ = strings.Cut(out, "\n</output>")
		if outputs[i] = strings.Fields(out); len(outputs[i]) != 3 {
			t.Fatalf("randomState printed no bits, password and name:\n%s", got)
		}
	}
	for i, what := range []string{"random.getrandbits", "random.choices", "tempfile's name"} {
		if outputs[0][i] == outputs[1][i] {
			t.Errorf("%s gave %s in two interpreters", what, outputs[0][i])
		}
	}
}

// bridgeWebSocket is code that dials the bridge the way a worker's own
// thread does: a WebSocket through an HTTP client whose proxy is the
// bridge's Unix socket.
const bridgeWebSocket = jsObject + `client = js.Deno.createHttpClient(obj({'proxy': {'transport': 'unix', 'path': '$BRIDGE'}}))
js.WebSocket.new('ws://192.0.2.1/', obj({'client': client}))`

// portScan is code that tries the first 1024 ports of loopback, and
// returns how each attempt failed, counted.
const portScan = jsObject + `from collections import Counter
outcomes = Counter()
for port in range(1, 1025):
    try:
        c = await js.Deno.connect(obj({'hostname': '127.0.0.1', 'port': port}))
        c.close()
        outcomes['connected'] += 1
    except Exception as e:
        outcomes[type(e).__name__ + ': ' + str(e).split('"')[0]] += 1
dict(outcomes)`

// forgeFiles is code that forges the files frame of its call: 400 000
// entries, three with bytes, the rest deleted files.
const forgeFiles = `import js
from pyodide.ffi import to_js
forged = [f'{{"path": "/home/pyodide/forged-{i}.txt", "size": 1}}' for i in range(3)]
gone = [f'{{"path": "/home/pyodide/gone-{i}", "deleted": true}}' for i in range(3, 400000)]
js.postMessage('{"type": "files", "changes": [' + ', '.join(forged + gone) + '], "figures": []}')
for i in range(3):
    js.postMessage(to_js(b'x'))
'sent'`

// forgeFigures is code that forges 20 000 figures, each a PNG's first
// bytes: twice bridge.MaxEntries. (200 000 take longer than the time limit
// to relay.)
const forgeFigures = `import js, json
from pyodide.ffi import to_js
png = to_js(bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]))
figures = [{'mime_type': 'image/png', 'size': png.length}] * 20000
js.postMessage(json.dumps({'type': 'files', 'changes': [], 'figures': figures}))
post = js.postMessage
for figure in figures:
    post(png)
'sent'`

// jsObject is the start of code that passes JavaScript objects: obj makes
// one of a dict, as js.eval("({...})") did before workers refused code
// from strings.
const jsObject = `import js
from pyodide.ffi import to_js
def obj(d):
    return to_js(d, dict_converter=js.Object.fromEntries)
`

// inWorker is the start of code that runs JavaScript of its own without
// code from strings: start_worker runs source in a module Worker made from
// a data: URL, with the runner's permissions; in_worker also waits for the
// first message it posts, or the error that ends it, and ends it.
const inWorker = `import js
from asyncio import Future
from pyodide.ffi import create_proxy, to_js
def start_worker(source):
    url = 'data:text/javascript,' + js.encodeURIComponent(source)
    return js.Worker.new(url, to_js({'type': 'module'}, dict_converter=js.Object.fromEntries))
async def in_worker(source):
    done = Future()
    def on_error(e):
        e.preventDefault()
        done.set_result(e.message)
    worker = start_worker(source)
    worker.onmessage = create_proxy(lambda e: done.set_result(e.data))
    worker.onerror = create_proxy(on_error)
    try:
        return await done
    finally:
        worker.terminate()
`

// workerImport is code that imports specifier with import() in a Worker
// (see inWorker) and returns the error, or "imported".
func workerImport(specifier string) string {
	return inWorker + fmt.Sprintf(`await in_worker("import('%s').then(() => postMessage('imported'), (e) => postMessage(String(e)))")`, specifier)
}

// callURI is the random id of a call's files in a URI.
var callURI = regexp.MustCompile(`call://[0-9a-f]{32}/`)

// contentSummary is every content item of a result, a line or block each:
// text as it is, images by type and size, links by name, type, size and
// URI (a call's id as $CALL). A run of equal lines is written once, with
// its count.
func contentSummary(res *mcp.CallToolResult) string {
	var lines []string
	var counts []int
	for _, c := range res.Content {
		var line string
		switch c := c.(type) {
		case mcp.TextContent:
			line = c.Text
		case mcp.ImageContent:
			data, _ := base64.StdEncoding.DecodeString(c.Data)
			line = fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(data))
		case mcp.ResourceLink:
			size := int64(-1)
			if c.Size != nil {
				size = *c.Size
			}
			line = fmt.Sprintf("[resource_link %q %s, %d bytes, %s]", c.Name, c.MIMEType, size, callURI.ReplaceAllString(c.URI, "call://$$CALL/"))
		default:
			line = fmt.Sprintf("[%T]", c)
		}
		if n := len(lines); n > 0 && lines[n-1] == line {
			counts[n-1]++
			continue
		}
		lines, counts = append(lines, line), append(counts, 1)
	}
	for i, n := range counts {
		if n > 1 {
			lines[i] = fmt.Sprintf("%s × %d", lines[i], n)
		}
	}
	if res.IsError {
		lines = append([]string{"[isError]"}, lines...)
	}
	return strings.Join(lines, "\n")
}
