//go:build unix

package main_test

import (
	"syscall"
	"testing"
)

// makeFIFO makes a FIFO at path.
func makeFIFO(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
