package main_test

// End-to-end tests of what outlives a call: Python sessions (--sessions),
// the files and figures calls return as resources, host folders mounted
// into the sandbox (--mount), and global_variables. The real binary, real
// deno and Pyodide, driven by mcp-go's client over stdio and streamable
// HTTP, with the hostile inputs of each part.
//
//	go test ./cmd/mcp-run-python/ -run State -count=1 -v

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The tools of --sessions besides run_python_code.
const (
	createSessionTool = "create_session"
	listFilesTool     = "list_session_files"
	closeSessionTool  = "close_session"
)

// defaultIdle is --session-idle's default, which create_session reports.
const defaultIdle = 30 * time.Minute

// callNamed calls the tool name with arguments and returns its result; a
// protocol error fails the test.
func (c *e2eClient) callNamed(t *testing.T, name string, arguments any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: arguments}})
	if err != nil {
		t.Fatalf("tools/call %s %v: %v", name, arguments, err)
	}
	return res
}

// firstText returns the text of a result's first content block, which must
// be text: the result proper, before any file or image.
func firstText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("result without content")
	}
	text, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("result's first content is %#v, want text", res.Content[0])
	}
	return text.Text
}

// runArgs runs run_python_code with arguments and returns the result and
// its first text.
func (c *e2eClient) runArgs(t *testing.T, arguments map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res := c.callNamed(t, toolName, arguments)
	return res, firstText(t, res)
}

// runIn runs code in session id and returns the result and its first text.
func (c *e2eClient) runIn(t *testing.T, id, code string) (*mcp.CallToolResult, string) {
	t.Helper()
	return c.runArgs(t, map[string]any{"python_code": code, "session_id": id})
}

// expectRunIn runs code in session id: the result must be want, alone.
func (c *e2eClient) expectRunIn(t *testing.T, id, code, want string) {
	t.Helper()
	res, text := c.runIn(t, id, code)
	if res.IsError || len(res.Content) != 1 || text != want {
		t.Errorf("in session %s, result of %q:\n got: %q (isError %v, %d content blocks)\nwant: %q",
			id, code, text, res.IsError, len(res.Content), want)
	}
}

// structured calls the tool name with arguments, whose result must not be
// an error, and decodes its structured content into a T, strictly; the
// result's one text must be the same JSON.
func structured[T any](t *testing.T, c *e2eClient, name string, arguments any) T {
	t.Helper()
	res := c.callNamed(t, name, arguments)
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("%s: tool error %q", name, text)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("%s: structured content %#v: %v", name, res.StructuredContent, err)
	}
	var fromContent, fromText any
	if json.Unmarshal(raw, &fromContent) != nil || json.Unmarshal([]byte(text), &fromText) != nil || !reflect.DeepEqual(fromContent, fromText) {
		t.Errorf("%s: the structured content %s is not the text %q", name, raw, text)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s answered %s: %v", name, raw, err)
	}
	return v
}

// createSession calls create_session and checks its answer: the same
// object {session_id, idle_timeout_s} as structured content and as text,
// with the idle timeout of the server and an id of at least 128 bits.
func (c *e2eClient) createSession(t *testing.T, idle time.Duration) string {
	t.Helper()
	got := structured[struct {
		SessionID *string `json:"session_id"`
		Idle      *int64  `json:"idle_timeout_s"`
	}](t, c, createSessionTool, map[string]any{})
	if got.SessionID == nil || *got.SessionID == "" || got.Idle == nil || *got.Idle != int64(idle/time.Second) {
		t.Fatalf("create_session answered %+v, want {session_id, idle_timeout_s: %d}", got, int64(idle/time.Second))
	}
	id := *got.SessionID
	if bits := idBits(id); bits < 128 {
		t.Errorf("session id %q carries %.0f bits, want at least 128", id, bits)
	}
	return id
}

// idBits is how many random bits id can carry at most: its length times
// the bits of a character of the smallest usual alphabet that holds all
// its characters (hex, base32, base64url).
func idBits(id string) float64 {
	for _, alphabet := range []string{
		"0123456789abcdef",
		"abcdefghijklmnopqrstuvwxyz234567",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
	} {
		if strings.Trim(id, alphabet) == "" {
			return float64(len(id)) * math.Log2(float64(len(alphabet)))
		}
	}
	return 0
}

// concurrently runs call n times at once and returns the results in
// order; a protocol error fails the test.
func concurrently(t *testing.T, n int, call func(ctx context.Context, i int) (*mcp.CallToolResult, error)) []*mcp.CallToolResult {
	t.Helper()
	results := make([]*mcp.CallToolResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			results[i], errs[i] = call(ctx, i)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return results
}

// sessionErrorKinds are the words that say why a session id cannot be used.
var sessionErrorKinds = []string{"unknown", "closed", "expired", "lost"}

// expectSessionError checks that res, of what, is a tool error about
// session id that says kind and no other kind.
func expectSessionError(t *testing.T, what string, res *mcp.CallToolResult, id, kind string) {
	t.Helper()
	text := firstText(t, res)
	lower := strings.ToLower(text)
	says := func(k string) bool { return strings.Contains(lower, k) }
	var others []string
	for _, k := range sessionErrorKinds {
		if k != kind && says(k) {
			others = append(others, k)
		}
	}
	// An id past 64 bytes is named by its start only: junk is not echoed.
	shown := id
	if len(id) > 64 {
		shown = id[:64] + "…"
	}
	named := strings.Contains(text, shown) || strings.Contains(text, fmt.Sprintf("%q", shown))
	if len(text) > 1000 {
		text = text[:1000] + "…"
	}
	if !res.IsError || !says(kind) || len(others) > 0 || !named {
		t.Errorf("%s: got %q (isError %v), want a tool error naming session %.80s that says %q (and not %q)",
			what, text, res.IsError, id, kind, others)
	}
}

// sessionCalls are the calls that name a session, for checks that each
// tells the same.
func sessionCalls(id string) []struct {
	tool string
	args map[string]any
} {
	return []struct {
		tool string
		args map[string]any
	}{
		{toolName, map[string]any{"python_code": "1", "session_id": id}},
		{listFilesTool, map[string]any{"session_id": id}},
		{closeSessionTool, map[string]any{"session_id": id}},
	}
}

// expectSessionGone checks that every call naming session id is a tool
// error that says kind.
func (c *e2eClient) expectSessionGone(t *testing.T, id, kind string) {
	t.Helper()
	for _, call := range sessionCalls(id) {
		expectSessionError(t, call.tool, c.callNamed(t, call.tool, call.args), id, kind)
	}
}

// sessionFile is an entry of list_session_files.
type sessionFile struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	MIMEType string `json:"mime_type"`
	URI      string `json:"uri"`
}

// listFiles calls list_session_files and returns its files.
func (c *e2eClient) listFiles(t *testing.T, id string) []sessionFile {
	t.Helper()
	got := structured[struct {
		Files []sessionFile `json:"files"`
	}](t, c, listFilesTool, map[string]any{"session_id": id})
	if got.Files == nil {
		t.Fatalf("list_session_files: no files array")
	}
	return got.Files
}

// rawResult sends method without parameters and decodes its result, as
// the server sent it, into a T.
func rawResult[T any](t *testing.T, c *e2eClient, method string) T {
	t.Helper()
	var v T
	raw := c.rawRequest(t, method, map[string]any{})
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v: %s", method, err, raw)
	}
	return v
}

// readResource reads uri and returns its one content's bytes and MIME type.
func (c *e2eClient) readResource(t *testing.T, uri string) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("resources/read %s: %d contents, want 1", uri, len(res.Contents))
	}
	switch rc := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		if rc.URI != uri {
			t.Errorf("resources/read %s: contents of %s", uri, rc.URI)
		}
		return []byte(rc.Text), rc.MIMEType
	case mcp.BlobResourceContents:
		if rc.URI != uri {
			t.Errorf("resources/read %s: contents of %s", uri, rc.URI)
		}
		data, err := base64.StdEncoding.DecodeString(rc.Blob)
		if err != nil {
			t.Fatalf("resources/read %s: blob: %v", uri, err)
		}
		return data, rc.MIMEType
	}
	t.Fatalf("resources/read %s: contents %#v", uri, res.Contents[0])
	return nil, ""
}

// readFails reads uri, which must fail, and returns the error's text.
func (c *e2eClient) readFails(t *testing.T, uri string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err == nil {
		t.Errorf("resources/read %q answered %+v, want an error", uri, res.Contents)
		return ""
	}
	return err.Error()
}

