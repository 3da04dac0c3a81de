package main_test

// End-to-end tests of who may call the HTTP modes: OAuth access tokens of a
// real local issuer, static tokens, the state each principal owns, TLS, and
// the warning of an open server.
//
//	go test ./cmd/mcp-run-python/ -run Auth -count=1 -v

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/mark3labs/mcp-go/client/transport"
)

// testAudience is the audience the servers of these tests accept.
const testAudience = "mcp-run-python-e2e"

// localIssuer is an OAuth authorization server on 127.0.0.1: RFC 8414
// metadata and a JWKS with one RSA key, "k1", whose tokens it signs.
type localIssuer struct {
	url string
	key jwk.Key // private, kid k1
}

func newLocalIssuer(t *testing.T) *localIssuer {
	t.Helper()
	iss := &localIssuer{key: rsaKey(t, "k1")}
	pub, err := iss.key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc any
		// From the request, not iss.url: that is set after the server
		// starts, with no ordering the race detector can see.
		url := "http://" + r.Host
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			doc = map[string]string{"issuer": url, "jwks_uri": url + "/jwks"}
		case "/jwks":
			doc = map[string]any{"keys": []jwk.Key{pub}}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

// rsaKey is a new RS256 private key named kid.
func rsaKey(t *testing.T, kid string) jwk.Key {
	t.Helper()
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	return key
}

// claims are those of a good token of subject sub.
func (iss *localIssuer) claims(sub string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": iss.url, "aud": testAudience, "sub": sub, "scope": "mcp:run",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// token is a good token of sub, changed by edit when not nil.
func (iss *localIssuer) token(t *testing.T, sub string, edit func(map[string]any)) string {
	t.Helper()
	c := iss.claims(sub)
	if edit != nil {
		edit(c)
	}
	return sign(t, iss.key, "k1", c)
}

// sign signs claims by RS256 with key, under kid.
func sign(t *testing.T, key jwk.Key, kid string, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	b, err := jws.Sign(payload, jws.WithKey(jwa.RS256(), key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unsigned is a token with "alg": "none" and no signature.
func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + enc.EncodeToString(payload) + "."
}

// httpAnswer is what a raw HTTP request got.
type httpAnswer struct {
	status int
	header http.Header
	body   string
}

// do sends a request to tg with headers (key, value, ...) and body (GET
// when empty).
func (tg *target) do(t *testing.T, path, body string, headers ...string) httpAnswer {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, tg.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := tg.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return httpAnswer{resp.StatusCode, resp.Header, string(data)}
}

const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	toolsListBody  = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

func TestAuthOAuth(t *testing.T) {
	s := setup(t)
	iss := newLocalIssuer(t)
	tg := startTarget(t, s, modeStateful, "--sessions", "--oauth-issuer", iss.url, "--oauth-audience", testAudience, "--oauth-scopes", "mcp:run",
		"--max-sessions", "4", "--max-mcp-sessions-per-principal", "3")
	metadataURL := tg.url + "/.well-known/oauth-protected-resource/mcp"

	t.Run("no_token", func(t *testing.T) {
		got := tg.do(t, "/mcp", initializeBody)
		if want := `Bearer resource_metadata="` + metadataURL + `"`; got.status != http.StatusUnauthorized || got.header.Get("WWW-Authenticate") != want {
			t.Errorf("initialize without a token: %d, WWW-Authenticate %q; want 401, %q", got.status, got.header.Get("WWW-Authenticate"), want)
		}
		// The metadata it names tells clients where to get a token.
		meta := tg.do(t, strings.TrimPrefix(metadataURL, tg.url), "")
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
		}
		if err := json.Unmarshal([]byte(meta.body), &doc); err != nil || meta.status != http.StatusOK {
			t.Fatalf("GET %s: %d %q", metadataURL, meta.status, meta.body)
		}
		if doc.Resource != tg.url+"/mcp" || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != iss.url ||
			len(doc.Scopes) != 1 || doc.Scopes[0] != "mcp:run" {
			t.Errorf("protected resource metadata %+v", doc)
		}
		// The probes need no token.
		for _, path := range []string{"/healthz", "/metrics"} {
			if got := tg.do(t, path, ""); got.status != http.StatusOK {
				t.Errorf("GET %s without a token: %d", path, got.status)
			}
		}
	})

	foreign := rsaKey(t, "k1")
	bad := []struct {
		name, token string
		status      int
		errorCode   string
	}{
		{"expired", iss.token(t, "alice", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), 401, "invalid_token"},
		{"not_yet_valid", iss.token(t, "alice", func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), 401, "invalid_token"},
		{"wrong_audience", iss.token(t, "alice", func(c map[string]any) { c["aud"] = "another-server" }), 401, "invalid_token"},
		{"wrong_issuer", iss.token(t, "alice", func(c map[string]any) { c["iss"] = "https://evil.example" }), 401, "invalid_token"},
		{"foreign_key", sign(t, foreign, "k1", iss.claims("alice")), 401, "invalid_token"},
		{"unknown_kid", sign(t, foreign, "k9", iss.claims("alice")), 401, "invalid_token"},
		{"alg_none", unsigned(t, iss.claims("alice")), 401, "invalid_token"},
		{"missing_scope", iss.token(t, "alice", func(c map[string]any) { c["scope"] = "other" }), 403, "insufficient_scope"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			got := tg.do(t, "/mcp", initializeBody, "Authorization", "Bearer "+tc.token)
			challenge := got.header.Get("WWW-Authenticate")
			if got.status != tc.status || !strings.Contains(challenge, `error="`+tc.errorCode+`"`) || !strings.Contains(challenge, metadataURL) {
				t.Errorf("initialize: %d, WWW-Authenticate %q; want %d, error %q", got.status, challenge, tc.status, tc.errorCode)
			}
		})
	}

	alice := tg.as(iss.token(t, "alice", nil))
	a := alice.connect(t)
	a.expectWorks(t)
	bob := tg.as(iss.token(t, "bob", nil))
	b := bob.connect(t)
	testPrincipalsOwnTheirState(t, a, b)

	t.Run("modern_clients", func(t *testing.T) {
		// A client of the 2026-07-28 protocol has an MCP session whose id
		// is "": what it starts is its principal's all the same.
		// Such a client holds no GET stream: it is made as for a stateless
		// server (the mode only picks the client's transport).
		modern := func(tg *target) *e2eClient {
			cp := *tg
			cp.mode = modeStateless
			return cp.connectProtocol(t, modernProtocol)
		}
		am, bm := modern(alice), modern(bob)
		for _, c := range []*e2eClient{am, bm} {
			c.knowTools(t)
		}
		id := testPrincipalsOwnTheirState(t, am, bm)
		// The owner is the principal, whatever the protocol.
		a.expectRunIn(t, id, "open('notes.txt').read()", success("hers"))
	})

	t.Run("caps_per_principal", func(t *testing.T) {
		// Alice holds the 2 Python sessions of her own (half of
		// --max-sessions 4) and 1 MCP session: she can start no more
		// Python sessions, and 2 more MCP sessions; Bob still can.
		res := a.callNamed(t, createSessionTool, map[string]any{})
		if text := resultText(t, res); !res.IsError || !strings.Contains(text, "the maximum of 2 sessions one caller may hold (--max-sessions-per-principal)") {
			t.Errorf("create_session past alice's cap: %q (isError %v)", text, res.IsError)
		}
		b.createSession(t, defaultIdle)
		aliceToken, bobToken := alice.headers["Authorization"], bob.headers["Authorization"]
		for i := range 3 {
			got := tg.do(t, "/mcp", initializeBody, "Authorization", aliceToken)
			switch {
			case i < 2 && got.status != http.StatusOK:
				t.Errorf("alice's MCP session %d: %d %q", i+2, got.status, got.body)
			case i == 2 && (got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, "--max-mcp-sessions-per-principal")):
				t.Errorf("alice's MCP session past her cap of 3: %d %q, want 503 naming --max-mcp-sessions-per-principal", got.status, got.body)
			}
		}
		if got := tg.do(t, "/mcp", initializeBody, "Authorization", bobToken); got.status != http.StatusOK {
			t.Errorf("bob's second MCP session: %d %q", got.status, got.body)
		}
	})

	t.Run("mcp_session", func(t *testing.T) {
		// Bob's token with Alice's MCP session is, to him, no session at all.
		id := a.GetSessionId()
		aliceToken, bobToken := alice.headers["Authorization"], bob.headers["Authorization"]
		mine := tg.do(t, "/mcp", toolsListBody, "Authorization", aliceToken, "Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18")
		if mine.status != http.StatusOK {
			t.Fatalf("tools/list in her own session: %d %q", mine.status, mine.body)
		}
		theirs := tg.do(t, "/mcp", toolsListBody, "Authorization", bobToken, "Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18")
		none := tg.do(t, "/mcp", toolsListBody, "Authorization", bobToken, "Mcp-Session-Id", "mcp-session-nosuchsession", "Mcp-Protocol-Version", "2025-06-18")
		if theirs.status != none.status || theirs.body != none.body || theirs.status == http.StatusOK {
			t.Errorf("tools/list in another principal's MCP session: %d %q; for an unknown session: %d %q", theirs.status, theirs.body, none.status, none.body)
		}
	})
}

// testPrincipalsOwnTheirState: what alice starts (a Python session, files)
// bob can use no more than what never was. It returns her session.
func testPrincipalsOwnTheirState(t *testing.T, alice, bob *e2eClient) (id string) {
	t.Helper()
	t.Run("python_sessions_and_files", func(t *testing.T) {
		id = alice.createSession(t, defaultIdle)
		res, _ := alice.runIn(t, id, putFiles+"put('notes.txt', 'hers')")
		_, sessionURIs := alice.expectFiles(t, res, "session", []wantFile{{path: "notes.txt", mime: "text/plain", data: []byte("hers")}})
		res, _ = alice.runArgs(t, map[string]any{"python_code": putFiles + "put('mine.txt', 'mine')"})
		_, callURIs := alice.expectFiles(t, res, "call", []wantFile{{path: "mine.txt", mime: "text/plain", data: []byte("mine")}})
		expectNotOwned(t, bob, []string{id}, append(sessionURIs, callURIs...))
		alice.expectRunIn(t, id, "open('notes.txt').read()", success("hers"))
	})
	return id
}

// tokenFile is a new token file of tokens, readable by its owner only.
func tokenFile(t *testing.T, tokens ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, file, tokens...)
	return file
}

