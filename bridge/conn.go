package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/coder/websocket"
)

// ErrClosed reports that the worker's connection ended: the process exited,
// crashed or was killed.
var ErrClosed = errors.New("bridge: worker connection closed")

// FatalError is a worker's report that it cannot go on.
type FatalError struct{ Reason string }

func (e *FatalError) Error() string { return "bridge: worker failed: " + e.Reason }

// Conn is the connection to one worker that has proved its identity.
// Its methods are not safe for concurrent use, except Close.
type Conn struct {
	ws        *websocket.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newConn(ws *websocket.Conn) *Conn {
	return &Conn{ws: ws, done: make(chan struct{})}
}

// Close ends the connection at once, without the closing handshake: a busy
// or hostile worker could stall it, and the worker exits (or is killed)
// either way.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.ws.CloseNow()
		close(c.done)
	})
}

// SetReadLimit sets the largest frame read from now on: the supervisor
// lowers it once the worker has sent what only a trusted start sends (the
// memory snapshot) and serves calls, whose frames the limits bound.
func (c *Conn) SetReadLimit(n int64) { c.ws.SetReadLimit(n) }

// Ready waits for the worker to have loaded Pyodide and returns its ready frame.
func (c *Conn) Ready(ctx context.Context) (Message, error) {
	m, err := c.read(ctx)
	if err != nil {
		return Message{}, err
	}
	if m.Type != TypeReady {
		return Message{}, fmt.Errorf("bridge: expected ready, got %q", m.Type)
	}
	return m, nil
}

// Run sends code to the worker and reads until its result. onOutput is
// called for each output frame, in order, with its lines and the number of
// bytes the worker dropped past the output limit. The result frame is returned as is;
// on error, what was printed before it has already gone to onOutput.
func (c *Conn) Run(ctx context.Context, code string, onOutput func(s Stream, lines []string, dropped int)) (Message, error) {
	if err := c.write(ctx, Message{Type: TypeRun, Code: code}); err != nil {
		return Message{}, err
	}
	for {
		m, err := c.read(ctx)
		if err != nil {
			return Message{}, err
		}
		switch m.Type {
		case TypeOutput:
			if m.Stream != Stdout && m.Stream != Stderr {
				return Message{}, fmt.Errorf("bridge: output to unknown stream %q", m.Stream)
			}
			if m.Dropped < 0 {
				return Message{}, fmt.Errorf("bridge: negative dropped count %d", m.Dropped)
			}
			onOutput(m.Stream, m.Lines, m.Dropped)
		case TypeResult:
			return m, nil
		default:
			return Message{}, fmt.Errorf("bridge: unexpected %q frame during a run", m.Type)
		}
	}
}

// Ping checks that the worker's interpreter answers: the frame goes through
// the worker's main thread to the runner and back.
func (c *Conn) Ping(ctx context.Context) error {
	if err := c.write(ctx, Message{Type: TypePing}); err != nil {
		return err
	}
	m, err := c.read(ctx)
	if err != nil {
		return err
	}
	if m.Type != TypePong {
		return fmt.Errorf("bridge: expected pong, got %q", m.Type)
	}
	return nil
}

// Imports returns the modules code imports that the worker's interpreter
// cannot import yet, as Pyodide's find_imports names them.
func (c *Conn) Imports(ctx context.Context, code string) ([]string, error) {
	if err := c.write(ctx, Message{Type: TypeImports, Code: code}); err != nil {
		return nil, err
	}
	m, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	if m.Type != TypeImports {
		return nil, fmt.Errorf("bridge: expected imports, got %q", m.Type)
	}
	return m.Names, nil
}

// Wheel is a package file to install into a worker's interpreter.
type Wheel struct {
	File
	Data []byte
}

// Install sends wheels to the worker, which unpacks them into its
// interpreter. The worker needs no file permission for that: the bytes
// travel over the bridge.
func (c *Conn) Install(ctx context.Context, wheels []Wheel) error {
	files := make([]File, len(wheels))
	for i, w := range wheels {
		files[i] = w.File
	}
	if err := c.write(ctx, Message{Type: TypeInstall, Files: files}); err != nil {
		return err
	}
	for _, w := range wheels {
		if err := c.ws.Write(ctx, websocket.MessageBinary, w.Data); err != nil {
			return failure(ctx, err)
		}
	}
	m, err := c.read(ctx)
	if err != nil {
		return err
	}
	if m.Type != TypeInstalled {
		return fmt.Errorf("bridge: expected installed, got %q", m.Type)
	}
	if m.Error != "" {
		return fmt.Errorf("unpack wheels: %s", m.Error)
	}
	return nil
}

// Interrupt asks the worker to raise KeyboardInterrupt in the running code.
// It is safe to call while Run is reading.
func (c *Conn) Interrupt(ctx context.Context) error {
	return c.write(ctx, Message{Type: TypeInterrupt})
}

// Snapshot waits for the memory snapshot a worker started to make one sends.
func (c *Conn) Snapshot(ctx context.Context) ([]byte, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, failure(ctx, err)
	}
	if typ != websocket.MessageBinary {
		if m, err := decode(data); err == nil && m.Type == TypeFatal {
			return nil, &FatalError{m.Error}
		}
		return nil, errors.New("bridge: expected a snapshot")
	}
	return data, nil
}

func (c *Conn) write(ctx context.Context, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return failure(ctx, err)
	}
	return nil
}

// read returns the next JSON frame; a fatal frame becomes an error.
func (c *Conn) read(ctx context.Context) (Message, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return Message{}, failure(ctx, err)
	}
	if typ != websocket.MessageText {
		return Message{}, errors.New("bridge: unexpected binary frame")
	}
	m, err := decode(data)
	if err != nil {
		return Message{}, err
	}
	if m.Type == TypeFatal {
		return Message{}, &FatalError{m.Error}
	}
	return m, nil
}

func decode(data []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return Message{}, fmt.Errorf("bridge: malformed frame: %w", err)
	}
	return m, nil
}

// failure explains why a read or write failed: the caller's context, or the
// connection itself.
func failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("bridge: %w", context.Cause(ctx))
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}