// wantFile is a file a call is expected to return.
type wantFile struct {
	path string
	mime string
	data []byte
	// image: the file comes as image content too.
	image bool
}

// expectFiles checks the content after a result's text, which must be,
// for each file in order, a resource_link (and an image when the file is
// one) whose URI is scheme://SCOPE/path, escaped; and that resources/read
// answers each URI with the file's bytes. It returns SCOPE and the links'
// URIs.
func (c *e2eClient) expectFiles(t *testing.T, res *mcp.CallToolResult, scheme string, files []wantFile) (string, []string) {
	t.Helper()
	content := res.Content[1:]
	scope := ""
	var uris []string
	for _, f := range files {
		if len(content) == 0 {
			t.Fatalf("no content for %s; result %#v", f.path, res.Content)
		}
		link, ok := content[0].(mcp.ResourceLink)
		if !ok {
			t.Fatalf("content for %s is %#v, want a resource_link", f.path, content[0])
		}
		content = content[1:]
		u, err := url.Parse(link.URI)
		if err != nil || u.Scheme != scheme || u.Host == "" || u.Path != "/"+f.path || u.RawQuery != "" || u.Fragment != "" {
			t.Errorf("link to %s has the URI %q (%v), want %s://SCOPE/%s, escaped", f.path, link.URI, err, scheme, f.path)
		} else if scope == "" {
			scope = u.Host
		} else if u.Host != scope {
			t.Errorf("links of one call in scopes %s and %s", scope, u.Host)
		}
		if link.Name != f.path || link.MIMEType != f.mime || link.Size == nil || *link.Size != int64(len(f.data)) {
			size := "nil"
			if link.Size != nil {
				size = fmt.Sprint(*link.Size)
			}
			t.Errorf("link to %s: name %q, mimeType %q, size %s; want %q, %q, %d",
				f.path, link.Name, link.MIMEType, size, f.path, f.mime, len(f.data))
		}
		uris = append(uris, link.URI)
		if data, mime := c.readResource(t, link.URI); !bytes.Equal(data, f.data) || mime != f.mime {
			t.Errorf("resources/read %s: %q (%s), want %q (%s)", link.URI, data, mime, f.data, f.mime)
		}
		if f.image {
			if len(content) == 0 {
				t.Fatalf("no image content for %s", f.path)
			}
			expectImage(t, f.path, content[0], f.mime, f.data)
			content = content[1:]
		}
	}
	if len(content) > 0 {
		t.Errorf("content after the files: %#v", content)
	}
	return scope, uris
}

// expectImage checks that content is the image data of type mime.
func expectImage(t *testing.T, what string, content mcp.Content, mime string, data []byte) {
	t.Helper()
	img, ok := content.(mcp.ImageContent)
	if !ok {
		t.Errorf("%s: content %#v, want image content", what, content)
		return
	}
	got, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil || img.MIMEType != mime || !bytes.Equal(got, data) {
		t.Errorf("%s: image %s of %d bytes (%v), want %s of %d bytes", what, img.MIMEType, len(got), err, mime, len(data))
	}
}

// pngImage encodes a w×h PNG of pseudo-random pixels, which do not
// compress: its size grows with its area.
func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pyBytes is a Python expression of the bytes b.
func pyBytes(b []byte) string {
	return "bytes.fromhex('" + hex.EncodeToString(b) + "')"
}

// putFiles is Python code that defines put(path, data), which writes a
// file, making its folder.
const putFiles = `import os

def put(path, data):
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb' if isinstance(data, bytes) else 'w') as f:
        f.write(data)

`

// garbageURIs are URIs no file has: traversals, other schemes, malformed
// and oversized ones.
var garbageURIs = []string{
	"",
	"call://../../etc/passwd",
	"call://%2e%2e/%2e%2e/etc/passwd",
	"call://00000000000000000000000000000000/../../etc/passwd",
	"call://00000000000000000000000000000000/%2e%2e/%2e%2e/etc/passwd",
	"session://x/%2e%2e/a",
	"session://x/..%2f..%2fa",
	"session://x/a%00b",
	"session:///etc/passwd",
	"session://",
	"call://",
	"file:///etc/passwd",
	"file:///proc/self/environ",
	"http://127.0.0.1/",
	"session://" + strings.Repeat("a", 300) + "/x",
	"call://" + strings.Repeat("a/", 5000),
	"session://x/a?b#c",
	"\x00\xff",
}

// expectGarbageRefused reads each of garbageURIs, which must fail with the
// error of an unknown resource (-32002), not an internal error, without
// naming where the server keeps files, and checks that c is still served.
func (c *e2eClient) expectGarbageRefused(t *testing.T, s *e2eSetup) {
	t.Helper()
	for _, uri := range garbageURIs {
		msg := c.readFails(t, uri)
		if strings.Contains(msg, s.cacheDir) {
			t.Errorf("resources/read %q: the error names the cache directory: %s", uri, msg)
		}
		if !strings.HasPrefix(msg, mcp.ErrResourceNotFound.Error()) {
			t.Errorf("resources/read %q: %s, want the error of an unknown resource (-32002)", uri, msg)
		}
	}
	c.expectWorks(t)
}

// TestStateSessions runs a Python session's life over stdio and streamable
// HTTP, with one worker: sessions have workers of their own.
func TestStateSessions(t *testing.T) {
	s := setup(t)
	for _, mode := range []string{modeStdio, modeStateful, modeSSE, modeStateless} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tg := startTarget(t, s, mode, "--sessions", "--workers", "1", "--max-files-per-principal", "4")
			c := tg.connect(t)
			t.Run("tools", func(t *testing.T) { testSessionTools(t, c) })
			t.Run("bad_arguments", func(t *testing.T) { testSessionBadArguments(t, s, c) })
			a, b := testSessionLife(t, c)
			switch mode {
			case modeStateful, modeSSE:
				if mode == modeStateful {
					t.Run("caps_per_mcp_session", func(t *testing.T) { testCapsPerMCPSession(t, tg, c) })
				}
				t.Run("other_mcp_session", func(t *testing.T) { testSessionOwnership(t, tg, c, a, b) })
			case modeStateless:
				t.Run("other_client", func(t *testing.T) { testSessionCapability(t, c, tg.connect(t)) })
				// Clients of the 2026 protocol have no MCP session either.
				t.Run("modern_clients", func(t *testing.T) {
					testSessionCapability(t, tg.connectProtocol(t, modernProtocol), tg.connectProtocol(t, modernProtocol))
				})
			}
		})
	}
}

// testSessionTools checks that tools/list has the four tools, and
// run_python_code the session_id argument the gateway routes by.
func testSessionTools(t *testing.T, c *e2eClient) {
	list := rawResult[struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}](t, c, "tools/list")
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == toolName {
			if p := tool.InputSchema.Properties["session_id"]; p["type"] != "string" || p["x-mcp-header"] != "Session-Id" {
				t.Errorf("run_python_code's session_id: %v", p)
			}
		}
	}
	slices.Sort(names)
	if want := []string{closeSessionTool, createSessionTool, listFilesTool, toolName}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

