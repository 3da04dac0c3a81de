package auth

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

func TestOAuthTokens(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	now := clock.Now()
	// with returns good claims changed by changes; a nil value deletes.
	with := func(changes map[string]any) map[string]any {
		c := iss.claims(now)
		for k, v := range changes {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	good := iss.sign(t, "rsa", with(nil))
	parts := strings.Split(good, ".")
	admin, err := json.Marshal(with(map[string]any{"sub": "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString

	var rsaKey rsa.PrivateKey
	if err := jwk.Export(iss.key(t, "rsa"), &rsaKey); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	payload, err := json.Marshal(with(nil))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		token    string
		wantKind error  // nil: accepted
		wantDesc string // of the refusal
	}{
		{"RS256", good, nil, ""},
		{"PS256", iss.sign(t, "ps", with(nil)), nil, ""},
		{"ES256", iss.sign(t, "ec", with(nil)), nil, ""},
		{"EdDSA", iss.sign(t, "ed", with(nil)), nil, ""},
		{"audience among several", iss.sign(t, "rsa", with(map[string]any{"aud": []string{"https://other.example.com", testAudience}})), nil, ""},
		{"expired within the skew", iss.sign(t, "ec", with(map[string]any{"exp": now.Add(-10 * time.Second).Unix()})), nil, ""},
		{"nbf in the future within the skew", iss.sign(t, "ec", with(map[string]any{"nbf": now.Add(10 * time.Second).Unix()})), nil, ""},
		{"no kid, one key for its alg", signWith(t, jwa.ES256(), iss.key(t, "ec"), nil, with(nil)), nil, ""},

		{"expired", iss.sign(t, "ec", with(map[string]any{"exp": now.Add(-time.Minute).Unix()})), ErrInvalidToken, "token expired"},
		{"nbf in the future", iss.sign(t, "ec", with(map[string]any{"nbf": now.Add(5 * time.Minute).Unix()})), ErrInvalidToken, "token not valid yet"},
		{"iat in the future", iss.sign(t, "ec", with(map[string]any{"iat": now.Add(5 * time.Minute).Unix()})), ErrInvalidToken, "token issued in the future"},
		{"no exp", iss.sign(t, "ec", with(map[string]any{"exp": nil})), ErrInvalidToken, "token has no expiry"},
		{"wrong audience", iss.sign(t, "ec", with(map[string]any{"aud": "https://other.example.com"})), ErrInvalidToken, "token for another audience"},
		{"no audience", iss.sign(t, "ec", with(map[string]any{"aud": nil})), ErrInvalidToken, "token for another audience"},
		{"wrong issuer", iss.sign(t, "ec", with(map[string]any{"iss": "https://evil.example.com"})), ErrInvalidToken, "token from another issuer"},
		{"no sub", iss.sign(t, "ec", with(map[string]any{"sub": nil})), ErrInvalidToken, "token has no subject"},
		{"empty sub", iss.sign(t, "ec", with(map[string]any{"sub": ""})), ErrInvalidToken, "token has no subject"},
		{"payload changed", parts[0] + "." + b64(admin) + "." + parts[2], ErrInvalidToken, "bad signature"},
		{"foreign key under a real kid", signWith(t, jwa.RS256(), newKey(t, "rsa", jwa.RS256()), map[string]any{"kid": "rsa"}, with(nil)), ErrInvalidToken, "bad signature"},
		{"alg none", b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + ".", ErrInvalidToken, "token's signature algorithm is not allowed"},
		{"HS256 keyed with the public key", signWith(t, jwa.HS256(), pubPEM, map[string]any{"kid": "rsa"}, with(nil)), ErrInvalidToken, "token's signature algorithm is not allowed"},
		{"HS256 keyed with the public key, no kid", signWith(t, jwa.HS256(), der, nil, with(nil)), ErrInvalidToken, "token's signature algorithm is not allowed"},
		{"alg other than the key's", signWith(t, jwa.PS256(), iss.key(t, "rsa"), map[string]any{"kid": "rsa"}, with(nil)), ErrInvalidToken, "no key of the authorization server's matches the token's key ID and algorithm"},
		{"not a JWT", "abc.def", ErrInvalidToken, "token is not a signed JWT"},
		{"too large", good + strings.Repeat("A", maxTokenSize), ErrInvalidToken, "token too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := o.Authenticate(context.Background(), tt.token)
			if tt.wantKind == nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if want := identity.Principal(iss.issuer + "|user-1"); p != want {
					t.Errorf("principal %q, want %q", p, want)
				}
				return
			}
			if !errors.Is(err, tt.wantKind) {
				t.Fatalf("Authenticate = %q, %v; want %v", p, err, tt.wantKind)
			}
			if e := refusal(t, err, tt.token); e.Description != tt.wantDesc {
				t.Errorf("description %q, want %q", e.Description, tt.wantDesc)
			}
		})
	}
}

func TestOAuthDiscovery(t *testing.T) {
	tests := []struct {
		name string
		opts issuerOptions
	}{
		{"RFC 8414", issuerOptions{}},
		{"RFC 8414, issuer with path", issuerOptions{path: "/tenant"}},
		{"OpenID Connect only", issuerOptions{oidcOnly: true}},
		{"OpenID Connect only, issuer with path", issuerOptions{path: "/tenant", oidcOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iss := newTestIssuer(t, tt.opts)
			clock := newFakeClock()
			o := newTestOAuth(t, iss, clock)
			if got := iss.metadataHits.Load(); got != 1 {
				t.Errorf("%d metadata fetches, want 1", got)
			}
			p, err := o.Authenticate(context.Background(), iss.sign(t, "ec", iss.claims(clock.Now())))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if want := identity.Principal(iss.issuer + "|user-1"); p != want {
				t.Errorf("principal %q, want %q", p, want)
			}
			if got := o.AuthorizationServers(); !slices.Equal(got, []string{iss.issuer}) {
				t.Errorf("AuthorizationServers() = %q", got)
			}
		})
	}
}

func TestMetadataURLs(t *testing.T) {
	tests := []struct {
		issuer string
		want   []string
	}{
		{"https://as.example.com", []string{
			"https://as.example.com/.well-known/oauth-authorization-server",
			"https://as.example.com/.well-known/openid-configuration",
		}},
		{"https://as.example.com/", []string{
			"https://as.example.com/.well-known/oauth-authorization-server",
			"https://as.example.com/.well-known/openid-configuration",
		}},
		{"https://as.example.com:8443/tenant/1/", []string{
			"https://as.example.com:8443/.well-known/oauth-authorization-server/tenant/1",
			"https://as.example.com:8443/.well-known/openid-configuration/tenant/1",
			"https://as.example.com:8443/tenant/1/.well-known/openid-configuration",
		}},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.issuer)
		if err != nil {
			t.Fatal(err)
		}
		if got := metadataURLs(u); !slices.Equal(got, tt.want) {
			t.Errorf("metadataURLs(%s) = %q, want %q", tt.issuer, got, tt.want)
		}
	}
}

func TestNewOAuthRefuses(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{path: "/tenant"})
	liar := newTestIssuer(t, issuerOptions{claimed: "https://other.example.com"})
	tests := []struct {
		name    string
		cfg     OAuthConfig
		wantErr string
	}{
		{"metadata of another issuer", OAuthConfig{Issuer: liar.issuer, HTTPClient: liar.srv.Client()}, `names issuer "https://other.example.com"`},
		{"no metadata", OAuthConfig{Issuer: iss.srv.URL + "/nothing", HTTPClient: iss.srv.Client()}, "404 Not Found"},
		{"plain HTTP issuer", OAuthConfig{Issuer: "http://as.example.com"}, "not an https URL"},
		{"relative issuer", OAuthConfig{Issuer: "as.example.com"}, "not an absolute URL"},
		{"issuer with query", OAuthConfig{Issuer: "https://as.example.com/?tenant=1"}, "query or fragment"},
		{"no audience", OAuthConfig{Issuer: "https://as.example.com", Audience: "-"}, "no audience"},
		{"bad scope", OAuthConfig{Issuer: "https://as.example.com", Scopes: []string{"a b"}}, "not a scope token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			switch cfg.Audience {
			case "":
				cfg.Audience = testAudience
			case "-":
				cfg.Audience = ""
			}
			cfg.Log = zaptest.NewLogger(t)
			o, err := NewOAuth(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewOAuth = %v, %v; want error with %q", o, err, tt.wantErr)
			}
		})
	}
}

