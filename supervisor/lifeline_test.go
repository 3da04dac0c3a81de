package supervisor

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	ps "github.com/shirou/gopsutil/v4/process"
	"go.uber.org/zap/zaptest"
)

// Killing the server with SIGKILL must leave no worker behind, on every
// platform. The server here starts its workers with the platform's own
// guard (Linux's parent-death signal) turned off, so what is tested is the
// portable rule alone: a worker ends when its stdin or its bridge
// connection does, and the system closes both when the server dies.
func TestWorkersEndWithTheirServer(t *testing.T) {
	for _, call := range []string{"idle", "busy"} {
		t.Run(call, func(t *testing.T) {
			tmp := t.TempDir() // the server's temporary directory, where its run directory goes
			cmd := helperCommand("server", "HELPER_DENO="+testDeno(t), "HELPER_CACHE="+testCache(t), "HELPER_CALL="+call,
				"TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("TMPDIR", tmp) // for the next server, below
			t.Setenv("TMP", tmp)
			t.Setenv("TEMP", tmp)
			// Where run directories go: tmp, or /tmp on macOS, where tmp
			// is too long a path for the bridge's socket (runtimefiles.RunDirBase).
			base := runtimefiles.RunDirBase()
			before, _ := filepath.Glob(filepath.Join(base, runtimefiles.RunDirPrefix+"*"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Bounds the read below: a server that never gets ready is
			// killed, which ends its output.
			timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
			defer timer.Stop()
			pids, state := readPids(t, bufio.NewReader(out))
			if state != call || len(pids) < 2 {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("helper server said %q after pids %v, want %q after two or more (stderr: %s)", state, pids, call, stderr.String())
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			killed := time.Now()
			deadline := killed.Add(10 * time.Second)
			left := slices.Clone(pids)
			for len(left) > 0 && time.Now().Before(deadline) {
				left = slices.DeleteFunc(left, func(pid int) bool { return !running(pid) })
				time.Sleep(50 * time.Millisecond) // bounded polling for the exits
			}
			t.Logf("workers gone %v after the kill", time.Since(killed).Round(time.Millisecond))
			for _, pid := range left {
				killPid(t, pid)
			}
			if len(left) > 0 {
				t.Errorf("workers %v of %v outlived their killed server by 10 s", left, pids)
			}

			// What the killed server left in its run directory (the workers'
			// DENO_DIRs, the bridge's socket) goes when the next server starts.
			leftovers, _ := filepath.Glob(filepath.Join(base, runtimefiles.RunDirPrefix+"*"))
			leftovers = slices.DeleteFunc(leftovers, func(dir string) bool { return slices.Contains(before, dir) })
			if len(leftovers) != 1 {
				t.Fatalf("run directories of the killed server: %q, want one", leftovers)
			}
			next, err := runtimefiles.OpenRunDir(zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close()
			if _, err := os.Stat(leftovers[0]); !os.IsNotExist(err) {
				t.Errorf("the killed server's run directory is still there after the next server started: %v", err)
			}
		})
	}
}

// running reports whether pid is a live process. An orphan that exited
// may stay a zombie until init reaps it: that counts as gone.
func running(pid int) bool {
	p, err := ps.NewProcess(int32(pid))
	if err != nil {
		return false
	}
	status, err := p.Status()
	return err != nil || !slices.Contains(status, ps.Zombie)
}