// testSessionLife takes sessions through their life: state that persists,
// files, two sessions beside fresh calls on the one worker, closing. It
// returns a closed session and a live one with the file notes.txt.
func testSessionLife(t *testing.T, c *e2eClient) (closed, live string) {
	a := c.createSession(t, defaultIdle)
	b := c.createSession(t, defaultIdle)
	if a == b {
		t.Fatalf("two sessions with the id %s", a)
	}
	t.Run("state_persists", func(t *testing.T) {
		c.expectRunIn(t, a, "x = 1", noValue)
		c.expectRunIn(t, a, "import json\nx += 1\nx", success("2"))
		c.expectRunIn(t, a, "json.dumps({'x': x})", success(`{"x": 2}`))
		c.expectRunIn(t, a, "def f(n):\n    return n * x\nf(21)", success("42"))
		// Not in the other session, nor in a fresh call.
		c.expectRunIn(t, b, "'x' in globals(), 'json' in globals()", success("[\n  false,\n  false\n]"))
		c.expectRun(t, "'x' in globals(), 'f' in globals()", success("[\n  false,\n  false\n]"))
	})
	t.Run("concurrent_calls", func(t *testing.T) {
		// A session runs its calls one at a time, in some order.
		results := concurrently(t, 3, func(ctx context.Context, _ int) (*mcp.CallToolResult, error) {
			return c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{
				"python_code": "import time\nn = globals().get('n', 0) + 1\ntime.sleep(0.2)\nn", "session_id": b,
			}}})
		})
		var got []string
		for _, res := range results {
			got = append(got, firstText(t, res))
		}
		slices.Sort(got)
		if want := []string{success("1"), success("2"), success("3")}; !slices.Equal(got, want) {
			t.Errorf("three concurrent calls in a session: %q, want %q in some order", got, want)
		}
		c.expectRunIn(t, b, "del n", noValue)
	})
	t.Run("fresh_calls_beside_sessions", func(t *testing.T) {
		// Two sessions are open, and the server has one worker, which is
		// replaced after each call.
		for range 2 {
			c.expectWorks(t)
		}
	})
	t.Run("files", func(t *testing.T) {
		res, text := c.runIn(t, a, putFiles+"put('notes.txt', 'hello')\nput('data/n.json', '[1]')")
		if res.IsError || text != noValue {
			t.Fatalf("writing files: %q (isError %v)", text, res.IsError)
		}
		scope, uris := c.expectFiles(t, res, "session", []wantFile{
			{path: "data/n.json", mime: "application/json", data: []byte("[1]")},
			{path: "notes.txt", mime: "text/plain", data: []byte("hello")},
		})
		if scope != a {
			t.Errorf("the session's files have URIs in scope %q, want the session id %q", scope, a)
		}
		// The files stay in the session; only a changed file comes back.
		c.expectRunIn(t, a, "open('notes.txt').read()", success("hello"))
		want := []sessionFile{
			{Path: "data/n.json", Size: 3, MIMEType: "application/json", URI: uris[0]},
			{Path: "notes.txt", Size: 5, MIMEType: "text/plain", URI: uris[1]},
		}
		if got := c.listFiles(t, a); !reflect.DeepEqual(got, want) {
			t.Errorf("list_session_files: %+v, want %+v", got, want)
		}
		if got := c.listFiles(t, b); len(got) != 0 {
			t.Errorf("list_session_files of the other session: %+v, want none", got)
		}
		// Changed, the file is read anew; deleted, it is gone. (put and
		// os are still defined.)
		res, _ = c.runIn(t, a, "put('notes.txt', 'hello again')\nos.remove('data/n.json')")
		c.expectFiles(t, res, "session", []wantFile{{path: "notes.txt", mime: "text/plain", data: []byte("hello again")}})
		want = []sessionFile{{Path: "notes.txt", Size: 11, MIMEType: "text/plain", URI: uris[1]}}
		if got := c.listFiles(t, a); !reflect.DeepEqual(got, want) {
			t.Errorf("list_session_files after a change and a deletion: %+v, want %+v", got, want)
		}
		c.readFails(t, uris[0])
		// Session b gets a file of the same name: its own.
		res, _ = c.runIn(t, b, putFiles+"put('notes.txt', 'b')")
		c.expectFiles(t, res, "session", []wantFile{{path: "notes.txt", mime: "text/plain", data: []byte("b")}})
		if data, _ := c.readResource(t, uris[1]); string(data) != "hello again" {
			t.Errorf("session %s's notes.txt reads %q after session %s wrote its own", a, data, b)
		}
	})
	t.Run("close", func(t *testing.T) {
		notes := c.listFiles(t, a)
		res := c.callNamed(t, closeSessionTool, map[string]any{"session_id": a})
		if text := resultText(t, res); res.IsError || !strings.Contains(text, a) {
			t.Errorf("close_session: %q (isError %v)", text, res.IsError)
		}
		c.expectSessionGone(t, a, "closed")
		for _, f := range notes {
			c.readFails(t, f.URI)
		}
		c.expectRunIn(t, b, "open('notes.txt').read()", success("b"))
	})
	t.Run("close_during_call", func(t *testing.T) {
		id := c.createSession(t, defaultIdle)
		c.expectRunIn(t, id, "x = 1", noValue)
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			res, _ := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName,
				Arguments: map[string]any{"python_code": "import time\ntime.sleep(60)", "session_id": id}}})
			done <- res
		}()
		time.Sleep(300 * time.Millisecond) // most likely into the call; either way is right
		start := time.Now()
		if res := c.callNamed(t, closeSessionTool, map[string]any{"session_id": id}); res.IsError {
			t.Errorf("close_session: %q", resultText(t, res))
		}
		res := <-done
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the call ended %v after its session was closed", took)
		}
		// Stopped, its state was lost; or never started, its session closed.
		switch {
		case res == nil:
			t.Errorf("the call failed")
		case res.IsError:
			expectSessionError(t, "the call", res, id, "closed")
		case !strings.HasSuffix(firstText(t, res), stateLost+"\n</error>"):
			t.Errorf("the call stopped by close_session: %q, want a run error that says the state was lost", firstText(t, res))
		}
		c.expectSessionGone(t, id, "closed")
	})
	t.Run("unknown", func(t *testing.T) {
		c.expectSessionGone(t, "nosuchsessionxxxxxxxxxxxxx", "unknown")
		// A known id in another case is another id.
		c.expectSessionGone(t, strings.ToUpper(b), "unknown")
	})
	return a, b
}

// testSessionBadArguments sends arguments of the wrong type and garbage
// resource URIs: tool errors (protocol errors for resources/read), and the
// server goes on serving.
func testSessionBadArguments(t *testing.T, s *e2eSetup, c *e2eClient) {
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{toolName, map[string]any{"python_code": "1", "session_id": 42}, `invalid argument "session_id": expected the id create_session gave, got number`},
		{toolName, map[string]any{"python_code": "1", "session_id": ""}, `invalid argument "session_id": expected the id create_session gave, got an empty string`},
		{toolName, map[string]any{"python_code": "1", "session_id": map[string]any{"id": "x"}}, `invalid argument "session_id": expected the id create_session gave, got object`},
		{toolName, map[string]any{"python_code": "1", "session_id": []any{"x"}}, `invalid argument "session_id": expected the id create_session gave, got array`},
		{listFilesTool, map[string]any{}, `invalid argument "session_id": expected the id create_session gave, got null`},
		{listFilesTool, map[string]any{"session_id": true}, `invalid argument "session_id": expected the id create_session gave, got boolean`},
		{closeSessionTool, map[string]any{"session_id": 1.5}, `invalid argument "session_id": expected the id create_session gave, got number`},
	} {
		res := c.callNamed(t, tc.tool, tc.args)
		if text := resultText(t, res); !res.IsError || text != tc.want {
			t.Errorf("%s %v: %q (isError %v), want the tool error %q", tc.tool, tc.args, text, res.IsError, tc.want)
		}
	}
	// A longer id makes run_python_code carry more than the 64 KiB a call
	// may besides its code, which is refused before the tool sees it
	// (mcpserver.TestCallBeyondCodeBound).
	for _, id := range []string{"../../etc", "a/b", strings.Repeat("x", 60_000), "\x00", "session://x"} {
		c.expectSessionGone(t, id, "unknown")
	}
	c.expectGarbageRefused(t, s)
}

// expectNotOwned checks that other can do no more with the Python
// sessions ids, and the files at uris, of another owner than with ones that
// never were: the same answers, and no resources listed.
func expectNotOwned(t *testing.T, other *e2eClient, ids, uris []string) {
	t.Helper()
	for _, id := range ids {
		unknown := strings.Repeat("z", len(id))
		for _, call := range sessionCalls(id) {
			got := firstText(t, other.callNamed(t, call.tool, call.args))
			wantArgs := maps.Clone(call.args)
			wantArgs["session_id"] = unknown
			want := strings.ReplaceAll(firstText(t, other.callNamed(t, call.tool, wantArgs)), unknown, id)
			if got != want {
				t.Errorf("%s of another owner's session:\n got: %q\nwant: %q, as for an unknown id", call.tool, got, want)
			}
		}
	}
	for _, uri := range uris {
		got := other.readFails(t, uri)
		// The same answer as for a file that never was, in the same scope.
		absent := uri[:strings.LastIndexByte(uri, '/')+1] + "absent.txt"
		if want := strings.ReplaceAll(other.readFails(t, absent), absent, uri); got != want {
			t.Errorf("resources/read of another owner's %s:\n got: %q\nwant: %q, as for a file that never was", uri, got, want)
		}
	}
	expectNoResources(t, other)
}

