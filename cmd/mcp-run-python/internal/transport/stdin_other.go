//go:build !linux

package transport

import "io"

// pollableStdin returns in: only Linux can give the server a description of
// stdin of its own to make non-blocking (see stdin_linux.go).
func pollableStdin(in io.Reader) (io.Reader, func()) {
	return in, func() {}
}
