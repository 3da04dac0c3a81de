//go:build unix

package auth

import (
	"fmt"
	"io/fs"
)

// checkPrivate refuses a secrets file that others than its owner may read
// or change: they could take its tokens, or add their own.
func checkPrivate(path string, fi fs.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o, which lets others than its owner read or change it: run chmod 600 %s", path, perm, path)
	}
	return nil
}
