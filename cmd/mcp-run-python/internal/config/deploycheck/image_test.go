//go:build imagetest

package deploycheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// The image test (`make image-test`, build tag imagetest): it builds the
// image from the Dockerfile and checks the running container as the pods
// run it: the Deployment's arguments, memory limit and read-only root, on a
// network without egress, as its NetworkPolicy leaves the pods. It needs a
// Docker engine with BuildKit and nothing else: base images it cannot pull
// it makes with deploy/image/base-images.sh (which needs root and
// debootstrap). Its figures (build time, image size, time to the first
// result, later calls, memory at rest) are logged; run it with -v.
//
// Variables: DOCKER (the CLI, docker by default), IMAGE (test this image
// rather than build one), and the build arguments PYODIDE_PACKAGES,
// PYODIDE_INDEX_URL, NPM_CONFIG_REGISTRY and EXTRA_CA_CERTS (numpy is checked
// to import without egress unless PYODIDE_PACKAGES leaves it out).

// tokenArg is the Deployment's argument the container goes without: the
// Secret's file would have to be the container user's, which a test that
// runs as an ordinary user cannot arrange; the kind job tests it.
const tokenArg = "--auth-token-file="

// engine is the Docker CLI and the engine behind it.
type engine struct{ cli string }

// newEngine finds the engine, or skips the test: a machine without one
// cannot run it, and says so.
func newEngine(t *testing.T) engine {
	t.Helper()
	e := engine{cli: "docker"}
	if cli := os.Getenv("DOCKER"); cli != "" {
		e.cli = cli
	}
	if v, err := e.try(t.Context(), "version", "--format", "{{.Server.Version}}"); err != nil {
		t.Skipf("SKIPPED: no Docker engine (%s version: %v)", e.cli, err)
	} else {
		t.Logf("Docker engine %s", v)
	}
	if runtime.GOOS != "linux" {
		// The container is reached at its address on an internal network,
		// which only a Linux host routes to.
		t.Skip("SKIPPED: the image test reaches containers on a bridge network, which only Linux hosts can")
	}
	return e
}

