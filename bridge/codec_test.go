package bridge

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenFrames pins the wire format: each file in testdata/bridge holds one
// frame as it crosses the bridge. Go encodes the frames it sends to those
// bytes exactly; the frames a worker sends are written as runner.ts and
// runner.py write them (field order, Python's spacing), and decode to the
// frame given.
var goldenFrames = []struct {
	file     string
	frame    Frame
	toWorker bool // Go sends it: Encode must give the file's bytes
}{
	// Go → worker.
	{"restore", RestoreFrame{}, true},
	{"recycle", RecycleFrame{Nonce: "Q2M4XW3NR6TYJ5VB"}, true},
	{"ping", PingFrame{}, true},
	{"interrupt", InterruptFrame{}, true},
	{"run", RunFrame{
		Code:       "import numpy\nprint(x)",
		Globals:    json.RawMessage(`{"x":[1,2]}`),
		Watch:      []string{"/home/pyodide/data"},
		FilesLimit: 1 << 20,
		Tools:      json.RawMessage(`[{"server":"files","name":"read","description":"Reads a file.","input_schema":{"type":"object"}}]`),
	}, true},
	{"run_plain", RunFrame{Code: "1 + 1"}, true},
	{"run_ask", RunFrame{Code: `llm_query("hi")`, Ask: &AskSpec{Model: true, Person: true, Batch: 64, PromptBytes: 1 << 20, FrameBytes: 129 << 20}}, true},
	{"imports", ImportsFrame{Code: "import requests", Names: []string{"numpy"}}, true},
	{"install", InstallFrame{Files: []File{
		{Name: "tinypkg-1.0-py3-none-any.whl", Size: 1024},
		{Name: "libopenblas.so", InstallDir: "dynlib", Size: 3},
	}}, true},
	{"put", PutFrame{
		Files:    []File{{Name: "/home/pyodide/data/a.csv", Size: 5}},
		Dirs:     []string{"/home/pyodide/data", "/home/pyodide/ro"},
		ReadOnly: []string{"/home/pyodide/ro"},
	}, true},
	{"snapshot", SnapshotFrame{Names: []string{"numpy", "pandas"}}, true},
	{"tool_result", ToolResultFrame{ID: 7, Value: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)}, true},
	{"tool_result_error", ToolResultFrame{ID: 8, Error: "the tool call limit of 5 was reached"}, true},
	{"answer", AnswerFrame{ID: 3, Answers: []Answer{
		{Text: "42"},
		{Value: json.RawMessage(`{"choice":"a"}`)},
		{Declined: true, Error: "the person declined"},
	}}, true},
	{"answer_error", AnswerFrame{ID: 4, Error: "this call has asked more than 100 questions, the limit (--llm-requests)"}, true},
	{"compile", CompileFrame{
		Names: []string{"numpy/deep.py"},
		Files: []File{{Name: "numpy-2.0-cp314-cp314-pyodide_2025_0_wasm32.whl", Size: 4096}},
		Limit: 13337,
	}, true},

	// Worker → Go.
	{"hello", HelloFrame{Secret: "K7PZQ2M4XW3NR6TYJ5VB8HC2DFGL9QAEK7PZQ2M4XW3NR6TYJ5VB8HC2DFGL9QAE"}, false},
	{"standby", StandbyFrame{}, false},
	{"recycled", RecycledFrame{Nonce: "Q2M4XW3NR6TYJ5VB"}, false},
	{"ready", ReadyFrame{Python: "3.14.2", Snapshot: true}, false},
	{"ready_loaded", ReadyFrame{Python: "3.14.2"}, false},
	{"pong", PongFrame{}, false},
	{"imports_answer", ImportsFrame{Names: []string{"requests", "bs4.element"}}, false},
	{"installed", InstalledFrame{}, false},
	{"installed_error", InstalledFrame{Error: "BadZipFile: File is not a zip file"}, false},
	{"put_answer", PutFrame{}, false},
	{"put_answer_error", PutFrame{Error: "Error: ENOSPC"}, false},
	{"output", OutputFrame{Stream: Stdout, Lines: []string{"hello", "world"}}, false},
	{"output_dropped", OutputFrame{Stream: Stdout, Dropped: 120}, false},
	{"result_none", ResultFrame{Status: ResultSuccess}, false},
	{"result", ResultFrame{Status: ResultSuccess, ReturnValue: json.RawMessage("{\n  \"a\": [\n    1,\n    2.5\n  ]\n}")}, false},
	{"result_cut", ResultFrame{Status: ResultSuccess, ReturnString: true, ReturnValue: json.RawMessage(`"abc"`), ReturnCut: 1048577}, false},
	{"result_run_error", ResultFrame{
		Status:   ResultRunError,
		Error:    "Traceback (most recent call last):\n  File \"<exec>\", line 1, in <module>\nZeroDivisionError: division by zero\n",
		ErrorCut: 70000,
	}, false},
	{"files", FilesFrame{
		Changes: []Change{
			{Path: "/home/pyodide/data/new.csv", Size: 12},
			{Path: "/home/pyodide/data/big.bin", Size: 99999999, Omitted: true},
			{Path: "/home/pyodide/data/old.txt", Deleted: true},
		},
		Figures: []Figure{{MIMEType: "image/png", Size: 2048}},
	}, false},
	{"tool_call", ToolCallFrame{ToolCall{ID: 1, Server: "files", Tool: "read", Args: json.RawMessage(`{"path":"a.txt"}`)}}, false},
	{"ask", AskFrame{ID: 1, Questions: []Question{
		{Kind: AskModel, Prompt: "Summarize: \"a\"\n", System: "Be brief.", MaxTokens: 200, Temperature: new(0.5), ModelHint: "claude"},
		{Kind: AskPerson, Message: "Pick one", Schema: json.RawMessage(`{"type":"object","properties":{"choice":{"type":"string"}}}`)},
	}}, false},
	{"fatal", FatalFrame{Error: "runner: RangeError: Maximum call stack size exceeded"}, false},
	{"compiled", CompiledFrame{Tag: "cpython-314", Magic: "2b0e0d0a", Modules: 2, Skipped: 1}, false},
	{"compiled_error", CompiledFrame{Error: "RangeError: Maximum call stack size exceeded", Names: []string{"p/deep.py"}}, false},
	{"compiling", CompilingFrame{Module: "p/deep.py"}, false},
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "bridge", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(data, []byte("\n"))
}

