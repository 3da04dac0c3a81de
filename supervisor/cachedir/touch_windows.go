//go:build windows

package cachedir

import (
	"io/fs"
	"time"

	"golang.org/x/sys/windows"
)

// setModTime sets the modification time of the file or directory at path.
// os.Chtimes opens the file sharing only writes, which fails while another
// process has it open to read (a server's lock on a lock file, a worker
// reading a snapshot); this opens it for its attributes alone, sharing
// everything.
func setModTime(path string, t time.Time) error {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, windows.FILE_WRITE_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	mtime := windows.NsecToFiletime(t.UnixNano())
	if err := windows.SetFileTime(h, nil, nil, &mtime); err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	return nil
}