func TestOAuthIssuerDownThenUp(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{down: true})
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	token := iss.sign(t, "rsa", iss.claims(clock.Now()))

	// Two metadata URLs for an issuer without path.
	if got := iss.requests.Load(); got != 2 {
		t.Errorf("%d requests to the issuer while constructing, want 2", got)
	}
	_, err := o.Authenticate(context.Background(), token)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("while down: Authenticate error %v, want ErrUnavailable", err)
	}
	if e := refusal(t, err, token); e.Description != "cannot fetch the authorization server's keys" {
		t.Errorf("description %q", e.Description)
	}
	iss.down.Store(false)
	// Up again, but the last try was just now.
	if _, err := o.Authenticate(context.Background(), token); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("within fetchInterval: Authenticate error %v, want ErrUnavailable", err)
	}
	if got := iss.requests.Load(); got != 2 {
		t.Errorf("%d requests to the issuer, want still 2: none within fetchInterval of a failed fetch", got)
	}
	clock.Advance(fetchInterval)
	if _, err := o.Authenticate(context.Background(), token); err != nil {
		t.Fatalf("once up: Authenticate: %v", err)
	}
}

func TestOAuthIssuerUnreachable(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	client := srv.Client()
	srv.Close()
	o, err := NewOAuth(t.Context(), OAuthConfig{Issuer: srv.URL, Audience: testAudience, HTTPClient: client, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("NewOAuth with the issuer unreachable: %v", err)
	}
	claims := map[string]any{"iss": srv.URL, "aud": testAudience, "sub": "u", "exp": time.Now().Add(time.Hour).Unix()}
	token := signWith(t, jwa.ES256(), newKey(t, "ec", jwa.ES256()), map[string]any{"kid": "ec"}, claims)
	if _, err := o.Authenticate(context.Background(), token); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Authenticate error %v, want ErrUnavailable", err)
	}
}

