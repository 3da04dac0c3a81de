//go:build unix

package mount

import "syscall"

// openNonBlock opens a file without blocking: a FIFO opened to read
// otherwise waits for a writer.
const openNonBlock = syscall.O_NONBLOCK
