package auth

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// Middleware returns next behind bearer-token authentication by a: a
// request reaches next only with a good token in its Authorization header,
// and then with its principal in its context (identity.Of).
//
// The answers follow RFC 6750 §3 and the MCP authorization spec:
//
//   - no token, or another scheme than Bearer: 401 with a WWW-Authenticate
//     challenge without error (§3.1) but with resource_metadata, so that
//     the client can find the authorization server (RFC 9728 §5.1);
//   - two Authorization headers or a malformed token: 400 invalid_request;
//   - ErrInvalidToken: 401 invalid_token;
//   - ErrInsufficientScope: 403 insufficient_scope with the scopes needed;
//   - ErrUnavailable: 503 temporarily_unavailable with Retry-After and no
//     challenge, so that the client keeps its token and tries again;
//   - any other error: 500.
//
// The body is {"error":"<code>","error_description":"<text>"}, with code
// "unauthorized" when there was no token. Tokens in the query string are
// not looked at: the MCP spec forbids them, since URLs end up in logs.
//
// resourceMetadataURL is this server's RFC 9728 metadata URL
// (ResourceMetadataURL); when "", challenges leave it out, which suits
// static tokens that have no authorization server to find. log may be nil.
func Middleware(a Authenticator, resourceMetadataURL string, log *zap.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, refusal := bearerToken(r.Header)
		if refusal != nil {
			refusal.write(w, resourceMetadataURL)
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		if err != nil {
			c := refuse(err)
			fields := []zap.Field{zap.String("remote", r.RemoteAddr), zap.Int("status", c.status), zap.Error(err)}
			switch {
			case c.status == http.StatusInternalServerError:
				log.Error("cannot authenticate request", fields...)
			case c.status != http.StatusServiceUnavailable:
				log.Info("refused request", fields...)
			case r.Context().Err() == nil:
				log.Warn("cannot authenticate request now", fields...)
			default: // the client has gone: nothing to fix here
				log.Debug("cannot authenticate request now", fields...)
			}
			c.write(w, resourceMetadataURL)
			return
		}
		log.Debug("authenticated request", zap.String("principal", string(p)))
		next.ServeHTTP(w, r.WithContext(identity.WithPrincipal(r.Context(), p)))
	})
}

// challenge is a refusal as it goes to the client.
type challenge struct {
	status      int
	code        string // RFC 6750 §3.1 error code; "" for a request without token
	description string
	scope       []string
}

// bearerToken returns the token of the request's Authorization header, or
// the refusal of a request without a usable one.
func bearerToken(h http.Header) (string, *challenge) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", &challenge{status: http.StatusUnauthorized, description: "this server needs an Authorization: Bearer token"}
	case len(values) > 1:
		return "", &challenge{status: http.StatusBadRequest, code: "invalid_request", description: "more than one Authorization header"}
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// RFC 6750 §3.1: a client that tried another scheme gets the same
		// answer as one that tried none.
		return "", &challenge{status: http.StatusUnauthorized, description: "this server needs an Authorization: Bearer token"}
	}
	token = strings.TrimLeft(token, " ")
	if !isB64Token(token) {
		return "", &challenge{status: http.StatusBadRequest, code: "invalid_request", description: "malformed bearer token"}
	}
	return token, nil
}

// refuse returns the answer to a request whose token a refused with err.
func refuse(err error) *challenge {
	var e *Error
	var description string
	var scope []string
	if errors.As(err, &e) {
		description, scope = e.Description, e.Scope
	}
	switch {
	case errors.Is(err, ErrInvalidToken):
		return &challenge{status: http.StatusUnauthorized, code: ErrInvalidToken.Error(), description: cmp.Or(description, "invalid token")}
	case errors.Is(err, ErrInsufficientScope):
		return &challenge{status: http.StatusForbidden, code: ErrInsufficientScope.Error(), description: cmp.Or(description, "insufficient scope"), scope: scope}
	case errors.Is(err, ErrUnavailable):
		return &challenge{status: http.StatusServiceUnavailable, code: ErrUnavailable.Error(), description: cmp.Or(description, "cannot check tokens now")}
	}
	return &challenge{status: http.StatusInternalServerError, code: "server_error", description: "cannot check tokens"}
}

// write sends the refusal.
func (c *challenge) write(w http.ResponseWriter, resourceMetadataURL string) {
	h := w.Header()
	switch c.status {
	case http.StatusServiceUnavailable:
		h.Set("Retry-After", strconv.Itoa(int(fetchInterval.Seconds())))
	case http.StatusInternalServerError:
	default:
		var params []string
		add := func(name, value string) {
			if value != "" {
				params = append(params, name+`="`+quotable(value)+`"`)
			}
		}
		if c.code != "" {
			// RFC 6750 §3.1: a request without token gets no error
			// information, as it did nothing wrong.
			add("error", c.code)
			add("error_description", c.description)
		}
		add("scope", strings.Join(c.scope, " "))
		add("resource_metadata", resourceMetadataURL)
		v := "Bearer"
		if len(params) > 0 {
			v += " " + strings.Join(params, ", ")
		}
		h.Set("WWW-Authenticate", v)
	}
	body, _ := json.Marshal(struct { // strings cannot fail to marshal
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}{cmp.Or(c.code, "unauthorized"), c.description})
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(c.status)
	_, _ = w.Write(body)
}

// quotable replaces the characters that may not appear in an RFC 6750
// quoted-string (quotes, backslashes, controls and non-ASCII) by '?',
// so that no value can end the string or break the header.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s)
}
