//go:build unix

package mount

import (
	"os"
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, name string) {
	t.Helper()
	if err := syscall.Mkfifo(name, 0o666); err != nil {
		t.Fatal(err)
	}
}

// unblockFIFO opens the FIFO name to write, without waiting, which lets a
// reader blocked in opening it go.
func unblockFIFO(name string) {
	if f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}