func TestOAuthKeyRotation(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	iss.addKey(t, "ec2", jwa.ES256())
	token := iss.sign(t, "ec2", iss.claims(clock.Now()))

	// The keys were fetched just now: the new key waits for fetchInterval.
	if _, err := o.Authenticate(context.Background(), token); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Authenticate error %v, want ErrInvalidToken", err)
	}
	clock.Advance(fetchInterval)
	if _, err := o.Authenticate(context.Background(), token); err != nil {
		t.Fatalf("after fetchInterval: Authenticate: %v", err)
	}
	if got := iss.jwksHits.Load(); got != 2 {
		t.Errorf("%d JWKS fetches, want 2", got)
	}
}

func TestOAuthUnknownKid(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	clock.Advance(fetchInterval)
	token := signWith(t, jwa.ES256(), newKey(t, "x", jwa.ES256()), map[string]any{"kid": "unknown"}, iss.claims(clock.Now()))
	for i, wantHits := range []int32{2, 2} {
		_, err := o.Authenticate(context.Background(), token)
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("try %d: Authenticate error %v, want ErrInvalidToken", i, err)
		}
		if got := iss.jwksHits.Load(); got != wantHits {
			t.Errorf("try %d: %d JWKS fetches, want %d", i, got, wantHits)
		}
	}
}

func TestOAuthRefreshRateLimit(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	foreign := newKey(t, "x", jwa.ES256())
	tokens := make([]string, 20)
	for i := range tokens {
		tokens[i] = signWith(t, jwa.ES256(), foreign, map[string]any{"kid": fmt.Sprint("bogus-", i)}, iss.claims(clock.Now()))
	}
	authenticate := func(token string) {
		if _, err := o.Authenticate(context.Background(), token); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Authenticate error %v, want ErrInvalidToken", err)
		}
	}
	for round, wantHits := range []int32{2, 3} {
		clock.Advance(fetchInterval)
		// At once, as an attacker would; then one by one.
		var wg sync.WaitGroup
		for _, token := range tokens {
			wg.Go(func() { authenticate(token) })
		}
		wg.Wait()
		for _, token := range tokens {
			authenticate(token)
		}
		if got := iss.jwksHits.Load(); got != wantHits {
			t.Errorf("round %d: %d JWKS fetches, want %d", round, got, wantHits)
		}
	}
}

// TestOAuthKeysSizeLimit: a JWKS larger than maxKeysSize is not read.
func TestOAuthKeysSizeLimit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		padding int
		refused bool
	}{
		{"within the limit", maxKeysSize / 2, false},
		{"above the limit", maxKeysSize, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			iss := newTestIssuer(t, issuerOptions{padding: tt.padding})
			clock := newFakeClock()
			o := newTestOAuth(t, iss, clock)
			_, err := o.Authenticate(t.Context(), iss.sign(t, "rsa", iss.claims(clock.Now())))
			switch {
			case !tt.refused && err != nil:
				t.Fatalf("Authenticate: %v", err)
			case tt.refused && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "exceeded max size")):
				t.Fatalf("Authenticate error %v, want ErrUnavailable for a JWKS above the limit", err)
			}
		})
	}
}

