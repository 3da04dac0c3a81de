package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// A compile worker announces its answer and sends the archive after it;
// what it prints before is the log's, not an answer, and so are the modules
// it tells as it compiles them; an archive past the
// limit is refused; an error names the module that ended the interpreter.
func TestCompile(t *testing.T) {
	type frame struct {
		msg  Frame
		data string
	}
	compiled := func(m CompiledFrame) frame { return frame{msg: m} }
	tests := []struct {
		name       string
		frames     []frame
		want       string // the archive
		wantModule string // of a *CompileError
		wantErr    string
		printed    string
		modules    string // told to onModule, each followed by a comma
	}{
		{
			name:   "archive",
			frames: []frame{compiled(CompiledFrame{Tag: "cpython-314", Magic: "2b0e0d0a", Modules: 2, Skipped: 1}), {data: "zip"}},
			want:   "zip",
		},
		{
			name:   "nothing to compile",
			frames: []frame{compiled(CompiledFrame{Tag: "cpython-314", Magic: "2b0e0d0a"})},
		},
		{
			name: "printed first",
			frames: []frame{
				{msg: OutputFrame{Stream: Stderr, Lines: []string{"Stack (most recent call first):"}}},
				compiled(CompiledFrame{Error: "RangeError: Maximum call stack size exceeded", Names: []string{"p/deep.py"}}),
			},
			printed:    "Stack (most recent call first):",
			wantErr:    "RangeError: Maximum call stack size exceeded (compiling p/deep.py)",
			wantModule: "p/deep.py",
		},
		{
			name: "modules told",
			frames: []frame{
				{msg: CompilingFrame{Module: "p/a.py"}},
				{msg: CompilingFrame{}},
				{msg: CompilingFrame{Module: "p/b.py"}},
				{msg: CompilingFrame{}},
				compiled(CompiledFrame{Tag: "cpython-314", Magic: "2b0e0d0a", Modules: 2}), {data: "zip"},
			},
			want:    "zip",
			modules: "p/a.py,,p/b.py,,",
		},
		{
			name:    "past the limit",
			frames:  []frame{compiled(CompiledFrame{Tag: "cpython-314", Modules: 1}), {data: strings.Repeat("x", 11)}},
			wantErr: "past the limit of 10",
		},
		{
			name:    "another answer",
			frames:  []frame{{msg: InstalledFrame{}}},
			wantErr: "expected compiled",
		},
		{
			name:    "text where the archive belongs",
			frames:  []frame{compiled(CompiledFrame{Modules: 1}), {msg: CompiledFrame{}}},
			wantErr: "expected a binary frame",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, c := handshake(t)
			saw := make(chan string, 1)
			go func() {
				_, data, err := ws.Read(context.Background())
				m, ok := decodeFrame[CompileFrame](data)
				if err != nil || !ok || len(m.Files) != 1 {
					saw <- ""
					return
				}
				_, wheel, _ := ws.Read(context.Background())
				saw <- m.Type() + " " + m.Files[0].Name + " " + strings.Join(m.Names, ",") + " " + string(wheel)
				for _, f := range tt.frames {
					typ, data := websocket.MessageBinary, []byte(f.data)
					if f.msg != nil {
						typ, data = websocket.MessageText, mustJSON(f.msg)
					}
					if ws.Write(context.Background(), typ, data) != nil {
						return
					}
				}
			}()
			var printed []string
			var modules strings.Builder
			got, err := c.Compile(context.Background(), Payload{File: File{Name: "p-1.0-py3-none-any.whl"}, Data: []byte("whl")}, 10,
				[]string{"p/skip.py"}, func(lines []string) { printed = append(printed, lines...) },
				func(module string) { modules.WriteString(module + ",") })
			if modules.String() != tt.modules {
				t.Errorf("modules told %q, want %q", modules.String(), tt.modules)
			}
			if s := <-saw; s != "compile p-1.0-py3-none-any.whl p/skip.py whl" {
				t.Errorf("the worker saw %q", s)
			}
			if strings.Join(printed, "\n") != tt.printed {
				t.Errorf("printed %q, want %q", printed, tt.printed)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Compile = %v, want an error with %q", err, tt.wantErr)
				}
				var ce *CompileError
				if tt.wantModule != "" && (!errors.As(err, &ce) || ce.Module != tt.wantModule) {
					t.Errorf("Compile = %#v, want a CompileError naming %q", err, tt.wantModule)
				}
				return
			}
			if err != nil || string(got.Archive) != tt.want || got.Tag != "cpython-314" {
				t.Fatalf("Compile = %+v, %v; want archive %q", got, err, tt.want)
			}
		})
	}
}
