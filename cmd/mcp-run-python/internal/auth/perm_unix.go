//go:build unix

package auth

import (
	"fmt"
	"io/fs"
)

// checkPrivate refuses a secrets file that others may read, or that
// others or its group may change: they could take its tokens, or add their
// own. Its group may read it: that is how a Kubernetes Secret reaches a
// non-root server (root's file, mode 0440, the pod's fsGroup).
func checkPrivate(path string, fi fs.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&0o027 != 0 {
		return fmt.Errorf("%s has mode %#o, which lets others read or change it: run chmod 600 %s", path, perm, path)
	}
	return nil
}