// testSessionOwnership checks what another MCP session of the same
// server can do with the sessions of c, the closed a and the live b: no
// more than with an unknown id. When c ends its MCP session, b ends.
func testSessionOwnership(t *testing.T, tg *target, c *e2eClient, a, b string) {
	other := tg.connect(t)
	files := c.listFiles(t, b)
	if len(files) != 1 {
		t.Fatalf("session %s's files: %+v", b, files)
	}
	res, _ := c.runArgs(t, map[string]any{"python_code": putFiles + "put('mine.txt', 'mine')"})
	_, uris := c.expectFiles(t, res, "call", []wantFile{{path: "mine.txt", mime: "text/plain", data: []byte("mine")}})
	expectNotOwned(t, other, []string{a, b}, []string{files[0].URI, uris[0]})
	c.expectRunIn(t, b, "open('notes.txt').read()", success("b"))

	// Ending the MCP session (DELETE /mcp, or the end of the SSE stream) ends its Python sessions.
	sessions := `mcp_run_python_sessions`
	if got := metric(t, tg, sessions); got != 1 {
		t.Errorf("%s is %v with one session open, want 1", sessions, got)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close the client: %v", err)
	}
	waitMetric(t, tg, sessions, startTimeout, func(v float64) bool { return v == 0 })
	waitMetric(t, tg, `mcp_run_python_workers{state="session"}`, startTimeout, func(v float64) bool { return v == 0 })
	other.expectSessionGone(t, b, "unknown")
	other.expectWorks(t)
}

// knowTools lists the tools, as a client of the 2026-07-28 protocol must
// before it names a session: it mirrors session_id into the header that
// the tool's x-mcp-header names, which the server checks.
func (c *e2eClient) knowTools(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
}

// testCapsPerMCPSession checks that without authentication each MCP
// session is a caller of its own, whose share is capped, and whose links
// another MCP session cannot read: it gets the error of an unknown
// resource. c holds at most one Python session, and one file.
func testCapsPerMCPSession(t *testing.T, tg *target, c *e2eClient) {
	other := tg.connect(t)
	// Half of --max-sessions 4.
	var mine []string
	for len(mine) < 3 {
		res := c.callNamed(t, createSessionTool, map[string]any{})
		text := resultText(t, res)
		if res.IsError {
			if !strings.Contains(text, "the maximum of 2 sessions one caller may hold (--max-sessions-per-principal)") {
				t.Errorf("create_session past the cap of an MCP session: %q", text)
			}
			break
		}
		var made struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal([]byte(text), &made); err != nil {
			t.Fatalf("create_session: %q: %v", text, err)
		}
		mine = append(mine, made.SessionID)
	}
	if len(mine) > 2 {
		t.Errorf("an MCP session made %d sessions more, past its cap of 2", len(mine))
	}
	theirs := other.createSession(t, defaultIdle)

	// Empty files count: 4 at most (--max-files-per-principal).
	res, _ := c.runArgs(t, map[string]any{"python_code": putFiles + "for i in range(5):\n    put(f'e{i}.txt', '')"})
	if note := res.Content[len(res.Content)-1].(mcp.TextContent).Text; !strings.Contains(note, "file store full: you keep the 4 files one caller may keep (--max-files-per-principal)") {
		t.Errorf("files past the cap of an MCP session: the last item is %q", note)
	}
	res, _ = other.runArgs(t, map[string]any{"python_code": putFiles + "put('o.txt', 'o')"})
	_, uris := other.expectFiles(t, res, "call", []wantFile{{path: "o.txt", mime: "text/plain", data: []byte("o")}})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uris[0]}}); !errors.Is(err, mcp.ErrResourceNotFound) {
		t.Errorf("resources/read of another MCP session's file: %v, want the error of an unknown resource (-32002)", err)
	}
	closeSession := func(c *e2eClient, id string) {
		if res := c.callNamed(t, closeSessionTool, map[string]any{"session_id": id}); res.IsError {
			t.Errorf("close_session: %q", resultText(t, res))
		}
	}
	for _, id := range mine {
		closeSession(c, id)
	}
	closeSession(other, theirs)
}

// testSessionCapability checks that where there is no MCP session to own
// a Python session, its id is the capability: c2 uses and closes the
// session c1 made.
func testSessionCapability(t *testing.T, c1, c2 *e2eClient) {
	for _, c := range []*e2eClient{c1, c2} {
		// A 2026 client mirrors session_id into the header its
		// x-mcp-header names, which the server checks: it must know the
		// tools first.
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		_, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
	}
	id := c1.createSession(t, defaultIdle)
	c1.expectRunIn(t, id, "v = 7", noValue)
	c2.expectRunIn(t, id, "v * 6", success("42"))
	res := c2.callNamed(t, closeSessionTool, map[string]any{"session_id": id})
	if text := resultText(t, res); res.IsError {
		t.Errorf("close_session of the id's holder: %q", text)
	}
	c1.expectSessionGone(t, id, "closed")
}

// stateLost ends the error of a call that ended its session.
const stateLost = "[the session's state was lost: its worker was stopped; create a new session]\n"

// stubbornCode swallows the KeyboardInterrupt of the time limit: its worker
// has to be killed.
const stubbornCode = `print('stubborn', flush=True)
while True:
    try:
        while True:
            pass
    except KeyboardInterrupt:
        pass`

// TestStateSessionLimits runs sessions into their limits on one server:
// --max-sessions, --session-idle, and the time limit of a call, which a
// session survives when its code obeys the interrupt and not when its
// worker has to be killed, nor when the code ends its interpreter. It is
// served over streamable HTTP, whose /metrics shows when a session ends.
func TestStateSessionLimits(t *testing.T) {
	s := setup(t)
	const idle = 2 * time.Second
	// The grace is long enough for interrupted code to end on a loaded
	// machine.
	tg := startTarget(t, s, modeStateful, "--sessions", "--max-sessions", "1", "--session-idle", idle.String(),
		"--timeout", "2s", "--grace", "3s", "--workers", "1", "--memory-limit", "400MiB")
	c := tg.connect(t)
	const sessions = "mcp_run_python_sessions"

	// No call on a session waits for anything slow, such as a fresh
	// call's worker, lest it expire on a loaded machine.
	a := c.createSession(t, idle)
	c.expectRunIn(t, a, "y = 5", noValue)
	t.Run("max_sessions", func(t *testing.T) {
		res := c.callNamed(t, createSessionTool, map[string]any{})
		text := resultText(t, res)
		if !res.IsError || !strings.Contains(text, "--max-sessions") || !strings.Contains(text, " 1 ") {
			t.Errorf("create_session past the cap: %q (isError %v), want a tool error naming the cap of 1 and --max-sessions", text, res.IsError)
		}
	})
	var fileURI string
	t.Run("timeout_keeps_the_session", func(t *testing.T) {
		res, _ := c.runIn(t, a, putFiles+"put('kept.txt', 'kept')")
		_, uris := c.expectFiles(t, res, "session", []wantFile{{path: "kept.txt", mime: "text/plain", data: []byte("kept")}})
		fileURI = uris[0]
		// The interrupted call runs past the idle timeout: a busy session
		// does not expire.
		res, text := c.runIn(t, a, "print('spinning', flush=True)\nwhile True: pass")
		want := "<status>run-error</status>\n<output>\nspinning\n</output>\n<error>\n" +
			"Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    while True: pass\n                ^^^^\n" +
			"TimeoutError: the code did not finish within 2s and was interrupted\n\n</error>"
		if res.IsError || text != want {
			t.Errorf("interrupted call:\n got: %q (isError %v)\nwant: %q", text, res.IsError, want)
		}
		c.expectRunIn(t, a, "y", success("5"))
	})
	t.Run("idle_expires", func(t *testing.T) {
		start := time.Now()
		waitMetric(t, tg, sessions, idle+startTimeout, func(v float64) bool { return v == 0 })
		if took := time.Since(start); took < idle/2 {
			t.Errorf("the session ended %v after its last call, want about %v", took, idle)
		}
		c.expectSessionGone(t, a, "expired")
		if fileURI != "" {
			c.readFails(t, fileURI)
		}
	})
	// A call whose worker had to be killed, or whose interpreter exited,
	// ends its session. The cap counts live sessions only: a is gone.
	for _, tc := range []struct{ name, code, want string }{
		{"killed_at_the_time_limit", stubbornCode, "<status>run-error</status>\n<output>\nstubborn\n</output>\n<error>\n" +
			"TimeoutError: the code did not finish within 2s and was killed with its worker\n"},
		{"interpreter_exits", "import os\nos._exit(3)", "<status>run-error</status>\n<error>\n" +
			"RuntimeError: the Python worker stopped while running the code (the interpreter exited with status 3)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := c.createSession(t, idle)
			c.expectRunIn(t, b, "z = 1", noValue)
			res, text := c.runIn(t, b, tc.code)
			if want := tc.want + stateLost + "\n</error>"; res.IsError || text != want {
				t.Errorf("result:\n got: %q (isError %v)\nwant: %q", text, res.IsError, want)
			}
			c.expectSessionGone(t, b, "lost")
		})
	}
	// Code a call leaves running (asyncio tasks, Web Workers) stays within
	// the limits between calls: past them its session ends at once, and
	// every call naming it says why.
	for _, tc := range []struct{ name, code, want string }{
		{"memory_between_calls", backgroundAllocator, "MiB of memory, more than the 400 MiB limit"},
		{"cpu_between_calls", backgroundBurner, "of CPU time while no call ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitMetric(t, tg, sessions, idle+startTimeout, func(v float64) bool { return v == 0 }) // a slot
			b := c.createSession(t, idle)
			c.expectRunIn(t, b, tc.code, noValue)
			// Calls now and then keep the session from expiring while its
			// code runs on; they end when one says that the session ended.
			// The first waits longer, so that the code's limit is crossed
			// between calls even on a loaded machine (a call that meets
			// it is stopped by the call's own watch instead), but within
			// the session's idle time.
			deadline := time.Now().Add(20 * time.Second)
			for pause := idle * 3 / 4; ; pause = 500 * time.Millisecond {
				time.Sleep(pause)
				res, text := c.runIn(t, b, "1")
				if res.IsError {
					if !strings.Contains(text, "killed between calls") || !strings.Contains(text, tc.want) {
						t.Fatalf("call after the session's code ran on: %q, want it to say that its worker was killed between calls, and %q", text, tc.want)
					}
					t.Logf("%s", text)
					break
				}
				if text != success("1") {
					t.Fatalf("call while the session's code runs on: %q", text)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session still lives 20 s after its code was left running")
				}
			}
			c.expectSessionGone(t, b, "lost")
			res := c.callNamed(t, listFilesTool, map[string]any{"session_id": b})
			if text := firstText(t, res); !strings.Contains(text, tc.want) {
				t.Errorf("list_session_files: %q, want it to say why the session ended", text)
			}
		})
	}
	t.Run("concurrent_creates", func(t *testing.T) {
		// The cap holds when creations race: one of three gets a session.
		results := concurrently(t, 3, func(ctx context.Context, _ int) (*mcp.CallToolResult, error) {
			return c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: createSessionTool, Arguments: map[string]any{}}})
		})
		var created []string
		for _, res := range results {
			text := resultText(t, res)
			switch {
			case !res.IsError:
				created = append(created, text)
			case !strings.Contains(text, "--max-sessions"):
				t.Errorf("create_session: %q", text)
			}
		}
		if len(created) != 1 {
			t.Fatalf("%d of three concurrent create_session calls succeeded, want 1: %q", len(created), created)
		}
		var made struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal([]byte(created[0]), &made); err != nil {
			t.Fatal(err)
		}
		c.expectRunIn(t, made.SessionID, "1 + 1", success("2"))
		if res := c.callNamed(t, closeSessionTool, map[string]any{"session_id": made.SessionID}); res.IsError {
			t.Errorf("close_session: %q", resultText(t, res))
		}
	})
	waitMetric(t, tg, `mcp_run_python_workers{state="session"}`, startTimeout, func(v float64) bool { return v == 0 })
	c.expectWorks(t)
}

