package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// TestReadUnknownResource checks that resources/read of a URI at which the
// caller has no file gets the error of an unknown resource, RESOURCE_NOT_FOUND
// (-32002), whether the file never was or is another owner's, and the same
// words for both; its own file it reads.
func TestReadUnknownResource(t *testing.T) {
	store, err := filestore.Open(filestore.Config{Dir: filepath.Join(t.TempDir(), "files"), MaxBytes: 1 << 20, TTL: time.Hour}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	call := filestore.NewCallScope()
	mine, err := store.Put("stdio", call, "mine.txt", []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := store.Put("mcp-session-other", filestore.NewCallScope(), "theirs.txt", []byte("theirs"))
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(&mcptest.FakeRunner{})
	o.Files = store
	s := newRawStdio(t, o)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	read := func(id int, uri string) (code int, message, text string) {
		t.Helper()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q}}`, id, uri))
		var answer struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Result *struct {
				Contents []struct {
					Text string `json:"text"`
				} `json:"contents"`
			} `json:"result"`
		}
		line := s.recv()
		if err := json.Unmarshal([]byte(line), &answer); err != nil {
			t.Fatalf("resources/read %s: %v: %s", uri, err, line)
		}
		switch {
		case answer.Error != nil:
			return answer.Error.Code, answer.Error.Message, ""
		case answer.Result != nil && len(answer.Result.Contents) == 1:
			return 0, "", answer.Result.Contents[0].Text
		}
		t.Fatalf("resources/read %s: %s", uri, line)
		return 0, "", ""
	}
	if code, msg, text := read(2, mine.URI); code != 0 || text != "mine" {
		t.Errorf("resources/read of its own file: %d %q %q", code, msg, text)
	}
	absent := strings.TrimSuffix(theirs.URI, "theirs.txt") + "absent.txt"
	_, wantMsg, _ := read(3, absent)
	for i, uri := range []string{absent, theirs.URI, "call://" + strings.Repeat("0", 32) + "/x", "session://nosuchsession/x", "call://x/a?b"} {
		code, msg, _ := read(4+i, uri)
		if code != -32002 {
			t.Errorf("resources/read %s: code %d (%q), want -32002 (resource not found)", uri, code, msg)
		}
		if uri == theirs.URI && strings.ReplaceAll(msg, uri, absent) != wantMsg {
			t.Errorf("resources/read of another owner's file: %q; of one that never was: %q", msg, wantMsg)
		}
	}
}

// idSession is a client session that has only an id.
type idSession struct {
	server.ClientSession
	id string
}

func (s idSession) SessionID() string { return s.id }

// TestPrincipals checks whose a request's state is: its principal whenever
// there is one, whatever its MCP session (a client of the 2026-07-28
// protocol has one whose id is ""), else its MCP session, else no one.
func TestPrincipals(t *testing.T) {
	mcp := server.NewMCPServer("test", "1")
	tests := []struct {
		name       string
		perSession bool
		principal  identity.Principal
		session    *idSession
		want       identity.Principal
		wantMCP    string
	}{
		{"principal, 2026-07-28", true, "token:alice", &idSession{id: ""}, "token:alice", ""},
		{"principal, MCP session", true, "token:alice", &idSession{id: "mcp-session-1"}, "token:alice", "mcp-session-1"},
		{"principal, stateless", false, "token:alice", nil, "token:alice", ""},
		{"MCP session", true, "", &idSession{id: "mcp-session-1"}, "mcp-session-1", "mcp-session-1"},
		{"2026-07-28", true, "", &idSession{id: ""}, "", ""},
		{"stateless", false, "", &idSession{id: "x"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.principal != "" {
				ctx = identity.WithPrincipal(ctx, tt.principal)
			}
			if tt.session != nil {
				ctx = mcp.WithContext(ctx, *tt.session)
			}
			o := principals{perSession: tt.perSession}
			if got, gotMCP := o.of(ctx), o.mcpSession(ctx); got != tt.want || gotMCP != tt.wantMCP {
				t.Errorf("owner %q, MCP session %q; want %q, %q", got, gotMCP, tt.want, tt.wantMCP)
			}
		})
	}
}
