package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"go.uber.org/zap/zaptest"
)

// testAudience is the audience of the tests' resource server.
const testAudience = "https://mcp.example.com/mcp"

// fakeClock is a clock that tests move by hand, so that fetchInterval and
// keysMaxAge can pass without waiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// issuerOptions vary the test issuer.
type issuerOptions struct {
	path     string // of the issuer identifier, e.g. "/tenant"
	oidcOnly bool   // serve only OpenID Connect discovery, at the appended URL
	claimed  string // the issuer that the metadata names, if not the real one
	down     bool   // start down
	padding  int    // bytes of white space after the JWKS
}

// testIssuer is an authorization server on a local TLS listener: it
// publishes metadata and a JWKS, counts the requests for them, and signs
// tokens with its keys.
type testIssuer struct {
	srv    *httptest.Server
	issuer string

	mu     sync.Mutex
	keys   map[string]jwk.Key // private keys by kid
	public []jwk.Key          // the published keys, in order

	down         atomic.Bool
	requests     atomic.Int32 // all of them, down or up
	jwksHits     atomic.Int32
	metadataHits atomic.Int32
}

// newTestIssuer starts an issuer with the keys "rsa" (RS256), "ps" (PS256,
// an RSA key), "ec" (ES256) and "ed" (EdDSA).
func newTestIssuer(t *testing.T, opts issuerOptions) *testIssuer {
	t.Helper()
	iss := &testIssuer{keys: map[string]jwk.Key{}}
	iss.down.Store(opts.down)
	iss.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.requests.Add(1)
		if iss.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		metadataPath := "/.well-known/oauth-authorization-server" + opts.path
		if opts.oidcOnly {
			metadataPath = opts.path + "/.well-known/openid-configuration"
		}
		switch r.URL.Path {
		case metadataPath:
			iss.metadataHits.Add(1)
			claimed := opts.claimed
			if claimed == "" {
				claimed = iss.issuer
			}
			writeJSON(t, w, map[string]string{"issuer": claimed, "jwks_uri": iss.srv.URL + "/jwks"})
		case "/jwks":
			iss.jwksHits.Add(1)
			iss.mu.Lock()
			keys := map[string]any{"keys": iss.public}
			iss.mu.Unlock()
			writeJSON(t, w, keys)
			if opts.padding > 0 {
				_, _ = w.Write([]byte(strings.Repeat(" ", opts.padding)))
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(iss.srv.Close)
	iss.issuer = iss.srv.URL + opts.path
	iss.addKey(t, "rsa", jwa.RS256())
	iss.addKey(t, "ps", jwa.PS256())
	iss.addKey(t, "ec", jwa.ES256())
	iss.addKey(t, "ed", jwa.EdDSA())
	return iss
}

func writeJSON(t *testing.T, w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Errorf("encode: %v", err)
	}
}

// addKey makes a key for alg, publishes it as kid and returns it.
func (iss *testIssuer) addKey(t *testing.T, kid string, alg jwa.SignatureAlgorithm) jwk.Key {
	t.Helper()
	priv := newKey(t, kid, alg)
	pub, err := priv.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys[kid] = priv
	iss.public = append(iss.public, pub)
	return priv
}

// removeKey withdraws the published key kid.
func (iss *testIssuer) removeKey(kid string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	for i, k := range iss.public {
		if id, _ := k.KeyID(); id == kid {
			iss.public = append(iss.public[:i:i], iss.public[i+1:]...)
			return
		}
	}
}

// key returns the private key kid.
func (iss *testIssuer) key(t *testing.T, kid string) jwk.Key {
	t.Helper()
	iss.mu.Lock()
	defer iss.mu.Unlock()
	k, ok := iss.keys[kid]
	if !ok {
		t.Fatalf("no key %q", kid)
	}
	return k
}

// newKey returns a new private key for alg, with kid and alg set.
func newKey(t *testing.T, kid string, alg jwa.SignatureAlgorithm) jwk.Key {
	t.Helper()
	var raw any
	var err error
	switch alg.String() {
	case "RS256", "PS256":
		raw, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		raw, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, raw, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{jwk.KeyIDKey: kid, jwk.AlgorithmKey: alg} {
		if err := key.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

// claims returns the claims of a good token for a subject, at now.
func (iss *testIssuer) claims(now time.Time) map[string]any {
	return map[string]any{
		"iss": iss.issuer,
		"aud": testAudience,
		"sub": "user-1",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// sign returns a token with claims signed by the issuer's key kid.
func (iss *testIssuer) sign(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	key := iss.key(t, kid)
	alg, _ := key.Algorithm()
	return signWith(t, alg.(jwa.SignatureAlgorithm), key, map[string]any{"kid": kid}, claims)
}

// signWith signs claims with key by alg under header, which gets alg
// too; it can make tokens that the issuer would not.
func signWith(t *testing.T, alg jwa.SignatureAlgorithm, key any, header, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := key.(jwk.Key); ok {
		// Sign with the bare key, so that the header holds only what the
		// test says.
		var raw any
		if err := jwk.Export(k, &raw); err != nil {
			t.Fatal(err)
		}
		key = raw
	}
	h := jws.NewHeaders()
	for name, v := range header {
		if err := h.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newTestOAuth returns an OAuth for iss with the clock given, whose
// construction must succeed.
func newTestOAuth(t *testing.T, iss *testIssuer, clock *fakeClock, scopes ...string) *OAuth {
	t.Helper()
	o, err := newOAuth(t.Context(), OAuthConfig{
		Issuer:     iss.issuer,
		Audience:   testAudience,
		Scopes:     scopes,
		HTTPClient: iss.srv.Client(),
		Log:        zaptest.NewLogger(t),
	}, clock.Now)
	if err != nil {
		t.Fatalf("newOAuth: %v", err)
	}
	return o
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newBubbleOAuth returns an OAuth for iss on the real clock, for a test in
// a testing/synctest bubble, where that clock is fake: its client calls
// the issuer's handler on the caller's goroutine rather than over the
// network, so that every goroutine of a fetch is in the bubble and waits
// durably. iss must have been started outside the bubble.
func newBubbleOAuth(t *testing.T, iss *testIssuer) *OAuth {
	t.Helper()
	handler := iss.srv.Config.Handler
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		resp := rec.Result()
		resp.Request = r
		return resp, nil
	})}
	o, err := NewOAuth(t.Context(), OAuthConfig{Issuer: iss.issuer, Audience: testAudience, HTTPClient: client, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("NewOAuth: %v", err)
	}
	return o
}

// refusal returns the *Error in err, failing the test if there is none or
// if it tells any part of token.
func refusal(t *testing.T, err error, token string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is no *Error", err)
	}
	for _, part := range strings.Split(token, ".") {
		if len(part) > 8 && strings.Contains(e.Description, part) {
			t.Errorf("description %q tells the token", e.Description)
		}
	}
	return e
}
