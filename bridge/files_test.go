package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// The files frame comes from a worker that shares its interpreter with the
// code it ran: what it announces is checked against what it sends.
func TestRunReadsFilesFrame(t *testing.T) {
	type frame struct {
		msg  *Message
		data string
	}
	files := func(changes []Change, figures []Figure) frame {
		return frame{msg: &Message{Type: TypeFiles, Changes: changes, Figures: figures}}
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
			frames:  []frame{files([]Change{{Path: "/w/a", Size: 1}}, nil), {msg: &Message{Type: TypeResult, Status: ResultSuccess}}},
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
				result := Message{Type: TypeResult, Status: ResultSuccess}
				for _, f := range append(tt.frames, frame{msg: &result}) {
					typ, data := websocket.MessageBinary, []byte(f.data)
					if f.msg != nil {
						typ = websocket.MessageText
						if data, err = json.Marshal(f.msg); err != nil {
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
			if err != nil || res.Type != TypeResult {
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
		var m Message
		if err != nil || json.Unmarshal(data, &m) != nil || m.Type != TypePut || len(m.Files) != 1 || len(m.Dirs) != 1 {
			got <- ""
			return
		}
		_, b, _ := ws.Read(context.Background())
		got <- m.Dirs[0] + " " + m.Files[0].Name + "=" + string(b)
		send(t, ws, Message{Type: TypePut, Error: "disk full"})
	}()
	err := c.Put(context.Background(), []string{"/data"}, []Wheel{{File: File{Name: "/data/a.csv"}, Data: []byte("1,2")}})
	if s := <-got; s != "/data /data/a.csv=1,2" {
		t.Errorf("worker saw %q", s)
	}
	if err == nil || err.Error() != "disk full" {
		t.Errorf("Put = %v, want the worker's error", err)
	}
}