// try runs the CLI and returns its trimmed output.
func (e engine) try(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e.cli, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// BuildKit: Docker 20.10 builds with it only when asked.
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=1")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", e.cli, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// run runs the CLI and fails the test when it fails.
func (e engine) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.try(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cleanup removes what the test made, when it ends.
func (e engine) cleanup(t *testing.T, args ...string) {
	t.Cleanup(func() {
		if _, err := e.try(context.Background(), args...); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

// image builds the image, or returns $IMAGE.
func (e engine) image(t *testing.T) string {
	t.Helper()
	if img := os.Getenv("IMAGE"); img != "" {
		return img
	}
	e.baseImages(t)
	tag := "mcp-run-python:image-test"
	args := []string{"build", "-t", tag}
	// The Dockerfile's build arguments that the environment sets: what to
	// carry, and how to build without the internet or behind a proxy of
	// one's own (docs/DEPLOY.md).
	for _, arg := range []string{"PYODIDE_PACKAGES", "PYODIDE_INDEX_URL", "NPM_CONFIG_REGISTRY", "EXTRA_CA_CERTS"} {
		if v, ok := os.LookupEnv(arg); ok {
			args = append(args, "--build-arg", arg+"="+v)
		}
	}
	start := time.Now()
	e.run(t, append(args, repoRoot)...)
	size, err := strconv.ParseInt(e.run(t, "image", "inspect", "--format", "{{.Size}}", tag), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE build: %s, image %d MB", time.Since(start).Round(time.Second), size/1e6)
	return tag
}

// baseImages makes sure the Dockerfile's base images are there: pulled, or
// made from Debian's archive where no registry answers.
func (e engine) baseImages(t *testing.T) {
	t.Helper()
	d := loadDockerfile(t)
	var missing []string
	for _, s := range d.stages {
		base := d.base(s)
		if _, err := e.try(t.Context(), "image", "inspect", base); err == nil {
			continue
		}
		if _, err := e.try(t.Context(), "pull", base); err != nil {
			t.Logf("cannot pull %s: %v", base, err)
			missing = append(missing, base)
		}
	}
	if len(missing) == 0 {
		return
	}
	t.Logf("making %s with deploy/image/base-images.sh", strings.Join(missing, ", "))
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "deploy", "image", "base-images.sh"))
	cmd.Env = append(os.Environ(), "DOCKER="+e.cli)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("no registry gave %s, and base-images.sh could not make them: %v\n%s", missing, err, out)
	}
}

// container is the running server.
type container struct {
	e    engine
	id   string
	url  string // http://ADDRESS:PORT
	port int
}

// startContainer runs the image as the Deployment runs it: its arguments
// (but the token file), its memory limit, a read-only root with writable
// /tmp and cache, user 65532 from the image, and a network that reaches
// nothing outside, as the NetworkPolicy leaves a pod. It returns when the
// container runs; started is when `docker run` was called.
func startContainer(t *testing.T, e engine, image string) (c container, started time.Time) {
	t.Helper()
	k := loadKube(t)
	server := k.server(t)
	cfg := serverConfig(t, k, loadDockerfile(t))
	args := slices.DeleteFunc(slices.Clone(server.Args), func(a string) bool { return strings.HasPrefix(a, tokenArg) })
	memory := server.Resources.Limits.Memory().Value()

	suffix := randomSuffix(t)
	network := "mcp-run-python-test-" + suffix
	e.run(t, "network", "create", "--internal", network)
	e.cleanup(t, "network", "rm", network)
	volume := "mcp-run-python-test-" + suffix
	e.run(t, "volume", "create", volume)
	e.cleanup(t, "volume", "rm", volume)

	started = time.Now()
	run := []string{"run", "--detach", "--network", network, "--read-only", "--tmpfs", "/tmp",
		"--memory", strconv.FormatInt(memory, 10), "--memory-swap", strconv.FormatInt(memory, 10),
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--volume", volume + ":" + cfg.Supervisor.CacheDir, image}
	c = container{e: e, id: e.run(t, append(run, args...)...), port: cfg.Port}
	e.cleanup(t, "rm", "--force", "--volumes", c.id)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(e.cli, "logs", "--tail", "100", c.id).CombinedOutput()
			t.Logf("the container's log:\n%s", logs)
		}
	})
	addr := e.run(t, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c.id)
	c.url = "http://" + addr + ":" + strconv.Itoa(c.port)
	return c, started
}

// randomSuffix names the test's network and volume apart from another
// run's.
func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// connect returns an initialized MCP client of the container, over
// Streamable HTTP.
func (c container) connect(t *testing.T) *mcptest.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(c.url + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	return mcptest.NewClient(t, tr, mcptest.Legacy)
}

// call runs code and returns its result's text, which starts with its
// status (<status>success</status>, run-error, install-error), as
// upstream's: a failed run is no MCP tool error.
func (c container) call(t *testing.T, code string) string {
	t.Helper()
	text, _, err := c.connect(t).Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: code})
	if err != nil {
		t.Fatalf("call %q: %v", code, err)
	}
	return text
}

// wantCall runs code and fails unless its result is a success holding want.
func (c container) wantCall(t *testing.T, code, want string) {
	t.Helper()
	if text := c.call(t, code); !strings.HasPrefix(text, success) || !strings.Contains(text, want) {
		t.Fatalf("call %q: %q, want a success with %q", code, text, want)
	}
}

// success starts the text of a successful call.
const success = "<status>success</status>"