// writeTokens writes a token file readable by its owner only.
func writeTokens(t *testing.T, path string, tokens ...string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte("# tokens of the e2e tests\n"+strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestAuthStaticTokens(t *testing.T) {
	s := setup(t)
	const aliceToken, bobToken = "alice-0123456789abcdef0123456789", "bob-0123456789abcdef0123456789ab"
	file := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, file, aliceToken, bobToken)
	for _, mode := range []string{modeSSE, modeStateless} {
		t.Run(mode, func(t *testing.T) {
			tg := startTarget(t, s, mode, "--sessions", "--auth-token-file", file, "--metrics-auth")
			if got := tg.do(t, "/metrics", ""); got.status != http.StatusUnauthorized || got.header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("GET /metrics without a token, with --metrics-auth: %d, WWW-Authenticate %q", got.status, got.header.Get("WWW-Authenticate"))
			}
			if got := tg.do(t, "/metrics", "", "Authorization", "Bearer "+bobToken); got.status != http.StatusOK {
				t.Errorf("GET /metrics with a token: %d", got.status)
			}
			if got := tg.do(t, "/healthz", ""); got.status != http.StatusOK {
				t.Errorf("GET /healthz without a token: %d", got.status)
			}
			if got := tg.do(t, tg.launchPath(), initializeBody, "Authorization", "Bearer not-a-token"); got.status != http.StatusUnauthorized {
				t.Errorf("a wrong token: %d %q", got.status, got.body)
			}
			alice := tg.as(aliceToken).connect(t)
			bob := tg.as(bobToken).connect(t)
			testPrincipalsOwnTheirState(t, alice, bob)
			if mode == modeSSE {
				// Bob's token on Alice's SSE session is, to him, no session.
				id := alice.GetTransport().(*transport.SSE).GetEndpoint().Query().Get("sessionId")
				if id == "" {
					t.Fatal("alice's SSE client has no session")
				}
				theirs := tg.do(t, "/messages?sessionId="+id, toolsListBody, "Authorization", "Bearer "+bobToken)
				none := tg.do(t, "/messages?sessionId=nosuchsession", toolsListBody, "Authorization", "Bearer "+bobToken)
				if theirs.status != none.status || theirs.body != none.body || theirs.status == http.StatusAccepted {
					t.Errorf("a message to another principal's SSE session: %d %q; to an unknown one: %d %q", theirs.status, theirs.body, none.status, none.body)
				}
			}
		})
	}

	t.Run("sighup_reads_the_file_again", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no SIGHUP on Windows: a restart reads the file again")
		}
		tg := startTarget(t, s, modeStateless, "--auth-token-file", file)
		tg.as(bobToken).connect(t).expectWorks(t)
		writeTokens(t, file, aliceToken)
		if err := tg.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for tg.do(t, "/mcp", initializeBody, "Authorization", "Bearer "+bobToken).status != http.StatusUnauthorized {
			if time.Now().After(deadline) {
				t.Fatal("bob's token still works 10s after it left the file and SIGHUP")
			}
			time.Sleep(50 * time.Millisecond) // bounded polling for the reload
		}
		tg.as(aliceToken).connect(t).expectWorks(t)

		// A FIFO in the file's place is refused without waiting for a
		// writer: it used to hold the reload for ever, and every later
		// SIGHUP with it, so that a revoked token stayed accepted.
		makeFIFO(t, file+".fifo")
		if err := os.Rename(file+".fifo", file); err != nil {
			t.Fatal(err)
		}
		if err := tg.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(10 * time.Second)
		for !strings.Contains(tg.stderr.String(), "not a regular file") {
			if time.Now().After(deadline) {
				t.Fatalf("no refusal of the FIFO 10s after SIGHUP; stderr:\n%s", tg.stderr)
			}
			time.Sleep(50 * time.Millisecond) // bounded polling for the reload
		}
		tg.as(aliceToken).connect(t).expectWorks(t)
		writeTokens(t, file, bobToken)
		if err := tg.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(10 * time.Second)
		for tg.do(t, "/mcp", initializeBody, "Authorization", "Bearer "+aliceToken).status != http.StatusUnauthorized {
			if time.Now().After(deadline) {
				t.Fatal("alice's token still works 10s after a FIFO, then a file without it, and SIGHUP")
			}
			time.Sleep(50 * time.Millisecond) // bounded polling for the reload
		}
		tg.as(bobToken).connect(t).expectWorks(t)
	})
}