// backgroundAllocator leaves a task that allocates 64 MiB every 20 ms, up
// to 1 GiB, after its call.
const backgroundAllocator = `import asyncio
held = []
async def grow():
    while len(held) < 16:
        held.append(b'x' * (64 << 20))
        await asyncio.sleep(0.02)
task = asyncio.ensure_future(grow())`

// backgroundBurner leaves a Web Worker that uses a core after its call.
const backgroundBurner = `import js
from pyodide.ffi import to_js
burner = js.Worker.new('data:text/javascript,for(;;){}', to_js({'type': 'module'}, dict_converter=js.Object.fromEntries))`

// stateServer is a server of a group of tests: its flags, and the cases
// that share it.
type stateServer struct {
	name  string
	args  []string
	cases []stateCase
}

// stateCase is a test run on a shared client.
type stateCase struct {
	name string
	test func(t *testing.T, s *e2eSetup, c *e2eClient)
}

// runStateServers starts the servers at once, so that their workers warm
// up together, and runs all cases in parallel, each on its server's client.
func runStateServers(t *testing.T, s *e2eSetup, servers []stateServer) {
	t.Helper()
	clients := make([]*e2eClient, len(servers))
	for i, srv := range servers {
		clients[i] = startTarget(t, s, modeStdio, srv.args...).connect(t)
	}
	for i, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range srv.cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.test(t, s, clients[i])
				})
			}
		})
	}
}

// TestStateFiles checks the files and figures calls return, and
// global_variables, over stdio: with files on (the default), off, and in
// JSON mode with upstream's PyPI tool schema.
func TestStateFiles(t *testing.T) {
	s := setup(t)
	runStateServers(t, s, []stateServer{
		{name: "files", args: []string{"--workers", "2", "--image-limit", "1KiB"}, cases: []stateCase{
			{"fresh_call_files", testFreshCallFiles},
			{"image_limit", testImageLimit},
			{"hostile_names", testHostileNames},
			{"figures", testFigures},
			{"global_variables", testGlobalVariables},
			{"bad_arguments", testGlobalsBadArguments},
			{"garbage_uris", func(t *testing.T, s *e2eSetup, c *e2eClient) { c.expectGarbageRefused(t, s) }},
			{"resource_templates", testResourceTemplates},
		}},
		{name: "no_files", args: []string{"--files=false", "--workers", "1"}, cases: []stateCase{
			{"one_text_item", testNoFiles},
		}},
		{name: "json_pypi", args: []string{"--return-mode", "json", "--tool-schema", "pypi", "--files-limit", "4KiB",
			"--files-ttl", filesTTL.String(), "--workers", "1"}, cases: []stateCase{
			{"tools_list", func(t *testing.T, _ *e2eSetup, c *e2eClient) { expectToolsnaps(t, c, "pypi_json") }},
			{"files_and_limit", testJSONFiles},
			{"global_variables", testJSONGlobals},
		}},
	})
}

// tinyPNG is a 1×1 PNG, and bigPNG one past the servers' --image-limit of 1 KiB.
func tinyPNG(t *testing.T) []byte { return pngImage(t, 1, 1) }
func bigPNG(t *testing.T) []byte  { return pngImage(t, 32, 32) }

// testFreshCallFiles writes files in and out of the working directory: those
// in it come back as links, the image inline too, and resources/read
// answers their call:// URIs.
func testFreshCallFiles(t *testing.T, _ *e2eSetup, c *e2eClient) {
	pic := tinyPNG(t)
	res, text := c.runArgs(t, map[string]any{"python_code": putFiles +
		"put('out.csv', 'a,b\\n1,2\\n')\n" +
		"put('pic.png', " + pyBytes(pic) + ")\n" +
		"put('sub/dir/data.json', '{\"k\": [1, 2]}')\n" +
		"put('odd name #1?.txt', 'odd')\n" +
		"put('/tmp/outside.txt', 'not returned')\n" +
		"put('empty.txt', '')\n" +
		"os.makedirs('empty_dir')\n" +
		"os.symlink('out.csv', 'link.csv')"})
	if res.IsError || text != noValue {
		t.Fatalf("writing files: %q (isError %v)", text, res.IsError)
	}
	scope, _ := c.expectFiles(t, res, "call", []wantFile{
		{path: "empty.txt", mime: "text/plain", data: []byte{}},
		{path: "odd name #1?.txt", mime: "text/plain", data: []byte("odd")},
		{path: "out.csv", mime: "text/csv", data: []byte("a,b\n1,2\n")},
		{path: "pic.png", mime: "image/png", data: pic, image: true},
		{path: "sub/dir/data.json", mime: "application/json", data: []byte(`{"k": [1, 2]}`)},
	})
	if bits := idBits(scope); bits < 128 {
		t.Errorf("call id %q carries %.0f bits, want at least 128", scope, bits)
	}
	// Each call has its files: the next one returns none of these.
	res, text = c.runArgs(t, map[string]any{"python_code": "import os\nsorted(os.listdir('.'))"})
	if res.IsError || len(res.Content) != 1 || text != success("[]") {
		t.Errorf("a later fresh call: %q (isError %v), %d content blocks", text, res.IsError, len(res.Content))
	}
}

