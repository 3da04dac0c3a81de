package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
)

// TestAppendLiteral covers the escapes that go back to characters, and
// the text that only looks like one of them.
func TestAppendLiteral(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string // written one after the other
		want   string
	}{
		{"html", []string{`{"t":"\u003cb\u003e \u0026"}`}, `{"t":"<b> &"}`},
		{"separators", []string{`"\u2028\u2029"`}, "\"\u2028\u2029\""},
		{"other escapes stay", []string{`"\u0007\n\"\u00e9\u003C\ud83d\ude00"`}, `"\u0007\n\"\u00e9\u003C\ud83d\ude00"`},
		{"an escaped backslash before u003c", []string{`"\\u003c"`}, `"\\u003c"`},
		{"three backslashes", []string{`"\\\u003c"`}, `"\\<"`},
		{"four backslashes", []string{`"\\\\u003c"`}, `"\\\\u003c"`},
		{"a backslash ends a piece", []string{`"a\`, `u003c"`}, `"a\u003c"`},
		{"an escaped backslash ends a piece", []string{`"a\\`, `u003c\u003e"`}, `"a\\u003c>"`},
		{"an escape ends a piece", []string{`"\u003c`, `\u003e"`}, `"<>"`},
		{"an escape split", []string{`"\u00`, `3c"`}, `"\u003c"`},
		{"an empty piece after a backslash", []string{`"\`, ``, `"\u0026"`}, `"\"&"`},
		{"short", []string{`\u003`}, `\u003`},
		{"no backslash", []string{`{"a":"<>&"}`}, `{"a":"<>&"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got strings.Builder
			w := &literalWriter{w: &got}
			for _, p := range tt.pieces {
				if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", p, n, err)
				}
			}
			if got.String() != tt.want {
				t.Errorf("got %s, want %s", got.String(), tt.want)
			}
		})
	}
}

// TestLiteralResponse: JSON and event streams are rewritten, without a
// Content-Length that no longer holds and never to be sniffed as HTML;
// anything else passes unchanged.
func TestLiteralResponse(t *testing.T) {
	const body = `{"a":"\u003c\u0026"}`
	tests := []struct {
		contentType string
		want        string
	}{
		{"application/json", `{"a":"<&"}`},
		{"application/json; charset=utf-8", `{"a":"<&"}`},
		{"text/event-stream", `{"a":"<&"}`},
		{"text/plain; charset=utf-8", body},
		{"", body},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			h := literalJSON(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, body)
				w.(http.Flusher).Flush()
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body %s, want %s", got, tt.want)
			}
			rewritten := tt.want != body
			if length := rec.Header().Get("Content-Length"); (length == "") != rewritten {
				t.Errorf("Content-Length %q with body %s", length, rec.Body)
			}
			if nosniff := rec.Header().Get("X-Content-Type-Options") == "nosniff"; nosniff != rewritten {
				t.Errorf("X-Content-Type-Options: nosniff %v with body %s", nosniff, rec.Body)
			}
			if !rec.Flushed {
				t.Error("Flush did not reach the ResponseWriter")
			}
		})
	}
}

// literalCode is the code of TestLiteralOnTheWire's calls: a FakeRunner
// returns it and prints it, and encoding/json escapes all of it but the
// letters.
const literalCode = "<b>&\u2028\u2029</b>"

// literalCall is a tools/call request for literalCode.
var literalCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` +
	literalCode + `"}}}`

// wantLiteral checks that raw, what a transport wrote, holds the result of
// literalCall as upstream encodes it, and none of encoding/json's escapes.
func wantLiteral(t *testing.T, raw string) {
	t.Helper()
	var text strings.Builder
	render.WriteJSString(&text, mcptest.ExpectedXML(literalCode, 1))
	if want := `"text":` + text.String(); !strings.Contains(raw, want) {
		t.Errorf("the result on the wire is not upstream's bytes %s:\n%s", want, raw)
	}
	for _, escape := range []string{`\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`} {
		if strings.Contains(raw, escape) {
			t.Errorf("%s on the wire:\n%s", escape, raw)
		}
	}
}

// literalFront serves kind, with a FakeRunner that prints a line, in the
// test's bubble.
func literalFront(t *testing.T, kind Kind) *memServer {
	t.Helper()
	fe, err := NewHTTPFrontEnd(kind, testOptions(&mcptest.FakeRunner{Lines: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return serveMem(t, fe)
}

// TestLiteralOnTheWire: every transport writes its messages as upstream
// does, with <, >, &, U+2028 and U+2029 as they are.
func TestLiteralOnTheWire(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		o := testOptions(&mcptest.FakeRunner{Lines: 1})
		out, in := mcptest.StdioPipes(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
			return ServeStdio(ctx, o, 2, in, out)
		})
		go func() {
			for _, line := range []string{initializeBody(1), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, literalCall} {
				if _, err := io.WriteString(in, line+"\n"); err != nil {
					return
				}
			}
		}()
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), `{"jsonrpc":"2.0","id":2,`) {
				wantLiteral(t, lines.Text())
				return
			}
		}
		t.Fatalf("no answer to the call: %v", lines.Err())
	})
	t.Run("sse", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := literalFront(t, SSE)
			_, stream, endpoint := openSSE(t, srv)
			for _, body := range []string{initializeBody(1), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, literalCall} {
				if resp, got := srv.post(t, endpoint, strings.NewReader(body), int64(len(body))); resp.StatusCode != http.StatusAccepted {
					t.Fatalf("POST %s: %d %s", body, resp.StatusCode, got)
				}
			}
			for {
				line, err := stream.ReadString('\n')
				if err != nil {
					t.Fatalf("no answer to the call: %v", err)
				}
				if strings.HasPrefix(line, `data: {"jsonrpc":"2.0","id":2,`) {
					wantLiteral(t, line)
					return
				}
			}
		})
	})
	for name, kind := range map[string]Kind{"streamable_http": StreamableHTTP, "streamable_http_stateless": StreamableHTTPStateless} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &mcpHTTPClient{srv: literalFront(t, kind)}
				c.http = c.srv.http
				if kind == StreamableHTTP {
					c.initialize(t)
				}
				status, body := c.call(t, literalCall)
				if status != http.StatusOK {
					t.Fatalf("tools/call: %d %s", status, body)
				}
				wantLiteral(t, body)
			})
		})
	}
}
