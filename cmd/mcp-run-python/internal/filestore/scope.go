package filestore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"
)

const (
	sessionScheme = "session://"
	callScheme    = "call://"

	// maxIDLen and maxPathLen bound what a URI may carry.
	maxIDLen   = 128
	maxPathLen = 4096
)

// Scope is where a file lives, and so how long: a Python session, whose
// files live until the session ends, or one fresh call, whose files live
// for the store's TTL. It names the file's URI, not who may read it: that
// is the file's owner, the identity.Principal that Put it, and one owner
// has files in many scopes. The zero Scope is not valid.
type Scope struct {
	call bool
	id   string
}

// SessionScope is the scope of the Python session id; its files have URIs
// session://{id}/{path}. The id must be 1 to 128 characters from A-Z, a-z,
// 0-9 and "-._~", which stand in a URI's host as they are.
func SessionScope(id string) Scope {
	return Scope{id: id}
}

// NewCallScope makes the scope of a fresh call, with an id of 128 random
// bits that nobody can guess: call://{id}/{path}.
func NewCallScope() Scope {
	return Scope{call: true, id: randomName()}
}

// String is the URI of the scope's root, for logs.
func (sc Scope) String() string {
	if sc.call {
		return callScheme + sc.id
	}
	return sessionScheme + sc.id
}

// valid reports whether sc's id can stand in a URI's host unescaped. Go's
// url.Parse, and so likely other parsers, refuses %-escapes of ASCII there.
func (sc Scope) valid() bool {
	if sc.id == "" || len(sc.id) > maxIDLen {
		return false
	}
	for _, c := range []byte(sc.id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return false
		}
	}
	return true
}

// uri is the URI of the file at the valid path p in sc.
func (sc Scope) uri(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return sc.String() + "/" + strings.Join(segs, "/")
}

// parseURI is the inverse of Scope.uri. It accepts any escaping of the same
// segments, but not a query or a fragment, nor a %2F that would move a
// segment's bytes across a boundary.
func parseURI(uri string) (Scope, string, bool) {
	var sc Scope
	rest, ok := strings.CutPrefix(uri, sessionScheme)
	if !ok {
		rest, ok = strings.CutPrefix(uri, callScheme)
		sc.call = true
	}
	if !ok || strings.ContainsAny(rest, "?#") {
		return Scope{}, "", false
	}
	sc.id, rest, ok = strings.Cut(rest, "/")
	if !ok || !sc.valid() {
		return Scope{}, "", false
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		seg, err := url.PathUnescape(s)
		if err != nil || strings.Contains(seg, "/") {
			return Scope{}, "", false
		}
		segs[i] = seg
	}
	p := strings.Join(segs, "/")
	if checkPath(p) != nil {
		return Scope{}, "", false
	}
	return sc, p, true
}

// checkPath accepts the paths a file may have in its scope: relative,
// slash-separated, clean, and valid UTF-8 so that JSON carries the name
// unchanged.
func checkPath(p string) error {
	why := ""
	switch {
	case p == "":
		why = "empty"
	case len(p) > maxPathLen:
		why = fmt.Sprintf("longer than %d bytes", maxPathLen)
	case !utf8.ValidString(p):
		why = "not valid UTF-8"
	case strings.ContainsRune(p, 0):
		why = "contains NUL"
	case path.IsAbs(p):
		why = "absolute"
	case p == "." || p == ".." || strings.HasPrefix(p, "../"):
		why = "outside the working directory"
	case path.Clean(p) != p:
		why = "not clean"
	default:
		return nil
	}
	return fmt.Errorf("%w %q: %s", errBadPath, p, why)
}

// errBadPath is the cause of checkPath's errors.
var errBadPath = errors.New("invalid file path")

// randomName is 128 random bits in lowercase hex: call ids, which a URI's
// host carries in any case a client may fold it to, and names on disk.
func randomName() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// isRandomName reports whether name could be one randomName made.
func isRandomName(name string) bool {
	if len(name) != 32 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}