// TestOAuthKeysExpire: the cache fetches the keys again after keysMaxAge
// by itself, so that a key the issuer has withdrawn stops being accepted.
func TestOAuthKeysExpire(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	synctest.Test(t, func(t *testing.T) {
		o := newBubbleOAuth(t, iss)
		iss.removeKey("ec")

		time.Sleep(keysMaxAge - time.Second)
		synctest.Wait()
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "ec", iss.claims(time.Now()))); err != nil {
			t.Fatalf("before keysMaxAge: Authenticate: %v", err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := iss.jwksHits.Load(); got != 2 {
			t.Errorf("%d JWKS fetches at keysMaxAge, want 2: none by requests, one in the background", got)
		}
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "rsa", iss.claims(time.Now()))); err != nil {
			t.Fatalf("kept key after keysMaxAge: Authenticate: %v", err)
		}
		// An unknown key: it may have been rotated in since the last fetch
		// a request made, which was keysMaxAge ago.
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "ec", iss.claims(time.Now()))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("withdrawn key after keysMaxAge: Authenticate error %v, want ErrInvalidToken", err)
		}
		if got := iss.jwksHits.Load(); got != 3 {
			t.Errorf("%d JWKS fetches, want 3", got)
		}
	})
}

// TestOAuthKeysStaleAfterFailedRefresh: when the refresh after keysMaxAge
// fails, the keys at hand still verify, and requests fetch them again,
// within fetchInterval, rather than wait for the cache's next refresh.
func TestOAuthKeysStaleAfterFailedRefresh(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	synctest.Test(t, func(t *testing.T) {
		o := newBubbleOAuth(t, iss)
		iss.down.Store(true)
		time.Sleep(keysMaxAge + time.Second)
		synctest.Wait()
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "rsa", iss.claims(time.Now()))); err != nil {
			t.Fatalf("issuer down after keysMaxAge: Authenticate: %v, want the keys at hand used", err)
		}
		iss.down.Store(false)
		iss.removeKey("ec")
		time.Sleep(fetchInterval)
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "rsa", iss.claims(time.Now()))); err != nil {
			t.Fatalf("issuer up again: Authenticate: %v", err)
		}
		if got := iss.jwksHits.Load(); got != 2 {
			t.Errorf("%d JWKS fetches, want 2: the first, and the request's once the issuer is up", got)
		}
		if _, err := o.Authenticate(t.Context(), iss.sign(t, "ec", iss.claims(time.Now()))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("withdrawn key: Authenticate error %v, want ErrInvalidToken", err)
		}
	})
}

func TestOAuthNoKidSeveralKeys(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	iss.addKey(t, "ec2", jwa.ES256())
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	token := signWith(t, jwa.ES256(), iss.key(t, "ec"), nil, iss.claims(clock.Now()))
	_, err := o.Authenticate(context.Background(), token)
	if !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Authenticate error %v, want ErrInvalidToken", err)
	}
	if e := refusal(t, err, token); e.Description != "token has no key ID and the authorization server has several keys" {
		t.Errorf("description %q", e.Description)
	}
}

func TestOAuthScopes(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	clock := newFakeClock()
	want := []string{"mcp:run", "files:read"}
	o := newTestOAuth(t, iss, clock, want...)
	tests := []struct {
		name   string
		claims map[string]any
		ok     bool
	}{
		{"scope string", map[string]any{"scope": "files:read other mcp:run"}, true},
		{"scp array", map[string]any{"scp": []string{"mcp:run", "files:read"}}, true},
		{"scp string", map[string]any{"scp": "mcp:run files:read"}, true},
		{"one missing", map[string]any{"scope": "mcp:run"}, false},
		{"prefix is not the scope", map[string]any{"scope": "mcp:run files:readwrite"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := iss.claims(clock.Now())
			for k, v := range tt.claims {
				claims[k] = v
			}
			token := iss.sign(t, "ec", claims)
			_, err := o.Authenticate(context.Background(), token)
			if tt.ok {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInsufficientScope) {
				t.Fatalf("Authenticate error %v, want ErrInsufficientScope", err)
			}
			if e := refusal(t, err, token); !slices.Equal(e.Scope, want) {
				t.Errorf("Scope %q, want %q", e.Scope, want)
			}
		})
	}
}

func TestOAuthEncryptionKey(t *testing.T) {
	iss := newTestIssuer(t, issuerOptions{})
	iss.addKey(t, "enc", jwa.ES256())
	iss.mu.Lock()
	err := iss.public[len(iss.public)-1].Set(jwk.KeyUsageKey, jwk.ForEncryption)
	iss.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	o := newTestOAuth(t, iss, clock)
	token := iss.sign(t, "enc", iss.claims(clock.Now()))
	if _, err := o.Authenticate(context.Background(), token); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token signed with a key for encryption: Authenticate error %v, want ErrInvalidToken", err)
	}
}
