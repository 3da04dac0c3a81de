//go:build !unix

package mount

// openNonBlock is nothing where no file in a folder blocks its opener:
// Windows' named pipes live in their own namespace, not in folders.
const openNonBlock = 0
