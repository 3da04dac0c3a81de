package permissions

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// PathError reports a path that cannot be put into a deno read permission.
type PathError struct {
	GOOS   string // the operating system the path was checked for
	Path   string
	Reason string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("path %q cannot be given to deno on %s: %s", e.Path, e.GOOS, e.Reason)
}

// Validate checks, with CheckPath, every path that p would give deno: Program,
// each of Read and the bridge's socket. It returns the first problem, so that the supervisor can
// refuse to start a worker with a clear message instead of handing deno a
// permission it would read differently. goos is the system deno runs on,
// runtime.GOOS in production.
func (p Policy) Validate(goos string) error {
	if p.Program != "" {
		if err := CheckPath(goos, p.Program); err != nil {
			return fmt.Errorf("program directory: %w", err)
		}
	}
	for _, path := range p.Read {
		if err := CheckPath(goos, path); err != nil {
			return fmt.Errorf("read permission: %w", err)
		}
	}
	if p.Bridge.Socket != "" {
		if err := CheckPath(goos, p.Bridge.Socket); err != nil {
			return fmt.Errorf("bridge socket: %w", err)
		}
	}
	return nil
}

// CheckPath returns a *PathError when path is not a clean absolute path that
// deno on goos reads as exactly that one path, nil otherwise. It looks at the
// text only, never at the file system: resolving symlinks (on macOS /var is
// /private/var, and deno checks the path a file really has) is the caller's
// job, with filepath.EvalSymlinks on the machine itself.
//
// On windows a path is a drive path (C:\dir) or a UNC path
// (\\server\share\dir) with backslashes only: forward slashes are refused
// rather than normalised, because filepath.Clean and EvalSymlinks already
// give backslashes, so a forward slash means the path was never resolved.
// Device and verbatim paths (\\.\, \\?\) are refused, and so are the
// characters Windows forbids in names. Every other GOOS is Unix: the path
// starts with /.
//
// Everywhere the path must be valid UTF-8 and hold no NUL, line break or
// comma, no empty element (a doubled or trailing separator, except the root
// itself) and no . or .. element.
func CheckPath(goos, path string) error {
	fail := func(reason string) error { return &PathError{GOOS: goos, Path: path, Reason: reason} }
	switch {
	case path == "":
		return fail("empty")
	case !utf8.ValidString(path):
		// json.Marshal would replace the bad bytes, so the runner would be
		// given a different path than the process.
		return fail("not valid UTF-8: the runner's permissions reach deno as JSON, which cannot carry it")
	case strings.ContainsAny(path, "\x00\r\n"):
		return fail("contains a NUL or a line break")
	case strings.Contains(path, ","):
		// Doubling the comma is no escape either: deno 2.9 reads ",," as an
		// empty entry and refuses to start.
		return fail("contains a comma, which deno's --allow-read takes as a separator between two paths")
	}
	sep, rest := "/", ""
	if goos == "windows" {
		sep = `\`
		var err error
		if rest, err = windowsRest(path, fail); err != nil {
			return err
		}
	} else {
		var ok bool
		if rest, ok = strings.CutPrefix(path, "/"); !ok {
			return fail("not absolute: it must start with /")
		}
	}
	if rest == "" {
		return nil // the root itself
	}
	for elem := range strings.SplitSeq(rest, sep) {
		switch {
		case elem == "":
			return fail("has an empty element (a doubled or trailing " + sep + "); pass the cleaned path")
		case elem == "." || elem == "..":
			return fail("has a . or .. element; pass the resolved path")
		case sep == `\` && strings.ContainsAny(elem, `<>:"|?*`):
			// A colon past the drive would name an alternate data stream.
			return fail(`has a character Windows forbids in names (< > : " | ? *)`)
		}
	}
	return nil
}

// windowsRest returns what follows the root of a Windows path: the drive
// (C:\) or the \\ that starts a UNC path, whose server and share are then
// the first two elements.
func windowsRest(path string, fail func(string) error) (string, error) {
	switch {
	case strings.Contains(path, "/"):
		return "", fail(`contains a forward slash: Windows paths for deno must use backslashes (filepath.Clean gives them)`)
	case len(path) >= 3 && isLetter(path[0]) && path[1] == ':' && path[2] == '\\':
		return path[3:], nil
	case strings.HasPrefix(path, `\\?\`) || strings.HasPrefix(path, `\\.\`):
		return "", fail(`a device or verbatim path (\\.\ or \\?\): give a drive path such as C:\dir or a UNC path`)
	case strings.HasPrefix(path, `\\`):
		rest := path[2:]
		if server, after, _ := strings.Cut(rest, `\`); server == "" || after == "" {
			return "", fail(`a UNC path needs a server and a share: \\server\share\dir`)
		}
		return rest, nil
	}
	return "", fail(`not absolute: it must be a drive path such as C:\dir or a UNC path such as \\server\share\dir`)
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
