package packages

import (
	"errors"
	"fmt"
	"net"
)

// Kind says why a requirement could not be installed.
type Kind int

// The kinds of [Error].
const (
	// KindInvalid: the requirement (or the metadata naming it) is not valid
	// PEP 508, or asks for something this resolver does not do (direct URLs).
	KindInvalid Kind = iota + 1
	// KindNotFound: no such package, or no version matches the specifiers.
	KindNotFound
	// KindNoCompatibleWheel: versions exist, but none has a wheel that runs
	// in Pyodide (only sdists or platform wheels for other systems, yanked
	// files, or a Requires-Python that excludes Pyodide's Python).
	KindNoCompatibleWheel
	// KindConflict: two requirements (or a requirement and Pyodide's
	// built-in version) cannot both be met.
	KindConflict
	// KindHashMismatch: a downloaded file does not have the sha256 the lock
	// file or the index promised. Nothing is kept.
	KindHashMismatch
	// KindUnreachable: the index or the package host could not be reached
	// (connection failure or a server error). See [UnreachableError].
	KindUnreachable
	// KindOfflineMiss: offline mode, and the file (or index page) is not in
	// the cache.
	KindOfflineMiss
)

// String names the kind, e.g. "not found".
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid requirement"
	case KindNotFound:
		return "not found"
	case KindNoCompatibleWheel:
		return "no compatible wheel"
	case KindConflict:
		return "conflict"
	case KindHashMismatch:
		return "hash mismatch"
	case KindUnreachable:
		return "unreachable index"
	case KindOfflineMiss:
		return "offline miss"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is the one error type of this package for anything a user asked
// for that cannot be installed. Its message reads
//
//	cannot install "REQUIREMENT": REASON[: CAUSE]
//
// Requirement is the requirement string as written (by the user or in the
// metadata of a package that needs it). Reason is a sentence for a person,
// naming the packages and versions involved. Err, if set, is the underlying
// cause (for example an [*UnreachableError]) and is what [errors.Unwrap]
// returns.
type Error struct {
	// Requirement is the requirement that cannot be installed, as written.
	Requirement string
	// Kind classifies the failure.
	Kind Kind
	// Reason explains it to a person.
	Reason string
	// Err is the underlying cause, or nil.
	Err error
	// Source is where the page or file that failed comes from, when the
	// failure is about one: an unreachable Pyodide host (OriginLock) has
	// another remedy than an unreachable index (OriginIndex).
	Source Origin
}

// Error formats the message described on [Error]. An unreachable source
// ends with what to do instead: for Pyodide's host, the fetch command and
// --offline that the README recommends, or the flag that points elsewhere.
func (e *Error) Error() string {
	msg := fmt.Sprintf("cannot install %q: %s", e.Requirement, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Kind == KindUnreachable {
		switch e.Source {
		case OriginLock:
			msg += ` (to install without Pyodide's package host: fill the cache where it can be reached with "mcp-run-python fetch PACKAGE..." and run with --offline, or point --pyodide-index-url at a mirror or a local directory)`
		case OriginIndex:
			msg += " (--index-url installs from another index or a local directory instead)"
		}
	}
	return msg
}

// PyodideHostUnreachable reports whether err is an [*Error] saying that a
// file of Pyodide's package host could not be fetched because the host did
// not answer usefully.
func PyodideHostUnreachable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindUnreachable && e.Source == OriginLock
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the [Kind] of the first [*Error] in err's chain, or 0 when
// there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// UnreachableError reports that an index or package host did not answer
// usefully: the connection failed, or the server answered with an error
// status other than "not found".
type UnreachableError struct {
	// URL is what was requested.
	URL string
	// Status is the HTTP status code, or 0 when no response came.
	Status int
	// Err is the transport error, if any.
	Err error
}

// Error describes what failed and how, and for a network that let nothing
// through, the cause in words.
func (e *UnreachableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("cannot reach %s: %v%s", e.URL, e.Err, networkCause(e.Err))
	}
	return fmt.Sprintf("cannot reach %s: HTTP status %d", e.URL, e.Status)
}

// networkCause names, in parentheses, the likely cause of a transport error
// that says only "i/o timeout": a pod whose NetworkPolicy allows no egress
// (or a container without a network) waits 20 s and more for a DNS answer
// that never comes, or for a connection that is dropped, and Go's message
// names neither the firewall nor the flags that avoid the host. Other errors
// (refused, reset, TLS) say what happened already: "".
func networkCause(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		switch {
		case dns.IsTimeout:
			return fmt.Sprintf(" (no DNS server answered for %s: this server seems to have no network egress, or no DNS)", dns.Name)
		case dns.IsNotFound:
			return fmt.Sprintf(" (%s has no address in this server's DNS)", dns.Name)
		}
		return ""
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Timeout() {
		return " (the connection timed out: a firewall or NetworkPolicy seems to drop this server's egress)"
	}
	return ""
}

// Unwrap returns the transport error, if any.
func (e *UnreachableError) Unwrap() error { return e.Err }

// newError builds an *Error; reason is formatted with args.
func newError(req string, kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Requirement: req, Kind: kind, Reason: fmt.Sprintf(format, args...), Err: cause}
}

// unreachable builds the KindUnreachable *Error of a page or file from src.
func unreachable(req string, src Origin, cause error, format string, args ...any) *Error {
	e := newError(req, KindUnreachable, cause, format, args...)
	e.Source = src
	return e
}
