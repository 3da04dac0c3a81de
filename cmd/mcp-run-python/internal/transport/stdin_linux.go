package transport

import (
	"io"
	"os"
	"strconv"
	"syscall"
)

// pollableStdin returns a reader of in that waits for input in Go's poller
// rather than in a blocking read(2), and a function that closes what it
// opened.
//
// A goroutine blocked in read(2) keeps one of Go's processors (GOMAXPROCS:
// the cores, or the CPU limit) until the runtime's monitor takes it back,
// which takes up to 10 ms once the process has been quiet a while. mcp-go
// reads each line on a new goroutine that runs before the one it has just
// made to answer the line before; with the other processors busy, or with
// only one, the answer waited that long.
//
// Go polls only a non-blocking file, and stdin's open file description is
// shared with whoever spawned the server (a terminal's with the shell), so
// its flags are not the server's to change. A pipe, which is what most
// clients connect stdin to, is opened anew through /proc: that makes a
// description of the server's own. Anything else (a socket, a terminal, a
// file, whose offset a new description would lose) is read as it is.
func pollableStdin(in io.Reader) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return in, func() {}
	}
	fd := -1
	_ = rc.Control(func(d uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(d), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
			fd = int(d)
		}
	})
	if fd < 0 {
		return in, func() {}
	}
	// O_NONBLOCK, or the open would wait for a writer of a FIFO that has
	// none left.
	p, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return in, func() {}
	}
	return p, func() { _ = p.Close() }
}
