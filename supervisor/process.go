package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/permissions"
)

// stderrLines is how many of a worker's last stderr lines are kept to
// explain its failures; the rest is only logged.
const stderrLines = 20

// worker is one deno process and its bridge connection.
type worker struct {
	cmd      *exec.Cmd
	conn     *bridge.Conn
	python   string // Python version the worker reported, such as "3.14.2"
	restored bool   // Pyodide came from the memory snapshot

	exited   chan struct{} // closed when the process has been reaped
	exitErr  error         // set before exited is closed
	released chan struct{} // closed after exited, once its private DENO_DIR is gone

	mu     sync.Mutex
	stderr []string // last lines, for error messages
}

// noDenoDir is the DENO_DIR of workers when there is no code cache to copy:
// a directory that cannot exist, as /dev/null is no directory, not even for
// root. See denodir.go.
const noDenoDir = "/dev/null/deno"

// workerConfig is what worker.ts reads from stdin.
type workerConfig struct {
	Secret      string                        `json:"secret"`
	Bridge      string                        `json:"bridge"`
	Init        workerInit                    `json:"init"`
	Permissions permissions.RunnerPermissions `json:"permissions"`
}

type workerInit struct {
	Type         string `json:"type"`
	Pyodide      string `json:"pyodide"`
	Snapshot     string `json:"snapshot,omitempty"`
	MakeSnapshot bool   `json:"makeSnapshot,omitempty"`
	OutputLimit  int    `json:"outputLimit,omitempty"`
}

// policy is the sandbox of a worker: it reads the runtime files it needs and
// reaches the bridge; its runner reaches the network only if allowed.
func (s *Supervisor) policy(rt *runtimeFiles, makeSnapshot bool) permissions.Policy {
	p := permissions.Policy{Read: []string{rt.pyodide}, Program: filepath.Dir(rt.entry), Bridge: s.bridge.Addr()}
	if !makeSnapshot && rt.snapshot != "" {
		p.Read = append(p.Read, rt.snapshot)
	}
	switch {
	case makeSnapshot || !s.cfg.Networking:
	case len(s.cfg.AllowNet) > 0:
		p.Network = permissions.Network{Hosts: s.cfg.AllowNet}
	default:
		p.Network = permissions.Network{All: true}
	}
	return p
}

// spawn starts a worker and waits until it is connected and has loaded
// Pyodide. A snapshot worker is returned once connected: it sends its
// snapshot instead of a ready frame. denoDir is the worker's DENO_DIR; ""
// gives it a private copy of the runtime's code cache, removed when it exits.
func (s *Supervisor) spawn(ctx context.Context, rt *runtimeFiles, makeSnapshot bool, denoDir string) (*worker, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()

	secret := bridge.NewSecret()
	connected, withdraw := s.bridge.Expect(secret)
	defer withdraw()

	policy := s.policy(rt, makeSnapshot)
	private := ""
	if denoDir == "" {
		denoDir = noDenoDir
		if rt.codeCache != "" {
			var err error
			if private, err = privateDenoDir(rt.codeCache); err != nil {
				return nil, err
			}
			denoDir = private
		}
	}
	policy.CodeCache = denoDir != noDenoDir
	removePrivate := func() {
		if private != "" {
			_ = os.RemoveAll(private)
		}
	}
	init := workerInit{Type: "init", Pyodide: rt.pyodide, MakeSnapshot: makeSnapshot, OutputLimit: s.cfg.OutputLimit}
	if !makeSnapshot {
		init.Snapshot = rt.snapshot
	}
	config, err := json.Marshal(workerConfig{
		Secret:      secret,
		Bridge:      s.bridge.URL(),
		Init:        init,
		Permissions: permissions.Runner(policy),
	})
	if err != nil {
		return nil, err
	}

	args := append([]string{"run"}, permissions.Flags(policy)...)
	cmd := exec.Command(s.cfg.Deno, append(args, rt.entry)...)
	cmd.Env = denoEnv(denoDir)
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(string(config))
	// Out of our process group, so a terminal's Ctrl-C reaches only us and
	// we stop workers in order; and killed with us, so a crashed supervisor
	// leaves no workers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		removePrivate()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		removePrivate()
		return nil, fmt.Errorf("start deno: %w", err)
	}
	w := &worker{cmd: cmd, exited: make(chan struct{}), released: make(chan struct{})}
	log := s.log.With(zap.Int("pid", cmd.Process.Pid))
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		w.collectStderr(stderr, log)
	}()
	go func() {
		<-stderrDone // Wait closes the pipe: read it all first
		w.exitErr = cmd.Wait()
		// Dead before its directory is gone: removing a few MiB takes a
		// while on a loaded machine, and meanwhile the pool must not hand
		// the worker to a call.
		close(w.exited)
		removePrivate()
		close(w.released)
	}()

	select {
	case w.conn = <-connected:
	case <-w.exited:
		<-w.released
		return nil, fmt.Errorf("worker exited before connecting: %v (%s)", w.exitErr, w.stderrTail())
	case <-ctx.Done():
		w.kill()
		return nil, fmt.Errorf("worker did not connect: %w (%s)", context.Cause(ctx), w.stderrTail())
	}
	if makeSnapshot {
		return w, nil
	}
	ready, err := w.conn.Ready(ctx)
	if err != nil {
		w.kill()
		return nil, fmt.Errorf("worker did not get ready: %w (%s)", err, w.stderrTail())
	}
	w.python, w.restored = ready.Python, ready.Snapshot
	log.Debug("worker ready", zap.Bool("snapshot", ready.Snapshot), zap.String("python", ready.Python))
	return w, nil
}

// collectStderr logs what deno prints and keeps the last lines. User code
// can print there too (through `import js`), so lines are logged at debug
// level only, and cut to a sane length.
func (w *worker) collectStderr(r io.Reader, log *zap.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 1000 {
			line = line[:1000] + "…"
		}
		log.Debug("worker stderr", zap.String("line", line))
		w.mu.Lock()
		w.stderr = append(w.stderr, line)
		if len(w.stderr) > stderrLines {
			w.stderr = w.stderr[1:]
		}
		w.mu.Unlock()
	}
}

func (w *worker) stderrTail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.stderr) == 0 {
		return "no output on stderr"
	}
	return strings.Join(w.stderr, "\n")
}

// kill stops the worker for good: the only stop a busy Deno worker obeys.
// It returns once the process is reaped and its files are gone.
func (w *worker) kill() {
	if w.conn != nil {
		w.conn.Close()
	}
	// Through os.Process, which signals by pidfd: never another process
	// that reused the pid of one already reaped. A worker may start no
	// process of its own (--deny-run), so the process is all there is.
	_ = w.cmd.Process.Kill()
	<-w.released
}

// dead reports whether the process has ended.
func (w *worker) dead() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// exitStatus describes how the process ended, once it has.
func (w *worker) exitStatus() string {
	var ee *exec.ExitError
	if errors.As(w.exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + unix.SignalName(ws.Signal())
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if w.exitErr != nil {
		return w.exitErr.Error()
	}
	return "exit status 0"
}
