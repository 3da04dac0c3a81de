// Package identity names whom the front end's state and the supervisor's
// calls belong to: one type, Principal, for MCP sessions (transport), Python
// sessions (sessions), stored files (filestore) and the pool's share of a
// caller (supervisor.Request.Principal), and one function, Of, that finds a
// request's. It is a leaf, below every package that keeps things per
// caller, so that none of them depends on another (nor on auth's JWT
// libraries) for the name of a caller.
package identity

import "context"

// Principal is whom something belongs to: the most precise name of a
// caller that the server has. It is not secret, so it may be logged.
//
// With authentication it is the caller's, as auth's Authenticators make
// it: for an OAuth token "<issuer>|<sub>" (the subject is unique only
// within its issuer, and an issuer is a URL, which cannot hold a bare "|",
// so two issuers' subjects cannot collide); for a static token "token:"
// and the first 16 hex digits of the token's SHA-256. Without
// authentication the server cannot tell callers apart, and the id of the
// MCP session stands in for it (Of); the two never mix, since with
// authentication every MCP request has a principal. "" is no one in
// particular: what it owns is anyone's who holds its id, and it is held
// to no cap per principal.
//
// The supervisor keeps a call's share of the pool per principal, but must
// not import the front end and needs only a key to compare, so it takes
// the Principal as the string supervisor.Request.Principal; the type lives
// here rather than in the supervisor because everything else that names
// callers (authentication, MCP sessions) is the front end's.
type Principal string

// principalKey is the context key of the authenticated Principal; its type
// is unexported so that no other package can set or shadow it.
type principalKey struct{}

// WithPrincipal returns ctx carrying p, the authenticated caller of a
// request (auth's Middleware puts it there).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Of is the Principal of the request in ctx: its authenticated caller's,
// else mcpSession, the id of its MCP session. Callers pass "" for
// mcpSession where an MCP session must not stand in: for the MCP session
// itself (the transport's caps and checks) and for a call's share of the
// pool, which is per authenticated caller only.
func Of(ctx context.Context, mcpSession string) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal(mcpSession)
}
