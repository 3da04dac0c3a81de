//go:build !linux

package proc

import "errors"

// HasThreads reports whether Threads works on this platform. Elsewhere than
// on Linux it would take libproc's per-thread info (macOS) or a handle to
// each thread and its description (Windows), code that no machine of the
// project's could run: the supervisor keeps one process per call there.
const HasThreads = false

// Threads is not implemented here: see HasThreads.
func Threads(int) ([]string, error) { return nil, errors.ErrUnsupported }

// Changed is not implemented here: see HasThreads.
func Changed(int, string, []string) (string, error) { return "", errors.ErrUnsupported }
