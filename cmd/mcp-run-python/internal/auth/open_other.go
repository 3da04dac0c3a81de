//go:build !unix

package auth

import "os"

// openSecret opens a secrets file for reading. Without Unix FIFOs the open
// does not wait; readTokens refuses anything but a regular file.
func openSecret(path string) (*os.File, error) {
	return os.Open(path)
}
