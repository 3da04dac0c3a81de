package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// The files frame comes from a worker that shares its interpreter with the
// code it ran: what it announces is checked against what it sends.
func TestRunReadsFilesFrame(t *testing.T) {
	type frame struct {
		msg  Frame
		data string
	}
	files := func(changes []Change, figures []Figure) frame {
		return frame{msg: FilesFrame{Changes: changes, Figures: figures}}
	}
	bin := func(s string) frame { return frame{data: s} }
	tests := []struct {
		name    string
		watch   []string
		limit   int64
		frames  []frame
		want    string // changed paths with data, then figures
		wantErr string
	}{
		{
			name:  "changes and figures",
			watch: []string{"/home/pyodide"},
			frames: []frame{
				files([]Change{{Path: "/a", Size: 2}, {Path: "/gone", Deleted: true}, {Path: "/big", Size: 9, Omitted: true}}, []Figure{{MIMEType: "image/png", Size: 3}}),
				bin("hi"), bin("png"),
			},
			want: "/a=hi /gone= /big= image/png=png",
		},
		{
			name:   "figures need no watch",
			frames: []frame{files(nil, []Figure{{MIMEType: "image/svg+xml", Size: 1}}), bin("s")},
			want:   "image/svg+xml=s",
		},
		{
			name:    "changes nobody watched",
			frames:  []frame{files([]Change{{Path: "/a", Size: 1}}, nil), bin("x")},
			wantErr: "unexpected files frame",
		},
		{
			name:    "size does not match",
			watch:   []string{"/w"},
			frames:  []frame{files([]Change{{Path: "/w/a", Size: 1}}, nil), bin("xyz")},
			wantErr: "announced as 1",
		},
		{
			name:    "past the limit",
			watch:   []string{"/w"},
			limit:   4,
			frames:  []frame{files([]Change{{Path: "/w/a", Size: 3}, {Path: "/w/b", Size: 3}}, nil), bin("abc"), bin("def")},
			wantErr: "past the limit",
		},
		{
			name:    "negative size",
			watch:   []string{"/w"},
			frames:  []frame{files([]Change{{Path: "/w/a", Size: -1}}, nil)},
			wantErr: "past the limit",
		},
		{
			name:    "text where bytes belong",
			watch:   []string{"/w"},
			frames:  []frame{files([]Change{{Path: "/w/a", Size: 1}}, nil), {msg: ResultFrame{Status: ResultSuccess}}},
			wantErr: "expected a binary frame",
		},
		{
			name:    "two files frames",
			watch:   []string{"/w"},
			frames:  []frame{files(nil, nil), files(nil, nil)},
			wantErr: "unexpected files frame",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, c := handshake(t)
			// The fake worker may outlive the subtest (Run gives up at a
			// bad frame), so it must not report through t.
			go func() {
				_, _, err := ws.Read(context.Background())
				if err != nil {
					return
				}
				result := ResultFrame{Status: ResultSuccess}
				for _, f := range append(tt.frames, frame{msg: result}) {
					typ, data := websocket.MessageBinary, []byte(f.data)
					if f.msg != nil {
						typ = websocket.MessageText
						if data, err = Encode(f.msg); err != nil {
							return
						}
					}
					if ws.Write(context.Background(), typ, data) != nil {
						return
					}
				}
			}()
			req := RunRequest{Code: "1", Watch: tt.watch, FilesLimit: tt.limit}
			res, got, err := c.Run(context.Background(), req, func(Stream, []string, int) {})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Run = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || res.Status != ResultSuccess {
				t.Fatalf("Run = %v, %v", res, err)
			}
			var seen []string
			for _, ch := range got.Changes {
				seen = append(seen, ch.Path+"="+string(ch.Data))
			}
			for _, fig := range got.Figures {
				seen = append(seen, fig.MIMEType+"="+string(fig.Data))
			}
			if s := strings.Join(seen, " "); s != tt.want {
				t.Errorf("files = %q, want %q", s, tt.want)
			}
		})
	}
}

