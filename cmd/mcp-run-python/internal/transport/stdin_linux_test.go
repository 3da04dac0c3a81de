package transport

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inheritedPipe returns a blocking pipe as a process inherits one on stdin:
// os.Pipe's ends are polled already.
func inheritedPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	t.Cleanup(func() { _, _ = r.Close(), w.Close() })
	return r, w
}

func TestPollableStdinPipe(t *testing.T) {
	r, w := inheritedPipe(t)
	in, closeIn := pollableStdin(r)
	p, ok := in.(*os.File)
	if !ok || p == r {
		t.Fatalf("got %T %v, want a file of its own", in, in)
	}
	// Only a polled file has deadlines.
	if err := p.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatalf("the pipe is not polled: %v", err)
	}
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read of an empty pipe: %v, want the deadline", err)
	}
	_ = p.SetReadDeadline(time.Time{})
	// The inherited description, shared with the client, stays blocking.
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	_ = rc.Control(func(fd uintptr) {
		v, _, _ := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		flags = int(v)
	})
	if flags&syscall.O_NONBLOCK != 0 {
		t.Error("stdin's own description was made non-blocking")
	}
	if _, err := w.WriteString("{}\n"); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	got, err := io.ReadAll(in)
	if err != nil || string(got) != "{}\n" {
		t.Errorf("read %q, %v; want the line, then the end", got, err)
	}
	closeIn()
	if _, err := r.Stat(); err != nil {
		t.Errorf("closing the reader closed stdin: %v", err)
	}
}

func TestPollableStdinOthers(t *testing.T) {
	// A file keeps its offset, which a new description would not.
	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, in := range []io.Reader{f, strings.NewReader("{}\n")} {
		got, closeIn := pollableStdin(in)
		if got != in {
			t.Errorf("pollableStdin(%T) = %T, want it as it is", in, got)
		}
		closeIn()
	}
}
