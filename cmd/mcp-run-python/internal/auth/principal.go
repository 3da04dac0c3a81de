package auth

import "context"

// Principal identifies an authenticated caller. It is not secret, so it may
// be logged and used to keep one caller's sessions from another's.
//
// For an OAuth token it is "<issuer>|<sub>": the subject is unique only
// within its issuer, and an issuer is a URL, which cannot hold a bare "|",
// so two issuers' subjects cannot collide. For a static token it is
// "token:" and the first 16 hex digits of the token's SHA-256.
type Principal string

// principalKey is the context key of the Principal; its type is unexported
// so that no other package can set or shadow it.
type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the Principal that Middleware put in ctx, and
// whether there is one.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
