package toolbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// stopGrace is how long a stdio server has to exit once its stdin is
// closed, before it is killed.
const stopGrace = 2 * time.Second

// stdioProcess is the transport of a stdio server: mcp-go's, over the
// pipes of a process the toolbox starts itself, so that the server's
// stdout is read through a readGuard (mcp-go's own process transport reads
// each line whole, however long).
type stdioProcess struct {
	*transport.Stdio
	cmd    *exec.Cmd
	stdout *os.File // the read end of the process's stdout
	exited chan struct{}
	err    error // how the process ended, once exited is closed
}

// startStdio starts the process of cfg, whose messages g bounds.
func startStdio(cfg ServerConfig, g *readGuard, logger *slog.Logger) (*stdioProcess, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = cfg.environ() // not ours: see inheritedEnv
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Pipes of our own rather than cmd's: Wait would close those as soon
	// as the process exits, before its last answer is read.
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdoutR, stdoutW)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	err = cmd.Start()
	closeAll(stdoutW, stderrW) // the process has its own copies
	if err != nil {
		closeAll(stdoutR, stderrR)
		_ = stdin.Close()
		return nil, err
	}
	p := &stdioProcess{
		Stdio:  transport.NewIO(g.reader(stdoutR, eachLine), stdin, stderrR),
		cmd:    cmd,
		stdout: stdoutR,
		exited: make(chan struct{}),
	}
	transport.WithCommandLogger(logger)(p.Stdio)
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Close closes the server's stdin, which ends a well-behaved server, kills
// it if it is still there after stopGrace, and waits for it. The error is
// how it ended, if not well.
func (p *stdioProcess) Close() error {
	err := p.Stdio.Close() // ends the requests in flight, closes stdin and stderr
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		if kerr := p.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = errors.Join(err, fmt.Errorf("kill: %w", kerr))
		}
		<-p.exited
	}
	// Its children may hold the pipe open: nothing more is read from it.
	_ = p.stdout.Close()
	return errors.Join(err, p.err)
}

// closeAll closes files whose errors do not matter: pipes never used.
func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