// launchPath is where tg's MCP clients POST their first message.
func (tg *target) launchPath() string {
	if tg.mode == modeSSE {
		return "/messages?sessionId=x"
	}
	return "/mcp"
}

func TestAuthTLS(t *testing.T) {
	s := setup(t)
	dir := t.TempDir()
	pool := selfSigned(t, dir)
	tg := startTarget(t, s, modeStateless, "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	tg.url = strings.Replace(tg.url, "http://", "https://", 1)
	tg.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	tg.connect(t).expectWorks(t)
	// Plain HTTP to the TLS port gets no MCP answer.
	resp, err := http.Post(strings.Replace(tg.url, "https://", "http://", 1)+"/mcp", "application/json", strings.NewReader(initializeBody))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
		}
	}
}

// selfSigned writes cert.pem and key.pem for 127.0.0.1 into dir and
// returns a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcp-run-python e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"cert.pem": {Type: "CERTIFICATE", Bytes: der}, "key.pem": {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// TestAuthWarnsOfAnOpenServer: listening beyond this machine with no
// authentication is allowed, loudly; on loopback, quietly.
func TestAuthWarnsOfAnOpenServer(t *testing.T) {
	s := setup(t)
	for _, tc := range []struct {
		host string
		warn bool
	}{{"0.0.0.0", true}, {"127.0.0.1", false}} {
		t.Run(tc.host, func(t *testing.T) {
			cmd := exec.Command(s.bin, append(s.baseArgs(), "--host", tc.host, "--port", strconv.Itoa(freePort(t)), "--warm", "1", modeStateless)...)
			cmd.Env = serverEnv()
			ownProcessGroup(cmd)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if stopServer(cmd.Process) != nil {
					_ = cmd.Process.Kill() // else Wait would wait forever
				}
				_ = cmd.Wait()
			}()
			// The warning comes right after the line that says where it
			// serves, or not at all.
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			var got []string
			var after <-chan time.Time
		read:
			for {
				select {
				case line, ok := <-lines:
					if !ok {
						break read
					}
					got = append(got, line)
					if strings.Contains(line, "serving") {
						after = time.After(2 * time.Second)
					}
				case <-after:
					break read
				case <-time.After(startTimeout):
					t.Fatalf("the server did not say where it serves; stderr:\n%s", strings.Join(got, "\n"))
				}
			}
			go func() {
				for range lines { // drain until it exits
				}
			}()
			warned := strings.Contains(strings.Join(got, "\n"), "CAN RUN CODE HERE")
			if warned != tc.warn {
				t.Errorf("--host %s without authentication: warned %v, want %v; stderr:\n%s", tc.host, warned, tc.warn, strings.Join(got, "\n"))
			}
		})
	}
}
