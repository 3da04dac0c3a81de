// Package auth is the bearer-token authentication of the HTTP modes.
//
// The server is an OAuth 2.1 resource server as the MCP authorization spec
// asks: it checks access tokens (RFC 6750) that an authorization server
// issued (OAuth), or shared secrets listed in a file (StaticTokens), and
// publishes RFC 9728 metadata so that clients can find the authorization
// server. Middleware puts the caller's principal (identity.Principal) in
// the request context.
package auth

import (
	"context"
	"errors"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// Authenticator checks a bearer token and says whose it is.
//
// The errors it returns should wrap ErrInvalidToken, ErrInsufficientScope or
// ErrUnavailable (an *Error does), because Middleware chooses the HTTP answer
// by them; any other error is answered 500.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (identity.Principal, error)
}

// The kinds of refusal, named by their RFC 6750 error codes so that
// Middleware can send them as they are.
var (
	// ErrInvalidToken: the token is malformed, expired, revoked, badly
	// signed or meant for someone else (401).
	ErrInvalidToken = errors.New("invalid_token")
	// ErrInsufficientScope: the token is good but does not grant the scopes
	// that this server needs (403).
	ErrInsufficientScope = errors.New("insufficient_scope")
	// ErrUnavailable: the token cannot be checked now, because the
	// authorization server or its keys are unreachable (503). It is not a
	// 401 because the token may well be good: a 401 would send the client
	// through the authorization flow again for nothing.
	ErrUnavailable = errors.New("temporarily_unavailable")
)

// Error is a refusal with what the client may be told about it.
type Error struct {
	// Kind is ErrInvalidToken, ErrInsufficientScope or ErrUnavailable.
	Kind error
	// Description goes to the client in error_description: a fixed text
	// that never holds any part of the token.
	Description string
	// Scope lists, with ErrInsufficientScope, every scope the server needs,
	// so that the client can ask for them all at once.
	Scope []string
	// Err is the cause, for the server's log only; it may be nil.
	Err error
}

// Error returns the kind, the description and the cause.
func (e *Error) Error() string {
	s := e.Kind.Error() + ": " + e.Description
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap makes errors.Is find both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// invalid returns an ErrInvalidToken refusal.
func invalid(description string, cause error) *Error {
	return &Error{Kind: ErrInvalidToken, Description: description, Err: cause}
}

// isB64Token reports whether s has the b64token syntax of RFC 6750 §2.1,
// which every bearer token has: anything else cannot come in an
// Authorization header unambiguously.
func isB64Token(s string) bool {
	body := len(s)
	for body > 0 && s[body-1] == '=' {
		body--
	}
	if body == 0 {
		return false
	}
	for i := range body {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
