//go:build unix

package auth

import (
	"os"
	"syscall"
)

// openSecret opens a secrets file for reading without waiting: O_NONBLOCK
// keeps the open of a FIFO from waiting for a writer for ever (a reload
// stuck there would stop every later one). It means nothing to the regular
// files that readTokens accepts, and readTokens refuses everything else
// before it reads.
func openSecret(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
