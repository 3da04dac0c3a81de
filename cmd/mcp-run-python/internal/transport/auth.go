package transport

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/auth"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// Auth is who may call an HTTP front end (Options.Auth): every MCP request
// needs a bearer token that Authenticator accepts, and what it starts (its
// MCP session, Python sessions, files) is its principal's alone. The probes
// need no token; /metrics does with Metrics.
type Auth struct {
	// Authenticator checks the tokens.
	Authenticator auth.Authenticator
	// Resource is the MCP endpoint's public URL. With AuthorizationServers
	// (OAuth) the front end serves its RFC 9728 metadata, which its
	// challenges name, so that clients find where to get a token.
	Resource             string
	AuthorizationServers []string
	Scopes               []string
	// Metrics puts /metrics behind the tokens too.
	Metrics bool
}

// guard is an HTTP front end's authentication: the handler that puts MCP
// behind the tokens, and the wrapper of /metrics.
type guard struct {
	mcp     func(http.Handler) http.Handler
	metrics func(http.Handler) http.Handler // nil: /metrics is open
}

// newGuard returns a's guard; nil a gives one that lets everything through.
func newGuard(a *Auth, log *zap.Logger) (guard, error) {
	open := func(h http.Handler) http.Handler { return h }
	if a == nil {
		return guard{mcp: open}, nil
	}
	metadataURL := ""
	var metadata http.Handler
	var metadataPath string
	if len(a.AuthorizationServers) > 0 {
		var err error
		if metadataURL, err = auth.ResourceMetadataURL(a.Resource); err != nil {
			return guard{}, fmt.Errorf("the server's public URL: %w", err)
		}
		u, err := url.Parse(metadataURL)
		if err != nil {
			return guard{}, err
		}
		metadataPath = u.Path
		metadata = auth.ProtectedResourceHandler(a.Resource, a.AuthorizationServers, a.Scopes)
	}
	protect := func(h http.Handler) http.Handler { return auth.Middleware(a.Authenticator, metadataURL, log, h) }
	g := guard{mcp: protect}
	if a.Metrics {
		g.metrics = protect
	}
	if metadata != nil {
		g.mcp = func(h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle(metadataPath, metadata)
			// Clients that know no path look at the bare well-known URL.
			mux.Handle(auth.ProtectedResourcePath, metadata)
			mux.Handle("/", protect(h))
			return mux
		}
	}
	return g, nil
}

// principalOf is the principal of an authenticated request, or "": an MCP
// session, which the transport starts, does not stand in for its own owner.
func principalOf(r *http.Request) identity.Principal {
	return identity.Of(r.Context(), "")
}

// unknownSessionID is an ID no session has, which a request naming another
// principal's session is given instead, so that the transport answers it
// exactly as it answers a request for a session that does not exist.
func unknownSessionID() string { return sessionIDPrefix + "none-" + rand.Text() }
