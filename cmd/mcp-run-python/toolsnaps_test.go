package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/sessions"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
)

// toolsnapsDir holds one file per tool, NAME.json: the tool as tools/list
// sends it, indented. It is the tool surface of DESIGN 1.2 as data: the
// description and the input schema live there and in the tool's file of
// internal/mcpserver only.
const toolsnapsDir = "../../testdata/toolsnaps"

// snapshotPython is the Python version of the snapshots: upstream's
// contract, and the Python of the pinned Pyodide.
const snapshotPython = "3.14"

// updating reports whether the test runs with -update. The flag belongs to
// the end-to-end tests (package main_test), which share this test binary.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// rawTools lists the tools of c, a mcptest.Legacy client, and returns each as the
// server sent it. (A mcptest.Modern request needs the _meta and headers that only
// the client's own methods add.)
func rawTools(t *testing.T, c *mcptest.Client) []json.RawMessage {
	t.Helper()
	res, err := c.GetTransport().SendRequest(mcptest.Context(t), clienttransport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId("toolsnaps"),
		Method:  string(mcp.MethodToolsList),
		Params:  map[string]any{},
	})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("tools/list: error %d %s", res.Error.Code, res.Error.Message)
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(res.Result, &list); err != nil {
		t.Fatalf("decode tools/list: %v", err)
	}
	return list.Tools
}

// toolSnapshots returns the listed tools as their snapshot files would hold
// them: the server's bytes indented, key order kept, by tool name.
func toolSnapshots(t *testing.T, tools []json.RawMessage) map[string]string {
	t.Helper()
	snaps := map[string]string{}
	for _, tool := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(tool, &named); err != nil || named.Name == "" {
			t.Fatalf("tool without a name (%v): %s", err, tool)
		}
		var b bytes.Buffer
		if err := json.Indent(&b, tool, "", "  "); err != nil {
			t.Fatalf("indent tool %s: %v", named.Name, err)
		}
		b.WriteByte('\n')
		if _, dup := snaps[named.Name]; dup {
			t.Fatalf("tool %s listed twice", named.Name)
		}
		snaps[named.Name] = b.String()
	}
	return snaps
}

// toolsnapsVariant is one configuration whose tools are snapshotted, each
// in a directory of its own.
type toolsnapsVariant struct {
	name string
	dir  string
	opts []transporttest.Option
}

// toolsnapsVariants are the default tools (upstream's JSR release), those
// with --sessions, those with --tool-schema pypi (its PyPI release), with
// --return-mode json, whose run_python_code has an outputSchema, those of
// either schema, and with --sampling and --elicitation, whose description
// names what code can ask.
func toolsnapsVariants(t *testing.T) []toolsnapsVariant {
	t.Helper()
	// The registry's interpreters never start: listing tools starts none.
	registry := sessions.New(sessions.Config{Idle: 30 * time.Minute, Max: 4},
		func(context.Context) (sessions.Interpreter, error) {
			t.Error("listing the tools started a session")
			return nil, errors.New("no sessions in the tool snapshots")
		}, zap.NewNop())
	return []toolsnapsVariant{
		{name: "jsr", dir: toolsnapsDir},
		{name: "sessions", dir: filepath.Join(toolsnapsDir, "sessions"),
			opts: []transporttest.Option{func(o *mcpserver.Options) { o.Sessions = registry }}},
		{name: "pypi", dir: filepath.Join(toolsnapsDir, "pypi"),
			opts: []transporttest.Option{func(o *mcpserver.Options) { o.Schema = mcpserver.SchemaPyPI }}},
		{name: "json", dir: filepath.Join(toolsnapsDir, "json"),
			opts: []transporttest.Option{func(o *mcpserver.Options) { o.ReturnMode = render.ReturnJSON }}},
		{name: "pypi_json", dir: filepath.Join(toolsnapsDir, "pypi_json"),
			opts: []transporttest.Option{func(o *mcpserver.Options) { o.Schema, o.ReturnMode = mcpserver.SchemaPyPI, render.ReturnJSON }}},
		{name: "ask", dir: filepath.Join(toolsnapsDir, "ask"),
			opts: []transporttest.Option{func(o *mcpserver.Options) {
				o.Ask = &mcpserver.AskOptions{Model: true, Person: true, ParkTimeout: time.Minute}
			}}},
	}
}

