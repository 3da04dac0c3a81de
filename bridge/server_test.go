package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func listen(t *testing.T) (*Server, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	s, err := Listen(zap.New(core), 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func dial(t *testing.T, s *Server) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func send(t *testing.T, ws *websocket.Conn, f Frame) {
	t.Helper()
	b, _ := Encode(f)
	if err := ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// handshake connects a fake worker that proved itself: its socket, and the
// Conn the server handed over.
func handshake(t *testing.T) (*websocket.Conn, *Conn) {
	t.Helper()
	s, _ := listen(t)
	secret := NewSecret()
	connected, withdraw := s.Expect(secret)
	t.Cleanup(withdraw)
	ws := dial(t, s)
	send(t, ws, HelloFrame{Secret: secret})
	c := <-connected
	t.Cleanup(c.Close)
	return ws, c
}

// refused waits for the server to close ws with a policy violation.
func refused(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := ws.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusPolicyViolation {
		t.Fatalf("read after a bad hello: %v (status %d), want a policy-violation close", err, status)
	}
}

func TestHelloHandsOverTheConnectionOnce(t *testing.T) {
	s, logs := listen(t)
	secret := NewSecret()
	connected, withdraw := s.Expect(secret)
	defer withdraw()

	ws := dial(t, s)
	send(t, ws, HelloFrame{Secret: secret})
	var c *Conn
	select {
	case c = <-connected:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not handed over")
	}
	defer c.Close()

	// The worker side says it is ready; the owner reads it.
	send(t, ws, ReadyFrame{Python: "3.14.2"})
	ready, err := c.Ready(context.Background())
	if err != nil || ready.Python != "3.14.2" {
		t.Fatalf("Ready = %+v, %v", ready, err)
	}

	// The same secret again is refused and logged.
	again := dial(t, s)
	send(t, again, HelloFrame{Secret: secret})
	refused(t, again)
	if logs.FilterMessage("bridge: refused a connection with an unknown or used secret").Len() != 1 {
		t.Errorf("reused secret not logged: %v", logs.All())
	}
}

func TestBadHellosAreRefused(t *testing.T) {
	tests := []struct {
		name  string
		frame func(ws *websocket.Conn) error
	}{
		{"wrong secret", func(ws *websocket.Conn) error {
			b, _ := Encode(HelloFrame{Secret: "guess"})
			return ws.Write(context.Background(), websocket.MessageText, b)
		}},
		{"not json", func(ws *websocket.Conn) error {
			return ws.Write(context.Background(), websocket.MessageText, []byte("\x00garbage{"))
		}},
		{"binary first", func(ws *websocket.Conn) error {
			return ws.Write(context.Background(), websocket.MessageBinary, []byte{1, 2, 3})
		}},
		{"result before hello", func(ws *websocket.Conn) error {
			b, _ := Encode(ResultFrame{Status: ResultSuccess})
			return ws.Write(context.Background(), websocket.MessageText, b)
		}},
		{"empty secret", func(ws *websocket.Conn) error {
			b, _ := Encode(HelloFrame{})
			return ws.Write(context.Background(), websocket.MessageText, b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := listen(t)
			connected, withdraw := s.Expect(NewSecret())
			defer withdraw()
			ws := dial(t, s)
			if err := tt.frame(ws); err != nil {
				t.Fatal(err)
			}
			refused(t, ws)
			select {
			case <-connected:
				t.Fatal("a bad hello was handed over")
			default:
			}
			if logs.Len() == 0 {
				t.Error("refusal not logged")
			}
		})
	}
}

func TestWithdrawnSecretIsRefused(t *testing.T) {
	s, _ := listen(t)
	secret := NewSecret()
	_, withdraw := s.Expect(secret)
	withdraw()
	ws := dial(t, s)
	send(t, ws, HelloFrame{Secret: secret})
	refused(t, ws)
}

func TestRunStreamsOutputThenResult(t *testing.T) {
	ws, c := handshake(t)

	// A fake worker: answers a run with two output frames and a result.
	go func() {
		_, data, err := ws.Read(context.Background())
		if err != nil {
			return
		}
		if run, ok := decodeFrame[RunFrame](data); !ok || run.Code != "print(1)" {
			return
		}
		send(t, ws, OutputFrame{Stream: Stdout, Lines: []string{"a", "b"}})
		send(t, ws, OutputFrame{Stream: Stderr, Lines: []string{"c"}})
		raw := []byte(`{"type":"result","status":"success","return_value":[
  1
]}`)
		_ = ws.Write(context.Background(), websocket.MessageText, raw)
	}()

	type line struct {
		stream Stream
		text   string
	}
	var got []line
	res, _, err := c.Run(context.Background(), RunRequest{Code: "print(1)"}, func(s Stream, lines []string, _ int) {
		for _, l := range lines {
			got = append(got, line{s, l})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []line{{Stdout, "a"}, {Stdout, "b"}, {Stderr, "c"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("lines = %v, want %v", got, want)
	}
	if res.Status != ResultSuccess || string(res.ReturnValue) != "[\n  1\n]" {
		t.Errorf("result = %+v (value %q): the value's bytes must be kept as sent", res, res.ReturnValue)
	}
}

// A round of questions goes to RunRequest.OnAsk during the run, and its
// answer back to the worker, while Run reads on.
func TestRunAsks(t *testing.T) {
	ws, c := handshake(t)
	spec := &AskSpec{Model: true, Batch: 2, PromptBytes: 10, FrameBytes: 100}
	answered := make(chan AnswerFrame, 1)
	go func() {
		defer close(answered)
		_, data, err := ws.Read(context.Background())
		if run, ok := decodeFrame[RunFrame](data); err != nil || !ok || !reflect.DeepEqual(run.Ask, spec) {
			return
		}
		send(t, ws, AskFrame{ID: 4, Questions: []Question{{Kind: AskModel, Prompt: "hi"}}})
		_, data, err = ws.Read(context.Background())
		if answer, ok := decodeFrame[AnswerFrame](data); err == nil && ok {
			answered <- answer
		}
		send(t, ws, ResultFrame{Status: ResultSuccess})
	}()
	onAsk := func(f AskFrame) {
		go func() {
			if err := c.Answer(context.Background(), f.ID, []Answer{{Text: "re: " + f.Questions[0].Prompt}}, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, _, err := c.Run(ctx, RunRequest{Code: "llm_query('hi')", Ask: spec, OnAsk: onAsk}, func(Stream, []string, int) {})
	if err != nil || res.Status != ResultSuccess {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got, want := <-answered, (AnswerFrame{ID: 4, Answers: []Answer{{Text: "re: hi"}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("answered %+v, want %+v", got, want)
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		name  string
		reply func(ws *websocket.Conn)
		check func(t *testing.T, err error)
	}{
		{"fatal frame", func(ws *websocket.Conn) {
			b, _ := Encode(FatalFrame{Error: "boom"})
			_ = ws.Write(context.Background(), websocket.MessageText, b)
		}, func(t *testing.T, err error) {
			var f *FatalError
			if !errors.As(err, &f) || f.Reason != "boom" {
				t.Errorf("err = %v, want FatalError boom", err)
			}
		}},
		{"connection dropped", func(ws *websocket.Conn) { ws.CloseNow() }, func(t *testing.T, err error) {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("err = %v, want ErrClosed", err)
			}
		}},
		{"garbage frame", func(ws *websocket.Conn) {
			_ = ws.Write(context.Background(), websocket.MessageText, []byte("{not json"))
		}, func(t *testing.T, err error) {
			if err == nil {
				t.Error("garbage accepted")
			}
		}},
		{"output to an unknown stream", func(ws *websocket.Conn) {
			b, _ := Encode(OutputFrame{Stream: "stdin", Lines: []string{"x"}})
			_ = ws.Write(context.Background(), websocket.MessageText, b)
		}, func(t *testing.T, err error) {
			if err == nil {
				t.Error("unknown stream accepted")
			}
		}},
		{"a round of questions, and no one to ask", func(ws *websocket.Conn) {
			send(t, ws, AskFrame{ID: 1, Questions: []Question{{Kind: AskModel, Prompt: "x"}}})
		}, func(t *testing.T, err error) {
			if err == nil || err.Error() != "bridge: a round of questions, and no one to ask" {
				t.Errorf("err = %v", err)
			}
		}},
		{"hello again", func(ws *websocket.Conn) {
			b, _ := Encode(HelloFrame{Secret: "x"})
			_ = ws.Write(context.Background(), websocket.MessageText, b)
		}, func(t *testing.T, err error) {
			if err == nil {
				t.Error("unexpected frame accepted")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, c := handshake(t)
			go func() {
				if _, _, err := ws.Read(context.Background()); err == nil {
					tt.reply(ws)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _, err := c.Run(ctx, RunRequest{Code: "x"}, func(Stream, []string, int) {})
			tt.check(t, err)
		})
	}
}

func TestSecretsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := NewSecret()
		if len(s) < 40 || seen[s] {
			t.Fatalf("weak or repeated secret %q", s)
		}
		seen[s] = true
	}
}

func TestInstallSendsAnnouncedWheelsInOrder(t *testing.T) {
	ws, c := handshake(t)
	ws.SetReadLimit(ChunkSize)
	// A file from disk over two chunks and a half, one in memory, an empty one.
	big := bytes.Repeat([]byte("0123456789abcdef"), ChunkSize*5/2/16)
	path := filepath.Join(t.TempDir(), "b.zip")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []string, 1)
	go func() {
		_, data, err := ws.Read(context.Background())
		m, ok := decodeFrame[InstallFrame](data)
		if err != nil || !ok {
			got <- nil
			return
		}
		var frames []string
		for _, f := range m.Files {
			frames = append(frames, fmt.Sprintf("%s:%s:%d", f.Name, f.InstallDir, f.Size))
			var whole []byte
			for int64(len(whole)) < f.Size {
				typ, b, err := ws.Read(context.Background())
				if err != nil || typ != websocket.MessageBinary || len(b) > ChunkSize {
					got <- nil
					return
				}
				whole = append(whole, b...)
			}
			if bytes.Equal(whole, big) {
				whole = []byte("big")
			}
			frames = append(frames, string(whole))
		}
		got <- frames
		send(t, ws, InstalledFrame{Error: "bad wheel"})
	}()
	err := c.Install(context.Background(), []Payload{
		{File: File{Name: "a.whl", InstallDir: "site"}, Data: []byte("A")},
		{File: File{Name: "b.zip", InstallDir: "dynlib", Size: int64(len(big))}, Path: path},
		{File: File{Name: "c.whl"}},
	})
	want := fmt.Sprintf("a.whl:site:1,A,b.zip:dynlib:%d,big,c.whl::0,", len(big))
	if frames := <-got; strings.Join(frames, ",") != want {
		t.Errorf("worker saw %q, want %q", frames, want)
	}
	if err == nil || !strings.Contains(err.Error(), "bad wheel") {
		t.Errorf("Install = %v, want the worker's error", err)
	}
}

// A starting worker that is killed leaves a connection that ends before its
// hello: logged for debugging, not as a refusal, which would warn of an
// attack at every shutdown.
func TestConnectionsEndingBeforeHello(t *testing.T) {
	tests := []struct {
		name string
		end  func(ws *websocket.Conn)
	}{
		{"dropped", func(ws *websocket.Conn) { ws.CloseNow() }},
		{"closed", func(ws *websocket.Conn) { ws.Close(websocket.StatusNormalClosure, "bye") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			s, err := Listen(zap.New(core), 1<<20, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tt.end(dial(t, s))
			deadline := time.Now().Add(5 * time.Second)
			for logs.FilterMessage("bridge: a connection ended before its hello").Len() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the ended connection was not logged: %v", logs.All())
				}
				time.Sleep(10 * time.Millisecond) // bounded polling for the handler
			}
			if warnings := logs.FilterLevelExact(zap.WarnLevel); warnings.Len() > 0 {
				t.Errorf("warned of a connection that only ended: %v", warnings.All())
			}
		})
	}
}

func TestUnixSocketBridge(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the bridge listens on TCP on Windows")
	}
	socket := filepath.Join(t.TempDir(), "bridge.sock")
	s, err := Listen(zap.NewNop(), 1<<20, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Socket() != socket || s.Addr() != SocketHost {
		t.Errorf("Socket %q Addr %q, want %q and %q", s.Socket(), s.Addr(), socket, SocketHost)
	}
	secret := NewSecret()
	connected, withdraw := s.Expect(secret)
	defer withdraw()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.URL(), &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send(t, ws, HelloFrame{Secret: secret})
	select {
	case c := <-connected:
		c.Close()
	case <-ctx.Done():
		t.Fatal("the worker's connection over the socket was not handed over")
	}
}

// Code that may reach a TCP bridge (on Windows) can open connections to it
// by the thousand; strangers must cost the server a few descriptors, and a
// worker must still get through.
func TestStrangersHoldFewDescriptors(t *testing.T) {
	s, _ := listen(t)
	var strangers []net.Conn
	defer func() {
		for _, c := range strangers {
			c.Close()
		}
	}()
	for range 10 * maxPending {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		strangers = append(strangers, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The server has seen them all once it holds the limit.
		s.ln.mu.Lock()
		n := len(s.ln.pending)
		s.ln.mu.Unlock()
		if n == maxPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending connections, want %d", n, maxPending)
		}
		time.Sleep(10 * time.Millisecond) // bounded polling of the listener
	}
	start := time.Now()
	secret := NewSecret()
	connected, withdraw := s.Expect(secret)
	defer withdraw()
	send(t, dial(t, s), HelloFrame{Secret: secret})
	select {
	case c := <-connected:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a worker could not get through the strangers")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a worker took %v to get through", d)
	}
	s.ln.mu.Lock()
	n := len(s.ln.pending)
	s.ln.mu.Unlock()
	if n > maxPending {
		t.Errorf("%d strangers held, want at most %d", n, maxPending)
	}
}

func TestHellosMustBeSmallAndPrompt(t *testing.T) {
	t.Run("a big first frame", func(t *testing.T) {
		s, _ := listen(t)
		ws := dial(t, s)
		_ = ws.Write(context.Background(), websocket.MessageText, make([]byte, 2*helloLimit))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("read after a big hello: %v, want a message-too-big close", err)
		}
	})
	t.Run("silence", func(t *testing.T) {
		s, _ := listen(t)
		ws := dial(t, s)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*helloTimeout)
		defer cancel()
		if _, _, err := ws.Read(ctx); err == nil || ctx.Err() != nil {
			t.Fatalf("a silent connection was kept past %v: %v", 3*helloTimeout, err)
		}
		if d := time.Since(start); d < helloTimeout/2 {
			t.Errorf("dropped after %v, before its time", d)
		}
	})
}

func TestStandbyThenRestore(t *testing.T) {
	ws, c := handshake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// A fake standby worker: standby, then ready once asked to restore.
	go func() {
		send(t, ws, StandbyFrame{})
		_, data, err := ws.Read(ctx)
		if _, ok := decodeFrame[RestoreFrame](data); err != nil || !ok {
			return
		}
		send(t, ws, ReadyFrame{Python: "3.14.2", Snapshot: true})
		send(t, ws, ReadyFrame{}) // out of turn for Standby below
	}()
	if err := c.Standby(ctx); err != nil {
		t.Fatal(err)
	}
	ready, err := c.Restore(ctx)
	if err != nil || ready.Python != "3.14.2" || !ready.Snapshot {
		t.Fatalf("Restore = %+v, %v; want the ready frame", ready, err)
	}
	if err := c.Standby(ctx); err == nil || !strings.Contains(err.Error(), `expected standby, got "ready"`) {
		t.Errorf("Standby on a ready frame: %v", err)
	}
}
