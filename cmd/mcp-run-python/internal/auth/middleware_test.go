package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// authFunc is an Authenticator made of a function.
type authFunc func(ctx context.Context, token string) (identity.Principal, error)

func (f authFunc) Authenticate(ctx context.Context, token string) (identity.Principal, error) {
	return f(ctx, token)
}

// fakeAuth accepts "good" and refuses the other tokens in every way.
var fakeAuth = authFunc(func(ctx context.Context, token string) (identity.Principal, error) {
	switch token {
	case "good", "good==":
		return "user:" + identity.Principal(token), nil
	case "expired":
		return "", invalid("token expired", errors.New("exp 12:00"))
	case "scope":
		return "", &Error{Kind: ErrInsufficientScope, Description: "token lacks a scope this server needs", Scope: []string{"mcp:run", "files:read"}}
	case "down":
		return "", &Error{Kind: ErrUnavailable, Description: "cannot fetch the authorization server's keys"}
	case "wrapped":
		return "", fmt.Errorf("no: %w", ErrInvalidToken)
	case "nasty":
		return "", invalid("say \"hi\"\\\n\x00é", nil)
	case "broken":
		return "", errors.New("database on fire")
	}
	return "", invalid("unknown token", nil)
})

const testMetadataURL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

func TestMiddleware(t *testing.T) {
	const rm = `resource_metadata="` + testMetadataURL + `"`
	tests := []struct {
		name          string
		target        string
		auth          []string // Authorization headers
		wantStatus    int
		wantChallenge string // WWW-Authenticate
		wantBody      string
	}{
		{"good", "/mcp", []string{"Bearer good"}, http.StatusOK, "", "user:good"},
		{"scheme in any case, padding", "/mcp", []string{"bEARER   good=="}, http.StatusOK, "", "user:good=="},
		{"no header", "/mcp", nil, http.StatusUnauthorized,
			`Bearer ` + rm,
			`{"error":"unauthorized","error_description":"this server needs an Authorization: Bearer token"}`},
		{"token in the query string", "/mcp?access_token=good", nil, http.StatusUnauthorized,
			`Bearer ` + rm,
			`{"error":"unauthorized","error_description":"this server needs an Authorization: Bearer token"}`},
		{"another scheme", "/mcp", []string{"Basic Z29vZDpnb29k"}, http.StatusUnauthorized,
			`Bearer ` + rm,
			`{"error":"unauthorized","error_description":"this server needs an Authorization: Bearer token"}`},
		{"scheme without token", "/mcp", []string{"Bearer"}, http.StatusBadRequest,
			`Bearer error="invalid_request", error_description="malformed bearer token", ` + rm,
			`{"error":"invalid_request","error_description":"malformed bearer token"}`},
		{"token with a space", "/mcp", []string{"Bearer good good"}, http.StatusBadRequest,
			`Bearer error="invalid_request", error_description="malformed bearer token", ` + rm,
			`{"error":"invalid_request","error_description":"malformed bearer token"}`},
		{"two headers", "/mcp", []string{"Bearer good", "Bearer good"}, http.StatusBadRequest,
			`Bearer error="invalid_request", error_description="more than one Authorization header", ` + rm,
			`{"error":"invalid_request","error_description":"more than one Authorization header"}`},
		{"invalid token", "/mcp", []string{"Bearer expired"}, http.StatusUnauthorized,
			`Bearer error="invalid_token", error_description="token expired", ` + rm,
			`{"error":"invalid_token","error_description":"token expired"}`},
		{"plain ErrInvalidToken", "/mcp", []string{"Bearer wrapped"}, http.StatusUnauthorized,
			`Bearer error="invalid_token", error_description="invalid token", ` + rm,
			`{"error":"invalid_token","error_description":"invalid token"}`},
		{"description unfit for a quoted-string", "/mcp", []string{"Bearer nasty"}, http.StatusUnauthorized,
			`Bearer error="invalid_token", error_description="say ?hi?????", ` + rm,
			`{"error":"invalid_token","error_description":"say \"hi\"\\\n\u0000é"}`},
		{"insufficient scope", "/mcp", []string{"Bearer scope"}, http.StatusForbidden,
			`Bearer error="insufficient_scope", error_description="token lacks a scope this server needs", scope="mcp:run files:read", ` + rm,
			`{"error":"insufficient_scope","error_description":"token lacks a scope this server needs"}`},
		{"cannot check now", "/mcp", []string{"Bearer down"}, http.StatusServiceUnavailable, "",
			`{"error":"temporarily_unavailable","error_description":"cannot fetch the authorization server's keys"}`},
		{"authenticator broken", "/mcp", []string{"Bearer broken"}, http.StatusInternalServerError, "",
			`{"error":"server_error","error_description":"cannot check tokens"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Middleware(fakeAuth, testMetadataURL, zaptest.NewLogger(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p := identity.Of(r.Context(), "")
				if p == "" {
					t.Error("no principal in the context")
				}
				_, _ = io.WriteString(w, string(p))
			}))
			r := httptest.NewRequest(http.MethodPost, tt.target, nil)
			for _, v := range tt.auth {
				r.Header.Add("Authorization", v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			resp := w.Result()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Values("WWW-Authenticate"); tt.wantChallenge == "" && len(got) != 0 ||
				tt.wantChallenge != "" && (len(got) != 1 || got[0] != tt.wantChallenge) {
				t.Errorf("WWW-Authenticate %q\nwant %q", got, tt.wantChallenge)
			}
			if got := w.Body.String(); got != tt.wantBody {
				t.Errorf("body %s\nwant %s", got, tt.wantBody)
			}
			if tt.wantStatus == http.StatusOK {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got, want := resp.Header.Get("Retry-After"), map[bool]string{true: "10"}[tt.wantStatus == http.StatusServiceUnavailable]; got != want {
				t.Errorf("Retry-After %q, want %q", got, want)
			}
		})
	}
}

func TestMiddlewareStaticTokens(t *testing.T) {
	s, err := NewStaticTokens(writeTokenFile(t, "", alpha+"\n"), zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewStaticTokens: %v", err)
	}
	var got identity.Principal
	h := Middleware(s, "", zaptest.NewLogger(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = identity.Of(r.Context(), "")
	}))
	tests := []struct {
		auth          string
		wantStatus    int
		wantChallenge string
		wantPrincipal identity.Principal
	}{
		{"Bearer " + alpha, http.StatusOK, "", alphaID},
		{"Bearer " + beta, http.StatusUnauthorized, `Bearer error="invalid_token", error_description="unknown token"`, ""},
		{"", http.StatusUnauthorized, "Bearer", ""},
	}
	for _, tt := range tests {
		got = ""
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.wantStatus || w.Header().Get("WWW-Authenticate") != tt.wantChallenge || got != tt.wantPrincipal {
			t.Errorf("%q: status %d, WWW-Authenticate %q, principal %q; want %d, %q, %q",
				tt.auth, w.Code, w.Header().Get("WWW-Authenticate"), got, tt.wantStatus, tt.wantChallenge, tt.wantPrincipal)
		}
	}
}
