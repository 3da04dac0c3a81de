package auth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.uber.org/zap/zaptest"
)

// TestOAuthRedirects: the fetches of the metadata and of the keys follow no
// redirect to plain HTTP on another host, where anyone on the path could
// hand out keys of their own; an https hop is followed.
func TestOAuthRedirects(t *testing.T) {
	// The attacker's keys, served over plain HTTP at keys.example.
	evil := newKey(t, "ec", jwa.ES256())
	evilPub, err := evil.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	var issuer string // the TLS issuer's URL, once it runs
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata":
			writeJSON(t, w, map[string]string{"issuer": issuer, "jwks_uri": "http://keys.example/jwks"})
		case "/jwks":
			writeJSON(t, w, map[string]any{"keys": []jwk.Key{evilPub}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(plain.Close)

	tests := []struct {
		name string
		// redirect names the issuer's path that redirects, and to where.
		from, to string
		refused  bool
	}{
		{"metadata to plain HTTP", "/.well-known/oauth-authorization-server", "http://keys.example/metadata", true},
		{"keys to plain HTTP", "/jwks", "http://keys.example/jwks", true},
		{"keys to https", "/jwks", "/jwks-moved", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == tt.from:
					http.Redirect(w, r, tt.to, http.StatusFound)
				case r.URL.Path == "/.well-known/oauth-authorization-server":
					writeJSON(t, w, map[string]string{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks"})
				case r.URL.Path == "/jwks-moved":
					writeJSON(t, w, map[string]any{"keys": []jwk.Key{evilPub}})
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			issuer = srv.URL
			// keys.example is the plain server, wherever the client is.
			client := srv.Client()
			tr := client.Transport.(*http.Transport).Clone()
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == "keys.example:80" {
					addr = plain.Listener.Addr().String()
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			client = &http.Client{Transport: tr, Timeout: 10 * time.Second}

			claims := map[string]any{"iss": srv.URL, "aud": testAudience, "sub": "u", "exp": time.Now().Add(time.Hour).Unix()}
			token := signWith(t, jwa.ES256(), evil, map[string]any{"kid": "ec"}, claims)
			o, err := NewOAuth(t.Context(), OAuthConfig{Issuer: srv.URL, Audience: testAudience, HTTPClient: client, Log: zaptest.NewLogger(t)})
			if err == nil {
				_, err = o.Authenticate(context.Background(), token)
			}
			switch {
			case !tt.refused && err != nil:
				t.Fatalf("a redirect to https: %v", err)
			case tt.refused && err == nil:
				t.Fatal("a token signed with keys from plain HTTP was accepted")
			case tt.refused && (!errors.Is(err, errRedirect) || !strings.Contains(err.Error(), "not an https URL")):
				t.Fatalf("error %v, want the redirect refused as not https", err)
			}
		})
	}
}
