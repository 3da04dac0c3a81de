//go:build !windows

package cachedir

import (
	"os"
	"time"
)

// setModTime sets the modification time of the file or directory at path,
// leaving its access time as it is.
func setModTime(path string, t time.Time) error {
	return os.Chtimes(path, time.Time{}, t)
}