// answers reports whether the container's port takes a request.
func (c container) answers() bool {
	resp, err := http.Get(c.url + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// exec runs a shell command in the container, as its user.
func (c container) exec(t *testing.T, script string) string {
	t.Helper()
	return c.e.run(t, "exec", c.id, "sh", "-c", script)
}

// inspect returns a field of docker inspect.
func (c container) inspect(t *testing.T, format string) string {
	t.Helper()
	return c.e.run(t, "inspect", "--format", format, c.id)
}

// get returns the status and body of a GET of path.
func (c container) get(t *testing.T, path string) (int, string) {
	t.Helper()
	status, _, body := mcptest.Get(t, c.url+path)
	return status, body
}

// metric returns the value of the series of /metrics that matches pattern
// (a regular expression for the name and labels), or -1 when none does.
func (c container) metric(t *testing.T, pattern string) float64 {
	t.Helper()
	_, body := c.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^` + pattern + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metric %s: %v", pattern, err)
	}
	return v
}

// waitFor polls cond until it holds, failing after mcptest.Timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(mcptest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: not %s", mcptest.Timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// process is one of the container's processes.
type process struct {
	pid, uid, name string
	rssKiB         int
}

// processes lists the container's processes (but the shell that lists
// them), from /proc read by the shell alone, which starts no process that
// would come and go meanwhile.
func (c container) processes(t *testing.T) []process {
	t.Helper()
	out := c.exec(t, `for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = $$ ] && continue
		name= uid= rss=0
		while read -r key value rest; do
			case $key in Name:) name=$value ;; Uid:) uid=$value ;; VmRSS:) rss=$value ;; esac
		done <$p/status 2>/dev/null || continue
		echo "${p#/proc/} $uid $name $rss"
	done`)
	var procs []process
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("processes: %q", out)
		}
		rss, err := strconv.Atoi(f[3])
		if err != nil {
			t.Fatalf("processes: %q", out)
		}
		procs = append(procs, process{pid: f[0], uid: f[1], name: f[2], rssKiB: rss})
	}
	return procs
}

// workerPIDs lists the PIDs of the container's Deno processes (the
// workers).
func (c container) workerPIDs(t *testing.T) []string {
	t.Helper()
	var pids []string
	for _, p := range c.processes(t) {
		if p.name == "deno" {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// running starts code in the background and returns once it has run for a
// second (the server's progress notifications say so), with its result to
// come.
func (c container) running(t *testing.T, code string) <-chan mcptest.CallResult {
	t.Helper()
	ctx := mcptest.Context(t)
	cl := c.connect(t)
	runs := make(chan struct{})
	var once sync.Once
	cl.OnNotification(func(n mcp.JSONRPCNotification) {
		if msg, _ := n.Params.AdditionalFields["message"].(string); n.Method == string(mcp.MethodNotificationProgress) && strings.HasPrefix(msg, "running: 1s") {
			once.Do(func() { close(runs) })
		}
	})
	done := make(chan mcptest.CallResult, 1)
	go func() {
		res, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{
			Name: mcptest.ToolName, Arguments: map[string]any{mcptest.CodeArgument: code}, Meta: &mcp.Meta{ProgressToken: 1},
		}})
		if err == nil {
			var text string
			text, err = mcptest.Text(res)
			done <- mcptest.CallResult{Text: text, IsError: res.IsError, Err: err}
			return
		}
		done <- mcptest.CallResult{Err: err}
	}()
	select {
	case <-runs:
		return done
	case r := <-done:
		t.Fatalf("%q ended before it ran a second: %+v", code, r)
	case <-ctx.Done():
		t.Fatalf("%q: no progress", code)
	}
	return nil
}

// warm is the /metrics series of warm workers.
const warm = `mcp_run_python_workers\{state="warm"\}`

// TestImage builds the image and checks what docs/DEPLOY.md says of a
// container of it, in order: the last check stops it.
func TestImage(t *testing.T) {
	e := newEngine(t)
	image := e.image(t)
	c, started := startContainer(t, e, image)

	// Without a first result the other checks have nothing to check.
	if !t.Run("first call", func(t *testing.T) {
		// The first result after `docker run`: the port opens before the
		// workers are restored, and the call waits for one.
		ctx := mcptest.Context(t)
		for !c.answers() {
			if ctx.Err() != nil {
				t.Fatal("the port never opened")
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.wantCall(t, "1+1", "2")
		t.Logf("FIGURE first result %s after docker run", time.Since(started).Round(10*time.Millisecond))
		// Later calls, each when both workers are warm again (a call
		// retires its worker, whose replacement is restored meanwhile), and
		// back to back.
		for _, spaced := range []bool{true, false} {
			var took []time.Duration
			for range 10 {
				if spaced {
					waitFor(t, "two warm workers", func() bool { return c.metric(t, warm) == 2 })
				}
				start := time.Now()
				c.wantCall(t, "1+1", "2")
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			t.Logf("FIGURE later calls (10, each with its own connection and initialize; spaced: %v): median %s, max %s",
				spaced, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		}
	}) {
		t.FailNow()
	}

	t.Run("tools", func(t *testing.T) {
		res, err := c.connect(t).ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) == 0 || res.Tools[0].Name != mcptest.ToolName {
			t.Errorf("tools/list: %+v", res.Tools)
		}
	})

	t.Run("endpoints", func(t *testing.T) {
		if status, body := c.get(t, "/healthz"); status != http.StatusOK {
			t.Errorf("/healthz: %d %q", status, body)
		}
		if status, body := c.get(t, "/readyz"); status != http.StatusOK || !strings.HasPrefix(body, "ready") {
			t.Errorf("/readyz: %d %q", status, body)
		}
		// Every series the custom-metrics autoscaler asks for, with its
		// selector's labels.
		for _, m := range loadKube(t).hpas["hpa-custom-metrics.yaml"].Spec.Metrics {
			if m.Type != autoscalingv2.PodsMetricSourceType {
				continue
			}
			pattern := regexp.QuoteMeta(m.Pods.Metric.Name)
			if sel := m.Pods.Metric.Selector; sel != nil {
				for k, v := range sel.MatchLabels {
					pattern += `\{[^}]*` + regexp.QuoteMeta(k+`="`+v+`"`) + `[^}]*\}`
				}
			} else {
				pattern += `(?:\{[^}]*\})?`
			}
			if c.metric(t, pattern) < 0 {
				t.Errorf("/metrics has no series %s, which hpa-custom-metrics.yaml scales on", pattern)
			}
		}
	})

	t.Run("user", func(t *testing.T) {
		// Every process, the workers included, runs as the image's user.
		uid, _ := loadDockerfile(t).user(t)
		procs := c.processes(t)
		for _, p := range procs {
			if p.uid != strconv.FormatInt(uid, 10) {
				t.Errorf("process %+v does not run as %d", p, uid)
			}
		}
		if len(c.workerPIDs(t)) == 0 {
			t.Errorf("no worker among %+v", procs)
		}
	})

	t.Run("read-only root", func(t *testing.T) {
		if c.inspect(t, "{{.HostConfig.ReadonlyRootfs}}") != "true" {
			t.Fatal("the root is not read-only")
		}
		if out, err := c.e.try(t.Context(), "exec", c.id, "touch", "/usr/local/bin/x"); err == nil ||
			!strings.Contains(err.Error(), "Read-only file system") {
			t.Errorf("writing to the root: %q, %v", out, err)
		}
	})

	t.Run("memory at rest", func(t *testing.T) {
		waitFor(t, "two warm workers", func() bool { return c.metric(t, warm) == 2 })
		var total int
		for _, p := range c.processes(t) {
			total += p.rssKiB
			t.Logf("FIGURE rss at rest of %s (pid %s): %d MiB", p.name, p.pid, p.rssKiB/1024)
		}
		t.Logf("FIGURE rss at rest of the container's processes: %d MiB (shared pages counted in each); the engine counts %s",
			total/1024, c.e.run(t, "stats", "--no-stream", "--format", "{{.MemUsage}}", c.id))
	})

	t.Run("no egress", func(t *testing.T) {
		// A package the image does not carry comes from an index that no
		// network leads to: an install error, which Docker's versions reach
		// differently (Docker 20.10's DNS times out, later ones answer for
		// an internal network at once), so its words are the unit tests'
		// (packages.TestUnreachableNamesTheCause).
		start := time.Now()
		text := c.call(t, "# /// script\n# dependencies = ['cowsay']\n# ///\nimport cowsay")
		t.Logf("FIGURE install without egress failed after %s: %s", time.Since(start).Round(100*time.Millisecond), text)
		if !strings.HasPrefix(text, "<status>install-error</status>") || !strings.Contains(text, "cannot reach https://pypi.org/") {
			t.Errorf("a package from PyPI without egress: %q", text)
		}
		// What the image carries imports all the same.
		if p, set := os.LookupEnv("PYODIDE_PACKAGES"); set && !slices.Contains(strings.Fields(p), "numpy") {
			t.Logf("the image carries no numpy (PYODIDE_PACKAGES=%q): not tried", p)
			return
		}
		c.wantCall(t, "import numpy\nint(numpy.arange(4).sum())", "6")
	})

	t.Run("killed idle worker", func(t *testing.T) {
		waitFor(t, "two warm workers", func() bool { return c.metric(t, warm) == 2 })
		restarts := c.metric(t, `mcp_run_python_worker_restarts_total`)
		pid := c.workerPIDs(t)[0]
		c.exec(t, "kill -KILL "+pid)
		waitFor(t, "a replacement for the killed worker", func() bool {
			return c.metric(t, `mcp_run_python_worker_restarts_total`) > restarts
		})
		c.wantCall(t, "1+1", "2")
	})

	t.Run("killed busy worker", func(t *testing.T) {
		result := c.running(t, "import time\ntime.sleep(20)")
		c.exec(t, "kill -KILL "+strings.Join(c.workerPIDs(t), " "))
		r := mcptest.Wait(t, result)
		if r.Err != nil || !strings.Contains(r.Text, "RuntimeError: the Python worker stopped while running the code (killed by SIGKILL)") {
			t.Errorf("the call of a killed worker: %+v", r)
		}
		c.wantCall(t, "1+1", "2")
	})

	t.Run("memory bomb", func(t *testing.T) {
		text := c.call(t, "x = []\nwhile True:\n    x.append(bytearray(2**24))")
		if !strings.HasPrefix(text, "<status>run-error</status>") || !strings.Contains(text, "MemoryError: the code used more than") {
			t.Errorf("the memory bomb: %q", text)
		}
		if got := c.inspect(t, "{{.State.Running}} {{.State.OOMKilled}}"); got != "true false" {
			t.Errorf("after the memory bomb the container's state is %q (running, OOM-killed)", got)
		}
		c.wantCall(t, "1+1", "2")
	})

	t.Run("drain on stop", func(t *testing.T) {
		// docker stop sends SIGTERM: the port closes at once (so probes see
		// a refused connection, not a 503), and the running call finishes.
		result := c.running(t, "import time\ntime.sleep(3)\n'drained'")
		stopped := make(chan error, 1)
		go func() {
			_, err := c.e.try(context.Background(), "stop", "--time", "45", c.id)
			stopped <- err
		}()
		waitFor(t, "the port closed", func() bool { return !c.answers() })
		if r := mcptest.Wait(t, result); r.Err != nil || !strings.HasPrefix(r.Text, success) || !strings.Contains(r.Text, "drained") {
			t.Errorf("the call running at SIGTERM: %+v", r)
		}
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if code := c.inspect(t, "{{.State.ExitCode}}"); code != "0" {
			t.Errorf("exit status %s after SIGTERM, want 0", code)
		}
	})
}