func TestGoldenFrames(t *testing.T) {
	types := map[string]bool{}
	for _, tt := range goldenFrames {
		t.Run(tt.file, func(t *testing.T) {
			golden := readGolden(t, tt.file)
			got, err := Decode(golden)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.frame) {
				t.Errorf("Decode = %#v, want %#v", got, tt.frame)
			}
			encoded, err := Encode(tt.frame)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if tt.toWorker && !bytes.Equal(encoded, golden) {
				t.Errorf("Encode =\n%s\nwant\n%s", encoded, golden)
			}
			// Go's encoding is a fixed point. (It compacts JSON values: the
			// indented return value of a result is no more indented.)
			again, err := Decode(encoded)
			if err != nil {
				t.Fatalf("Decode(Encode) = %v", err)
			}
			if reencoded, err := Encode(again); err != nil || !bytes.Equal(reencoded, encoded) {
				t.Errorf("Encode(Decode(Encode)) = %s, %v; want %s", reencoded, err, encoded)
			}
		})
		types[tt.frame.Type()] = true
	}
	// Every type Decode knows has a golden file.
	for _, typ := range []string{TypeHello, TypeReady, TypeOutput, TypeResult, TypeFatal, TypeRun, TypeImports,
		TypeInstall, TypeInstalled, TypeInterrupt, TypePing, TypePong, TypePut, TypeFiles, TypeSnapshot,
		TypeStandby, TypeRestore, TypeRecycle, TypeRecycled, TypeToolCall, TypeToolResult, TypeAsk, TypeAnswer, TypeCompile, TypeCompiled, TypeCompiling} {
		if !types[typ] {
			t.Errorf("no golden frame of type %q", typ)
		}
		f, err := Decode([]byte(`{"type":"` + typ + `"}`))
		if err != nil || f.Type() != typ {
			t.Errorf("Decode of a bare %q frame = %v, %v", typ, f, err)
		}
	}
}

// A worker is hostile: what is not a frame is an error saying why, and what
// reaches a caller keeps its text (testdata/e2e/hostile/forge_malformed.txt).
func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"not json", "{not json", "bridge: malformed frame: invalid character 'n' looking for beginning of object key string"},
		{"empty", "", "bridge: malformed frame: unexpected end of JSON input"},
		{"array", `[1]`, "bridge: malformed frame: json: cannot unmarshal array"},
		{"string", `"ready"`, "bridge: malformed frame: json: cannot unmarshal string"},
		{"null", `null`, `bridge: unknown frame type ""`},
		{"no type", `{"python":"3.14.2"}`, `bridge: unknown frame type ""`},
		{"unknown type", `{"type":"shell","code":"rm -rf /"}`, `bridge: unknown frame type "shell"`},
		{"type not a string", `{"type":5}`, "bridge: malformed frame: json: cannot unmarshal number"},
		{"field of the wrong type", `{"type":"output","stream":"stdout","lines":[1]}`, "bridge: malformed frame: json: cannot unmarshal number into Go struct field OutputFrame.lines"},
		{"negative id as a string", `{"type":"tool_call","id":"1"}`, "bridge: malformed frame: json: cannot unmarshal string"},
		{"a question's tokens as a string", `{"type":"ask","id":1,"questions":[{"kind":"model","max_tokens":"5"}]}`, "bridge: malformed frame: json: cannot unmarshal string"},
		{"trailing garbage", `{"type":"pong"} x`, "bridge: malformed frame: invalid character 'x' after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode([]byte(tt.data))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Decode(%q) = %#v, %v; want an error starting %q", tt.data, f, err, tt.want)
			}
		})
	}
}

// A field of another type is ignored, as the worker's JSON.parse readers
// ignore what they do not read: a ready frame stays a ready frame.
func TestDecodeIgnoresOtherFields(t *testing.T) {
	f, err := Decode([]byte(`{"type":"ready","python":"3.14.2","lines":["x"],"secret":"s"}`))
	if err != nil || !reflect.DeepEqual(f, ReadyFrame{Python: "3.14.2"}) {
		t.Errorf("Decode = %#v, %v", f, err)
	}
}

// FuzzDecode feeds the decoder what a hostile worker could send: it must
// never panic, and a frame it accepts must encode to JSON that decodes and
// encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, tt := range goldenFrames {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "bridge", tt.file+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{"", "{", "null", `{"type":null}`, `{"type":"output","dropped":-1}`,
		`{"type":"files","changes":[{"path":"/a","size":-5}]}`, `{"type":"result","return_value":"\ud800"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := Decode(data)
		if err != nil {
			if frame != nil {
				t.Fatalf("Decode(%q) = %#v and an error", data, frame)
			}
			return
		}
		encoded, err := Encode(frame)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", frame, err)
		}
		again, err := Decode(encoded)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)) = %v (encoded %q)", frame, err, encoded)
		}
		if reencoded, err := Encode(again); err != nil || !bytes.Equal(reencoded, encoded) {
			t.Fatalf("a %s frame encoded as %q, then as %q (%v)", frame.Type(), encoded, reencoded, err)
		}
	})
}