// TestToolsnaps compares the tools that tools/list sends, byte for byte but
// for indentation, with testdata/toolsnaps (and its directories sessions,
// pypi, json, pypi_json and ask for those variants), over every transport and
// protocol era; -update rewrites the files from stdio.
func TestToolsnaps(t *testing.T) {
	r := &mcptest.FakeRunner{Version: snapshotPython}
	for _, v := range toolsnapsVariants(t) {
		t.Run(v.name, func(t *testing.T) { testToolsnaps(t, r, v) })
	}
}

// testToolsnaps is TestToolsnaps for one variant.
func testToolsnaps(t *testing.T, r mcpserver.Runner, v toolsnapsVariant) {
	want := toolSnapshots(t, rawTools(t, transporttest.Stdio(t, r, 2, v.opts...)(t, mcptest.Legacy)))
	if updating() {
		writeToolsnaps(t, v.dir, want)
	}
	files, err := filepath.Glob(filepath.Join(v.dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if name := strings.TrimSuffix(filepath.Base(file), ".json"); want[name] == "" {
			t.Errorf("%s: no such tool is listed (run with -update to remove the file)", file)
		}
	}
	for name, got := range want {
		path := filepath.Join(v.dir, name+".json")
		snap, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("tool %s: %v (run with -update to write it)", name, err)
			continue
		}
		if got != string(snap) {
			t.Errorf("tool %s differs from %s (run with -update if the change is meant):\n--- got ---\n%s--- want ---\n%s", name, path, got, snap)
		}
	}

	for _, tc := range transporttest.Cases() {
		for _, e := range tc.Eras {
			t.Run(tc.Name+"/"+string(e), func(t *testing.T) {
				c := tc.Serve(t, r, v.opts...)(t, e)
				if e == mcptest.Modern {
					// Decoded and encoded again on both sides: the
					// same tools, if not the same bytes.
					res, err := c.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
					if err != nil {
						t.Fatalf("tools/list: %v", err)
					}
					got := map[string]string{}
					for _, tool := range res.Tools {
						got[tool.Name] = reencodeTool(t, tool)
					}
					for name, snap := range want {
						var tool mcp.Tool
						if err := json.Unmarshal([]byte(snap), &tool); err != nil {
							t.Fatalf("decode snapshot of %s: %v", name, err)
						}
						if w := reencodeTool(t, tool); got[name] != w {
							t.Errorf("tool %s:\n got %s\nwant %s", name, got[name], w)
						}
					}
					if !slices.Equal(sortedKeys(got), sortedKeys(want)) {
						t.Errorf("tools %v, want %v", sortedKeys(got), sortedKeys(want))
					}
					return
				}
				got := toolSnapshots(t, rawTools(t, c))
				for name, snap := range want {
					if got[name] != snap {
						t.Errorf("tool %s:\n got %s\nwant %s", name, got[name], snap)
					}
				}
				if !slices.Equal(sortedKeys(got), sortedKeys(want)) {
					t.Errorf("tools %v, want %v", sortedKeys(got), sortedKeys(want))
				}
			})
		}
	}
}

// reencodeTool encodes tool as compact JSON.
func reencodeTool(t *testing.T, tool mcp.Tool) string {
	t.Helper()
	b, err := json.Marshal(tool)
	if err != nil {
		t.Fatalf("encode tool %s: %v", tool.Name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatalf("compact tool %s: %v", tool.Name, err)
	}
	return compact.String()
}

// writeToolsnaps replaces the snapshot files in dir with snaps.
func writeToolsnaps(t *testing.T, dir string, snaps map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range old {
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	for name, snap := range snaps {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(snap), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// TestToolsnapsFollowPythonVersion checks that the description names the
// runner's Python version, where the snapshot has snapshotPython.
func TestToolsnapsFollowPythonVersion(t *testing.T) {
	snap, err := os.ReadFile(filepath.Join(toolsnapsDir, mcptest.ToolName+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var want mcp.Tool
	if err := json.Unmarshal(snap, &want); err != nil {
		t.Fatalf("decode %s snapshot: %v", mcptest.ToolName, err)
	}
	pinned := "Python " + snapshotPython + "."
	if strings.Count(want.Description, pinned) != 1 {
		t.Fatalf("the snapshot's description does not name %q once:\n%s", pinned, want.Description)
	}
	wantDescription := strings.Replace(want.Description, pinned, "Python 3.11.", 1)

	c := transporttest.Stdio(t, &mcptest.FakeRunner{Version: "3.11"}, 2)(t, mcptest.Legacy)
	res, err := c.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Description != wantDescription {
		t.Errorf("tools with Python 3.11: %+v, want the description\n%s", res.Tools, wantDescription)
	}
}