// testResourceTemplates checks that the server offers resources: the two
// templates of the files' URIs, and no list of files, which would show them
// to clients that did not make them.
func testResourceTemplates(t *testing.T, _ *e2eSetup, c *e2eClient) {
	if c.init.Capabilities.Resources == nil {
		t.Errorf("no resources capability with files on")
	}
	templates := rawResult[struct {
		ResourceTemplates []struct {
			URITemplate string `json:"uriTemplate"`
		} `json:"resourceTemplates"`
	}](t, c, "resources/templates/list")
	var got []string
	for _, tmpl := range templates.ResourceTemplates {
		got = append(got, tmpl.URITemplate)
	}
	slices.Sort(got)
	if want := []string{"call://{call_id}/{+path}", "session://{session_id}/{+path}"}; !slices.Equal(got, want) {
		t.Errorf("resource templates %q, want %q", got, want)
	}
	expectNoResources(t, c)
}

// expectNoResources checks that resources/list lists nothing.
func expectNoResources(t *testing.T, c *e2eClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// The client's own request: one of the 2026-07-28 protocol needs its _meta.
	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	if len(list.Resources) != 0 {
		t.Errorf("resources/list: %+v, want no resources", list.Resources)
	}
}

// testImageLimit writes an image past --image-limit, which is only linked,
// with a note, and a .png file that is not one, which is not an image.
func testImageLimit(t *testing.T, _ *e2eSetup, c *e2eClient) {
	big := bigPNG(t)
	if len(big) <= 1024 {
		t.Fatalf("the big PNG has %d bytes, not more than the limit", len(big))
	}
	res, _ := c.runArgs(t, map[string]any{"python_code": putFiles +
		"put('big.png', " + pyBytes(big) + ")\nput('fake.png', 'not an image')"})
	// The note comes last.
	n := len(res.Content)
	note, ok := res.Content[n-1].(mcp.TextContent)
	want := fmt.Sprintf("[big.png is not shown: it is %.1f KiB, past the 1.0 KiB limit of images shown (--image-limit)]", float64(len(big))/1024)
	if !ok || note.Text != want {
		t.Errorf("last content %#v, want the note %q", res.Content[n-1], want)
	}
	res.Content = res.Content[:n-1]
	c.expectFiles(t, res, "call", []wantFile{
		{path: "big.png", mime: "image/png", data: big},
		{path: "fake.png", mime: "text/plain; charset=utf-8", data: []byte("not an image")},
	})
}

// pyPic is Python code of a class Pic whose value shows as "Pic()" and
// whose method method gives data (a Python expression).
func pyPic(method, data string) string {
	return "class Pic:\n    def __repr__(self):\n        return 'Pic()'\n    def " + method + "(self):\n        return " + data + "\n"
}

