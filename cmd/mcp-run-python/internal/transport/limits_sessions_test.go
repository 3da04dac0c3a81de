package transport

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// One principal cannot take every MCP session: past its own cap it is told
// so, naming the flag, while other principals still get theirs; sessions
// that end, and initialize requests that start none, free their place.
// Without authentication only the server's cap applies.
func TestMCPSessionsPerPrincipal(t *testing.T) {
	// request is an initialize request of principal ("" for none).
	request := func(principal string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if principal != "" {
			r = r.WithContext(identity.WithPrincipal(r.Context(), identity.Principal(principal)))
		}
		return r
	}

	t.Run("streamable_http", func(t *testing.T) {
		ids := newSessionIDs(Limits{MaxMCPSessions: 10, MaxMCPSessionsPerPrincipal: 2})
		start := func(principal string) (string, error) {
			r, res, err := ids.reserve(request(principal))
			if err != nil {
				return "", err
			}
			defer ids.unreserve(res)
			return ids.ResolveSessionIdManager(r).Generate(), nil
		}
		a1, err := start("alice")
		if err != nil {
			t.Fatal(err)
		}
		// A reservation that starts no session holds no place once done.
		_, res, err := ids.reserve(request("alice"))
		if err != nil {
			t.Fatal(err)
		}
		ids.unreserve(res)
		if _, err := start("alice"); err != nil {
			t.Fatal(err)
		}
		_, err = start("alice")
		if err == nil || !strings.Contains(err.Error(), "you hold the 2 one caller may hold (--max-mcp-sessions-per-principal)") {
			t.Fatalf("a third session of alice: %v, want the cap per principal", err)
		}
		for i := range 3 {
			_, err := start("bob")
			if want := "you hold the 2"; (err != nil) != (i == 2) || err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("bob's session %d: %v", i+1, err)
			}
		}
		for range 5 {
			if _, err := start(""); err != nil {
				t.Errorf("without authentication: %v", err)
			}
		}
		if _, err := ids.Terminate(a1); err != nil {
			t.Fatal(err)
		}
		if _, err := start("alice"); err != nil {
			t.Errorf("after one of hers ended: %v", err)
		}
	})

	t.Run("sse", func(t *testing.T) {
		streams := newSSEStreams(Limits{MaxMCPSessions: 10, MaxMCPSessionsPerPrincipal: 2}, newPendingResponses())
		for range 2 {
			if err := streams.acquire("alice"); err != nil {
				t.Fatal(err)
			}
		}
		if err := streams.acquire("alice"); err == nil || !strings.Contains(err.Error(), "(--max-mcp-sessions-per-principal)") {
			t.Fatalf("a third stream of alice: %v, want the cap per principal", err)
		}
		if err := streams.acquire("bob"); err != nil {
			t.Errorf("bob: %v", err)
		}
		for range 3 {
			if err := streams.acquire(""); err != nil {
				t.Errorf("without authentication: %v", err)
			}
		}
		streams.release("alice")
		if err := streams.acquire("alice"); err != nil {
			t.Errorf("after one of hers ended: %v", err)
		}
	})
}
