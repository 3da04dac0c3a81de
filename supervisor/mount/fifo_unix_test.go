//go:build unix

package mount

import (
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, name string) {
	t.Helper()
	if err := syscall.Mkfifo(name, 0o666); err != nil {
		t.Fatal(err)
	}
}