// testFigures checks that a last value with an image of its own comes back
// as image content after the text.
func testFigures(t *testing.T, _ *e2eSetup, c *e2eClient) {
	pic := tinyPNG(t)
	const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`
	for _, tc := range []struct {
		name, code string
		mime       string
		data       []byte // nil: no image
		note       string // the text after the result, if any
	}{
		{name: "png", code: pyPic("_repr_png_", pyBytes(pic)) + "Pic()", mime: "image/png", data: pic},
		{name: "svg", code: pyPic("_repr_svg_", "'"+svg+"'") + "Pic()", mime: "image/svg+xml", data: []byte(svg)},
		{name: "png_as_base64", code: pyPic("_repr_png_", "__import__('base64').b64encode("+pyBytes(pic)+").decode()") + "Pic()",
			mime: "image/png", data: pic},
		{name: "method_fails", code: pyPic("_repr_png_", "1 / 0") + "Pic()"},
		{name: "class_not_instance", code: pyPic("_repr_png_", pyBytes(pic)) + "Pic"},
		// An image whose bytes are not what its method claims is not sent.
		{name: "png_not_png", code: pyPic("_repr_png_", "b'not a png'") + "Pic()",
			note: "[figure 1 is not shown: its bytes are not image/png]"},
		{name: "jpeg_not_jpeg", code: pyPic("_repr_jpeg_", "b'<svg onload=alert(1)>'") + "Pic()",
			note: "[figure 1 is not shown: its bytes are not image/jpeg]"},
	} {
		res, text := c.runArgs(t, map[string]any{"python_code": tc.code})
		want := success(`"Pic()"`)
		if tc.name == "class_not_instance" {
			want = success(`"<class '__main__.Pic'>"`)
		}
		if res.IsError || text != want {
			t.Errorf("%s: %q (isError %v), want %q", tc.name, text, res.IsError, want)
		}
		switch {
		case tc.data == nil && tc.note == "" && len(res.Content) != 1:
			t.Errorf("%s: content %#v, want the text alone", tc.name, res.Content)
		case (tc.data != nil || tc.note != "") && len(res.Content) != 2:
			t.Errorf("%s: content %#v, want the text and one more item", tc.name, res.Content)
		case tc.mime == "image/svg+xml":
			// An SVG may carry scripts: it is linked, never image content.
			link, ok := res.Content[1].(mcp.ResourceLink)
			if !ok || link.MIMEType != tc.mime || !strings.HasSuffix(link.URI, "/.figures/figure-1.svg") {
				t.Errorf("%s: content %#v after the result, want a link to the SVG", tc.name, res.Content[1])
				break
			}
			if data, mimeType := c.readResource(t, link.URI); !bytes.Equal(data, tc.data) || mimeType != tc.mime {
				t.Errorf("%s: resources/read gave %q (%s), want %q", tc.name, data, mimeType, tc.data)
			}
		case tc.data != nil:
			expectImage(t, tc.name, res.Content[1], tc.mime, tc.data)
		case tc.note != "":
			if note, ok := res.Content[1].(mcp.TextContent); !ok || note.Text != tc.note {
				t.Errorf("%s: content %#v after the result, want the note %q", tc.name, res.Content[1], tc.note)
			}
		}
	}
}

// testGlobalVariables runs code with global_variables, which the default
// tool schema does not list but the server takes, as upstream's PyPI
// release did.
func testGlobalVariables(t *testing.T, _ *e2eSetup, c *e2eClient) {
	for _, tc := range []struct {
		globals map[string]any
		code    string
		want    string
	}{
		{map[string]any{"a": 1, "b": map[string]any{"k": 2}, "s": "xyz"}, "a + b['k'] + len(s)", success("6")},
		{map[string]any{"i": 1, "f": 1.5, "s": "x", "n": nil, "l": []any{1}, "d": map[string]any{}, "t": true},
			// null is Pyodide's jsnull, as upstream's pyodide.toPy made it.
			"' '.join(type(v).__name__ for v in (i, f, s, n, l, d, t))", success("int float str JsNull list dict bool")},
		{map[string]any{"__name__": "not main", "x": "</return_value>"}, "__name__, x",
			success("[\n  \"__main__\",\n  \"&lt;/return_value&gt;\"\n]")},
		{map[string]any{}, "'ok'", success("ok")},
		{nil, "'ok'", success("ok")},
	} {
		res, text := c.runArgs(t, map[string]any{"python_code": tc.code, "global_variables": tc.globals})
		if res.IsError || text != tc.want {
			t.Errorf("%q with global_variables %v: %q (isError %v), want %q", tc.code, tc.globals, text, res.IsError, tc.want)
		}
	}
	// They do not outlive their call.
	c.expectRun(t, "'a' in globals(), 'i' in globals()", success("[\n  false,\n  false\n]"))
}

// testGlobalsBadArguments sends global_variables that are not an object.
func testGlobalsBadArguments(t *testing.T, _ *e2eSetup, c *e2eClient) {
	for _, tc := range []struct {
		value any
		what  string
	}{
		{"a=1", "string"}, {[]any{1}, "array"}, {42, "number"}, {true, "boolean"},
	} {
		res, text := c.callTool(t, map[string]any{"python_code": "1", "global_variables": tc.value})
		want := `invalid argument "global_variables": expected an object of global names and their values, got ` + tc.what
		if !res.IsError || text != want {
			t.Errorf("global_variables %v: %q (isError %v), want the tool error %q", tc.value, text, res.IsError, want)
		}
	}
	// Without --sessions a session_id is an unknown argument, which is
	// ignored as upstream ignored them.
	res, text := c.callTool(t, map[string]any{"python_code": "1 + 1", "session_id": 42})
	if res.IsError || text != success("2") {
		t.Errorf("session_id without --sessions: %q (isError %v)", text, res.IsError)
	}
	c.expectWorks(t)
}

// testNoFiles checks --files=false: a call that writes files and ends with
// an image gets one text item, as upstream, and no resources are offered.
func testNoFiles(t *testing.T, _ *e2eSetup, c *e2eClient) {
	pic := tinyPNG(t)
	c.expectRun(t, putFiles+"put('out.csv', 'a,b')\nput('pic.png', "+pyBytes(pic)+")\n"+pyPic("_repr_png_", pyBytes(pic))+"Pic()",
		success(`"Pic()"`))
	if c.init.Capabilities.Resources != nil {
		t.Errorf("resources capability %+v with --files=false", c.init.Capabilities.Resources)
	}
	c.readFails(t, "call://00000000000000000000000000000000/out.csv")
}

// filesTTL is the --files-ttl of the server of testJSONFiles.
const filesTTL = 4 * time.Second

// testJSONFiles checks that JSON mode lists the files, and that a file past
// --files-limit is neither linked nor listed, and the output says so. The
// file kept is read before --files-ttl, and not after: the flag reaches the
// store, whose expiry, to the nanosecond, filestore's
// TestExpiryOnTheDefaultClock checks.
func testJSONFiles(t *testing.T, _ *e2eSetup, c *e2eClient) {
	res, text := c.runArgs(t, map[string]any{"python_code": putFiles + "put('small.txt', 'small')\nput('big.bin', b'x' * 8192)"})
	// The file was stored before the call returned: it expires by then
	// plus --files-ttl.
	returned := time.Now()
	_, uris := c.expectFiles(t, res, "call", []wantFile{{path: "small.txt", mime: "text/plain", data: []byte("small")}})
	want := `{"status":"success","output":["[file not returned: big.bin is 8.0 KiB, past the 4.0 KiB limit of files a call returns]"],` +
		`"return_value":null,"files":[{"path":"small.txt","size":5,"mime_type":"text/plain","uri":"` + uris[0] + `"}]}`
	if res.IsError || text != want {
		t.Errorf("result:\n got: %q (isError %v)\nwant: %q", text, res.IsError, want)
	}
	time.Sleep(time.Until(returned.Add(filesTTL))) // the file's life, not synchronisation
	c.readFails(t, uris[0])
}

// testJSONGlobals runs code with global_variables, which --tool-schema pypi
// lists.
func testJSONGlobals(t *testing.T, _ *e2eSetup, c *e2eClient) {
	res, text := c.callTool(t, map[string]any{"python_code": "f'{greeting}, {names[1]}!'",
		"global_variables": map[string]any{"greeting": "hello", "names": []any{"x", "world"}}})
	if want := `{"status":"success","output":[],"return_value":"hello, world!"}`; res.IsError || text != want {
		t.Errorf("result: %q (isError %v), want %q", text, res.IsError, want)
	}
}

// expectToolsnaps checks that c lists exactly the tools of the snapshot
// directory testdata/toolsnaps/variant (TestToolsnaps keeps the files),
// byte for byte but for indentation.
func expectToolsnaps(t *testing.T, c *e2eClient, variant string) {
	t.Helper()
	list := rawResult[struct {
		Tools []json.RawMessage `json:"tools"`
	}](t, c, "tools/list")
	files, err := filepath.Glob(filepath.Join("../../testdata/toolsnaps", variant, "*.json"))
	if err != nil || len(files) != len(list.Tools) {
		t.Fatalf("%d tools listed, %d snapshots in %s (%v)", len(list.Tools), len(files), variant, err)
	}
	for _, tool := range list.Tools {
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(tool, &named); err != nil {
			t.Fatal(err)
		}
		snap, err := os.ReadFile(filepath.Join("../../testdata/toolsnaps", variant, named.Name+".json"))
		if err != nil {
			t.Errorf("tool %s: %v", named.Name, err)
			continue
		}
		var got bytes.Buffer
		if err := json.Indent(&got, tool, "", "  "); err != nil {
			t.Fatal(err)
		}
		got.WriteByte('\n')
		if got.String() != string(snap) {
			t.Errorf("tool %s:\n--- got ---\n%s--- want ---\n%s", named.Name, got.String(), snap)
		}
	}
}

// testHostileNames writes files whose names a URI must escape: each comes
// back with its own name, and reads back through its link.
func testHostileNames(t *testing.T, _ *e2eSetup, c *e2eClient) {
	names := []string{"%2e%2e", "..hidden", "back\\slash.txt", "new\nline.txt", "q?x#y&z=1", "tab\tand space", "ünï/cödé.txt"}
	code, _ := json.Marshal(names)
	res, text := c.runArgs(t, map[string]any{"python_code": putFiles + "for name in " + string(code) + ":\n    put(name, name)"})
	if res.IsError || text != noValue {
		t.Fatalf("writing files: %q (isError %v)", text, res.IsError)
	}
	var want []wantFile
	for _, name := range names { // in order
		mime := "text/plain; charset=utf-8"
		if strings.HasSuffix(name, ".txt") {
			mime = "text/plain"
		}
		want = append(want, wantFile{path: name, mime: mime, data: []byte(name)})
	}
	c.expectFiles(t, res, "call", want)
	c.expectWorks(t)
}

// hostTree is a host folder's entries by slash path: a file's contents, or
// "symlink -> TARGET", or "dir".
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			tree[rel] = "symlink -> " + target
			return err
		case d.IsDir():
			tree[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			tree[rel] = string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return tree
}

// writeTree makes the files of tree (file contents only) under dir.
func writeTree(t *testing.T, dir string, tree map[string]string) {
	t.Helper()
	for rel, data := range tree {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStateMounts mounts host folders into the sandbox: read-only and
// read-write, with symlinks in and out of them, and past --mount-limit.
func TestStateMounts(t *testing.T) {
	s := setup(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	writeTree(t, outside, map[string]string{"secret.txt": "host secret"})
	ro, rw, small := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, ro, map[string]string{"hello.txt": "hello from the host", "sub/deep.txt": "deep"})
	for link, target := range map[string]string{"link_in": "hello.txt", "link_out": secret, "link_up": "../" + filepath.Base(outside) + "/secret.txt"} {
		if err := os.Symlink(target, filepath.Join(ro, link)); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, rw, map[string]string{"keep.txt": "keep", "change.txt": "before", "remove.txt": "remove me", "gone/only.txt": "only", "gone/stay.txt": "stay"})

	// Symlinks that lead out of the read-write folder too.
	for link, target := range map[string]string{"link_out": secret, "dir_out": outside} {
		if err := os.Symlink(target, filepath.Join(rw, link)); err != nil {
			t.Fatal(err)
		}
	}
	roTree := hostTree(t, ro)
	runStateServers(t, s, []stateServer{
		{name: "mounts", args: []string{"--workers", "1", "--mount", ro + ":/mnt/ro:ro", "--mount", rw + ":/mnt/rw:rw"}, cases: []stateCase{
			{"mounts", func(t *testing.T, _ *e2eSetup, c *e2eClient) {
				t.Run("read_only", func(t *testing.T) { testMountReadOnly(t, c, ro, roTree) })
				t.Run("read_write", func(t *testing.T) { testMountReadWrite(t, c, rw, outside) })
			}},
		}},
		{name: "mount_limit", args: []string{"--workers", "1", "--sessions", "--mount", small + ":/mnt/small:rw", "--mount-limit", "1KiB"}, cases: []stateCase{
			{"mount_limit", func(t *testing.T, _ *e2eSetup, c *e2eClient) {
				t.Run("calls", func(t *testing.T) { testMountLimit(t, c, small) })
				t.Run("session", func(t *testing.T) { testMountSession(t, c, small) })
			}},
		}},
	})
}

// testMountReadOnly reads the host folder ro at /mnt/ro: its files, a
// symlink inside it as the file it names, and no symlink that leads out.
// What the code would change there raises OSError(EROFS), as on a read-only
// file system, rather than succeed and vanish after the call.
func testMountReadOnly(t *testing.T, c *e2eClient, ro string, before map[string]string) {
	c.expectRun(t, `import errno, os
print(open('/mnt/ro/hello.txt').read())
print(open('/mnt/ro/sub/deep.txt').read())
print(open('/mnt/ro/link_in').read())
print(os.path.lexists('/mnt/ro/link_out'), os.path.lexists('/mnt/ro/link_up'))
open('/tmp/t.txt', 'w').close()
for what, change in [
    ('new', lambda: open('/mnt/ro/new.txt', 'w')),
    ('overwrite', lambda: open('/mnt/ro/hello.txt', 'w')),
    ('append', lambda: open('/mnt/ro/sub/deep.txt', 'a')),
    ('remove', lambda: os.remove('/mnt/ro/sub/deep.txt')),
    ('mkdir', lambda: os.mkdir('/mnt/ro/sub/d')),
    ('rename', lambda: os.rename('/mnt/ro/hello.txt', '/mnt/ro/h.txt')),
    ('move in', lambda: os.rename('/tmp/t.txt', '/mnt/ro/t.txt')),
]:
    try:
        change()
        print(what, 'allowed')
    except OSError as e:
        print(what, errno.errorcode[e.errno], e.strerror)
open('/mnt/rw/still_writable.txt', 'w').close()
os.remove('/mnt/rw/still_writable.txt')
sorted(os.listdir('/mnt/ro'))`, "<status>success</status>\n<output>\nhello from the host\ndeep\nhello from the host\nFalse False\n"+
		"new EROFS Read-only file system\noverwrite EROFS Read-only file system\nappend EROFS Read-only file system\n"+
		"remove EROFS Read-only file system\nmkdir EROFS Read-only file system\nrename EROFS Read-only file system\n"+
		"move in EROFS Read-only file system\n</output>\n"+
		"<return_value>\n[\n  \"hello.txt\",\n  \"link_in\",\n  \"sub\"\n]\n</return_value>")
	if after := hostTree(t, ro); !reflect.DeepEqual(after, before) {
		t.Errorf("the read-only folder changed:\n got: %q\nwant: %q", after, before)
	}
	// The next call sees the host's folder again.
	c.expectRun(t, "open('/mnt/ro/hello.txt').read(), __import__('os').path.exists('/mnt/ro/new.txt')",
		success("[\n  \"hello from the host\",\n  false\n]"))
}

// testMountReadWrite writes to the host folder rw at /mnt/rw: new, changed
// and deleted files go back to the host, symlinks and files outside the
// mount do not, and the next call sees the host's folder as it then is.
// Nothing is written through the host's symlinks to outside, the folder
// whose tree is outside.
func testMountReadWrite(t *testing.T, c *e2eClient, rw, outside string) {
	outsideTree := hostTree(t, outside)
	links := map[string]string{"link_out": "symlink -> " + filepath.Join(outside, "secret.txt"), "dir_out": "symlink -> " + outside}
	c.expectRun(t, putFiles+`put('/mnt/rw/new.txt', 'new')
put('/mnt/rw/change.txt', 'after')
os.remove('/mnt/rw/remove.txt')
os.remove('/mnt/rw/gone/only.txt')
put('/mnt/rw/sub/deeper/n.txt', 'nested')
os.symlink('/etc/passwd', '/mnt/rw/evil_link')
os.symlink('keep.txt', '/mnt/rw/inner_link')
put('/mnt/escape.txt', 'outside the mount')
put('/mnt/rw/../rw_escape.txt', 'outside the mount')`, noValue)
	want := map[string]string{
		"keep.txt": "keep", "change.txt": "after", "new.txt": "new", "gone": "dir", "gone/stay.txt": "stay",
		"sub": "dir", "sub/deeper": "dir", "sub/deeper/n.txt": "nested",
	}
	maps.Copy(want, links)
	if got := hostTree(t, rw); !reflect.DeepEqual(got, want) {
		t.Errorf("the read-write folder after the call:\n got: %q\nwant: %q", got, want)
	}
	parent := filepath.Dir(rw)
	for _, name := range []string{"escape.txt", "rw_escape.txt"} {
		if _, err := os.Lstat(filepath.Join(parent, name)); err == nil {
			t.Errorf("%s was written next to the mounted folder", name)
		}
	}
	writeTree(t, rw, map[string]string{"from_host.txt": "made on the host"})
	c.expectRun(t, "import os\nprint(open('/mnt/rw/from_host.txt').read())\nsorted(os.listdir('/mnt/rw'))",
		"<status>success</status>\n<output>\nmade on the host\n</output>\n<return_value>\n"+
			"[\n  \"change.txt\",\n  \"from_host.txt\",\n  \"gone\",\n  \"keep.txt\",\n  \"new.txt\",\n  \"sub\"\n]\n</return_value>")

	// The sandbox has no such symlinks; names like theirs are its own.
	c.run(t, putFiles+"put('/mnt/rw/link_out', 'pwned')\nput('/mnt/rw/dir_out/x.txt', 'pwned')")
	if got := hostTree(t, outside); !reflect.DeepEqual(got, outsideTree) {
		t.Errorf("the folder outside the mount changed:\n got: %q\nwant: %q", got, outsideTree)
	}
	if got := hostTree(t, rw)["dir_out"]; got != links["dir_out"] {
		t.Errorf("dir_out is %q, want %q", got, links["dir_out"])
	}
}

// testMountSession runs a session whose every call writes a file to the
// empty folder small and removes it once the call has ended: each removal
// goes back with the next call, and the folder holds only the last file,
// never more than --mount-limit.
func testMountSession(t *testing.T, c *e2eClient, small string) {
	id := c.createSession(t, defaultIdle)
	defer c.callNamed(t, closeSessionTool, map[string]any{"session_id": id})
	for n := 1; n <= 3; n++ {
		_, text := c.runIn(t, id, `import asyncio, os
n = globals().get('n', 0) + 1
p = f'/mnt/small/s{n}.bin'
with open(p, 'wb') as f:
    f.write(b'x' * 600)
asyncio.get_event_loop().call_soon(os.remove, p)  # once this call has ended
n`)
		if want := success(strconv.Itoa(n)); text != want {
			t.Errorf("call %d: %q, want %q", n, text, want)
		}
		want := map[string]string{fmt.Sprintf("s%d.bin", n): strings.Repeat("x", 600)}
		if got := hostTree(t, small); !reflect.DeepEqual(got, want) {
			t.Errorf("after call %d the folder holds %v, want only s%d.bin", n, slices.Sorted(maps.Keys(got)), n)
		}
	}
	if _, text := c.runIn(t, id, "import os\nos.listdir('/mnt/small')"); text != success("[]") {
		t.Errorf("the sandbox's folder: %q, want it empty", text)
	}
	if got := hostTree(t, small); len(got) != 0 {
		t.Errorf("the folder holds %v after the sandbox's was emptied", slices.Sorted(maps.Keys(got)))
	}
}

// testMountLimit passes --mount-limit both ways: a call writing more than it
// to the mount is told its changes were not written back, and a host folder
// past it makes calls fail with an error naming the flag.
func testMountLimit(t *testing.T, c *e2eClient, small string) {
	text := c.run(t, "with open('/mnt/small/big.bin', 'wb') as f:\n    f.write(b'x' * 4096)")
	if !strings.Contains(text, "not written back") || !strings.Contains(text, "--mount-limit") {
		t.Errorf("a write-back past the limit: %q, want the output to say it was not written back and name --mount-limit", text)
	}
	if got := hostTree(t, small); len(got) != 0 {
		t.Errorf("the folder holds %q after a write-back past the limit", got)
	}
	// A call's changes within the limit, but not the folder they would
	// leave, measured on the host: refused, or no later call could read
	// the folder in.
	held := map[string]string{"a.bin": strings.Repeat("a", 600)}
	writeTree(t, small, held)
	text = c.run(t, "with open('/mnt/small/b.bin', 'wb') as f:\n    f.write(b'b' * 600)")
	if !strings.Contains(text, "not written back") || !strings.Contains(text, "would hold 2 files of 1.2 KiB") || !strings.Contains(text, "--mount-limit") {
		t.Errorf("a write-back that would leave the folder past the limit: %q, want the output to say it was not written back and name --mount-limit", text)
	}
	if got := hostTree(t, small); !reflect.DeepEqual(got, held) {
		t.Errorf("the folder holds %q after a write-back that would leave it past the limit", got)
	}
	c.expectWorks(t)
	if err := os.Remove(filepath.Join(small, "a.bin")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, small, map[string]string{"big.bin": strings.Repeat("x", 4096)})
	res, text := c.callTool(t, map[string]any{"python_code": "1 + 1"})
	if !res.IsError || !strings.Contains(text, "--mount-limit") {
		t.Errorf("a call with a mounted folder past the limit: %q (isError %v), want a tool error naming --mount-limit", text, res.IsError)
	}
	if err := os.Remove(filepath.Join(small, "big.bin")); err != nil {
		t.Fatal(err)
	}
	c.expectWorks(t)
}
