package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

const (
	// clockSkew is how far the issuer's clock may be from ours when exp,
	// nbf and iat are checked.
	clockSkew = 30 * time.Second
	// maxTokenSize bounds a token before it is parsed: real access tokens
	// are a few kilobytes.
	maxTokenSize = 16 << 10
)

// OAuthConfig configures an OAuth resource server.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier, an https URL
	// (http only to a loopback address); tokens' iss must equal it.
	Issuer string
	// Audience must be among a token's aud: normally this server's resource
	// URL, which clients name as the resource (RFC 8707) when they ask for
	// tokens, so that tokens issued for other servers are refused.
	Audience string
	// Scopes must all be granted by a token; none when empty.
	Scopes []string
	// HTTPClient fetches the metadata and the keys; nil means a client
	// with a 10 s timeout, which also bounds the timeout of a client
	// given. Every redirect it follows must pass the checks of the
	// issuer's URL.
	HTTPClient *http.Client
	// Log gets discovery, key fetches and their failures; nil means none.
	Log *zap.Logger
}

// OAuth checks JWT access tokens issued by one authorization server,
// verified with the keys it publishes. It is safe for concurrent use.
type OAuth struct {
	issuer   string
	audience string
	scopes   []string
	keys     *keySet
	now      func() time.Time
}

// NewOAuth returns an OAuth for cfg.
//
// It discovers the issuer's keys at once, within ctx, but only an issuer
// that answers without usable metadata (a wrong issuer URL, or one that
// names another issuer) is an error. An issuer that is down is logged and
// tried again when tokens come, which meanwhile are answered 503: a server
// that starts while its issuer restarts then recovers by itself. The keys
// are fetched again in the background until ctx ends.
func NewOAuth(ctx context.Context, cfg OAuthConfig) (*OAuth, error) {
	return newOAuth(ctx, cfg, time.Now)
}

// newOAuth is NewOAuth with the clock given, for tests.
func newOAuth(ctx context.Context, cfg OAuthConfig, now func() time.Time) (*OAuth, error) {
	if err := checkServerURL(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if u, _ := url.Parse(cfg.Issuer); u.RawQuery != "" || u.Fragment != "" {
		// RFC 8414 §2.
		return nil, fmt.Errorf("issuer %q has a query or fragment", cfg.Issuer)
	}
	if cfg.Audience == "" {
		return nil, errors.New("no audience: without one, tokens issued for any other server would do")
	}
	for _, s := range cfg.Scopes {
		if !isScopeToken(s) {
			return nil, fmt.Errorf("scope %q is not a scope token (RFC 6749 §3.3)", s)
		}
	}
	client := &http.Client{Timeout: fetchTimeout}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	}
	// The cache's fetches in the background have no deadline of their own.
	if client.Timeout <= 0 || client.Timeout > fetchTimeout {
		client.Timeout = fetchTimeout
	}
	client.CheckRedirect = checkRedirect(client.CheckRedirect)
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	keys, err := newKeySet(ctx, cfg.Issuer, client, log, now)
	if err != nil {
		return nil, err
	}
	o := &OAuth{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		scopes:   slices.Clone(cfg.Scopes),
		keys:     keys,
		now:      now,
	}
	if err := o.keys.prefetch(ctx); errors.Is(err, errNoMetadata) {
		keys.close()
		return nil, err
	}
	return o, nil
}

// maxRedirects is as many redirects as a fetch follows, as net/http's
// default.
const maxRedirects = 10

// errRedirect marks a redirect that a fetch refused to follow.
var errRedirect = errors.New("redirect refused")

// checkRedirect returns a CheckRedirect that checks every hop of a fetch as
// the first URL is checked, then asks next (nil: net/http's default). A
// redirect from the issuer's https to plain HTTP on another host would hand
// the keys, and so every token, to whoever is on the path.
func checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := checkServerURL(req.URL.String()); err != nil {
			return fmt.Errorf("%w: %w", errRedirect, err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: stopped after %d redirects", errRedirect, maxRedirects)
		}
		return nil
	}
}

// AuthorizationServers returns the issuer, for the authorization_servers of
// the protected resource metadata.
func (o *OAuth) AuthorizationServers() []string {
	return []string{o.issuer}
}

// Authenticate checks token, a JWT, and returns "<iss>|<sub>".
func (o *OAuth) Authenticate(ctx context.Context, token string) (identity.Principal, error) {
	if len(token) > maxTokenSize {
		return "", invalid("token too large", nil)
	}
	msg, err := jws.Parse([]byte(token), jws.WithCompact())
	if err != nil {
		return "", invalid("token is not a signed JWT", err)
	}
	if len(msg.Signatures()) != 1 {
		return "", invalid("token is not a signed JWT", nil)
	}
	header := msg.Signatures()[0].ProtectedHeaders()
	alg, ok := header.Algorithm()
	if !ok || !allowedAlg(alg) {
		return "", invalid("token's signature algorithm is not allowed", fmt.Errorf("alg %q", alg))
	}
	kid, _ := header.KeyID()
	key, err := o.keys.key(ctx, kid, alg)
	if err != nil {
		return "", err
	}
	tok, err := jwt.Parse([]byte(token),
		jwt.WithKey(alg, key),
		jwt.WithIssuer(o.issuer),
		jwt.WithAudience(o.audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithAcceptableSkew(clockSkew),
		jwt.WithClock(jwt.ClockFunc(o.now)),
	)
	if err != nil {
		return "", invalid(describe(err), err)
	}
	sub, _ := tok.Subject()
	if sub == "" {
		return "", invalid("token has no subject", nil)
	}
	if missing := missingScopes(tok, o.scopes); len(missing) > 0 {
		return "", &Error{
			Kind:        ErrInsufficientScope,
			Description: "token lacks a scope this server needs",
			Scope:       slices.Clone(o.scopes),
			Err:         fmt.Errorf("missing %s", strings.Join(missing, " ")),
		}
	}
	return identity.Principal(o.issuer + "|" + sub), nil
}

// allowedAlg reports whether alg is asymmetric and not deprecated. Refusing
// HMAC matters most: a verifier that took an HMAC token with a public key
// as its secret would accept tokens that anyone can make.
func allowedAlg(alg jwa.SignatureAlgorithm) bool {
	switch alg.String() {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
		"ES256", "ES384", "ES512", "EdDSA", "Ed25519":
		return true
	}
	return false
}

// describe turns jwx's refusal into a description for the client.
func describe(err error) string {
	switch {
	case errors.Is(err, jws.VerifyError()):
		return "bad signature"
	case errors.Is(err, jwt.TokenExpiredError()):
		return "token expired"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "token not valid yet"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "token issued in the future"
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "token from another issuer"
	case errors.Is(err, jwt.InvalidAudienceError()):
		return "token for another audience"
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return "token has no expiry"
	}
	return "invalid token"
}

// missingScopes returns those of want that tok does not grant, in its scope
// claim (RFC 9068, a space-separated string) or scp (an array or a string,
// as some issuers send).
func missingScopes(tok jwt.Token, want []string) []string {
	if len(want) == 0 {
		return nil
	}
	var granted []string
	for _, claim := range []string{"scope", "scp"} {
		var v any
		if err := tok.Get(claim, &v); err != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			granted = append(granted, strings.Fields(v)...)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					granted = append(granted, s)
				}
			}
		}
	}
	var missing []string
	for _, s := range want {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// isScopeToken reports whether s has the scope-token syntax of RFC 6749
// §3.3, which also makes it safe inside a WWW-Authenticate quoted-string.
func isScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