func TestPutAnnouncesPathsThenBytes(t *testing.T) {
	ws, c := handshake(t)
	got := make(chan string, 1)
	go func() {
		_, data, err := ws.Read(context.Background())
		m, ok := decodeFrame[PutFrame](data)
		if err != nil || !ok || len(m.Files) != 1 || len(m.Dirs) != 1 {
			got <- ""
			return
		}
		_, b, _ := ws.Read(context.Background())
		got <- m.Dirs[0] + " " + m.Files[0].Name + "=" + string(b)
		send(t, ws, PutFrame{Error: "disk full"})
	}()
	err := c.Put(context.Background(), []string{"/data"}, nil, []Payload{{File: File{Name: "/data/a.csv"}, Data: []byte("1,2")}})
	if s := <-got; s != "/data /data/a.csv=1,2" {
		t.Errorf("worker saw %q", s)
	}
	if err == nil || err.Error() != "disk full" {
		t.Errorf("Put = %v, want the worker's error", err)
	}
}

// A forged files frame may list far more entries than the runner ever
// sends: past MaxEntries they are counted, and their bytes read, so that
// the result after them still comes.
func TestFilesFramePastMaxEntries(t *testing.T) {
	ws, c := handshake(t)
	go func() {
		if _, _, err := ws.Read(context.Background()); err != nil {
			return
		}
		var m FilesFrame
		for i := range MaxEntries {
			m.Changes = append(m.Changes, Change{Path: fmt.Sprintf("/w/%d", i), Deleted: true})
		}
		m.Changes = append(m.Changes, Change{Path: "/w/late", Size: 1}, Change{Path: "/w/gone", Deleted: true})
		for range MaxEntries + 1 {
			m.Figures = append(m.Figures, Figure{MIMEType: "image/png", Size: 1})
		}
		frames := [][]byte{mustJSON(m)}
		for range 1 + len(m.Figures) {
			frames = append(frames, []byte("x"))
		}
		for i, f := range append(frames, mustJSON(ResultFrame{Status: ResultSuccess})) {
			typ := websocket.MessageBinary
			if i == 0 || i == len(frames) {
				typ = websocket.MessageText
			}
			if ws.Write(context.Background(), typ, f) != nil {
				return
			}
		}
	}()
	res, got, err := c.Run(context.Background(), RunRequest{Code: "1", Watch: []string{"/w"}}, func(Stream, []string, int) {})
	if err != nil || res.Status != ResultSuccess {
		t.Fatalf("Run = %v, %v", res, err)
	}
	if len(got.Changes) != MaxEntries || got.RefusedChanges != 2 || len(got.Figures) != MaxEntries || got.RefusedFigures != 1 {
		t.Errorf("kept %d changes and %d figures, refused %d and %d; want %d each, refused 2 and 1",
			len(got.Changes), len(got.Figures), got.RefusedChanges, got.RefusedFigures, MaxEntries)
	}
}

// An imports frame names modules the supervisor looks up: a forged one
// with more names than MaxEntries is refused.
func TestImportsFramePastMaxEntries(t *testing.T) {
	ws, c := handshake(t)
	go func() {
		if _, _, err := ws.Read(context.Background()); err != nil {
			return
		}
		names := make([]string, MaxEntries+1)
		for i := range names {
			names[i] = fmt.Sprintf("m%d", i)
		}
		_ = ws.Write(context.Background(), websocket.MessageText, mustJSON(ImportsFrame{Names: names}))
	}()
	if _, err := c.Imports(context.Background(), "import m0", nil); err == nil || !strings.Contains(err.Error(), "more than 10000") {
		t.Errorf("Imports = %v, want the frame refused", err)
	}
}

func mustJSON(f Frame) []byte {
	b, err := Encode(f)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeFrame reads data as a fake worker does: it must be an F.
func decodeFrame[F Frame](data []byte) (F, bool) {
	f, err := Decode(data)
	got, ok := f.(F)
	return got, err == nil && ok
}
