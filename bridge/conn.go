package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
func (c *Conn) Ready(ctx context.Context) (ReadyFrame, error) {
	return expect[ReadyFrame](ctx, c)
}

// Standby waits for a worker started lazily to be on standby: ready to
// make its interpreter when Restore asks.
func (c *Conn) Standby(ctx context.Context) error {
	_, err := expect[StandbyFrame](ctx, c)
	return err
}

// Restore asks a worker on standby to make its interpreter, and waits for
// its ready frame.
func (c *Conn) Restore(ctx context.Context) (ReadyFrame, error) {
	if err := c.write(ctx, RestoreFrame{}); err != nil {
		return ReadyFrame{}, err
	}
	return c.Ready(ctx)
}

// Recycle ends the worker's runner, whose call is over, and starts a new
// one (see RecycleFrame). Every frame the old runner sent is read and
// dropped, whatever it holds: a runner's frames can be forged by its code,
// and none of them matters once its call is over. The new runner's first
// frame comes next: Standby or Ready reads it. nonce must be secret and new.
func (c *Conn) Recycle(ctx context.Context, nonce string) error {
	if err := c.write(ctx, RecycleFrame{Nonce: nonce}); err != nil {
		return err
	}
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return failure(ctx, err)
		}
		if typ != websocket.MessageText {
			continue
		}
		if f, err := Decode(data); err == nil && f == (RecycledFrame{Nonce: nonce}) {
			return nil
		}
	}
}

// expect reads the next frame, which must be an F. (A function, since a
// method cannot have type parameters.)
func expect[F Frame](ctx context.Context, c *Conn) (F, error) {
	var want F
	f, err := c.read(ctx)
	if err != nil {
		return want, err
	}
	got, ok := f.(F)
	if !ok {
		return want, fmt.Errorf("bridge: expected %s, got %q", want.Type(), f.Type())
	}
	return got, nil
}

// RunRequest is what a run asks of the worker; see RunFrame.
type RunRequest struct {
	Code       string
	Globals    json.RawMessage // a JSON object, or nil
	Watch      []string
	FilesLimit int64
	Tools      json.RawMessage // a JSON array, or nil: see RunFrame.Tools
	// OnToolCall is called, from the goroutine that reads the run's
	// frames, for each tool call the code makes; it must not block, and
	// the answer goes back with Conn.ToolResult. Nil refuses tool calls:
	// one is then a protocol error that ends the run.
	OnToolCall func(ToolCall)
	// Ask is the run frame's: see RunFrame.Ask.
	Ask *AskSpec
	// OnAsk is called, as OnToolCall is, for each round of questions the
	// code asks; the answers go back with Conn.Answer. Nil makes an ask
	// frame a protocol error that ends the run.
	OnAsk func(AskFrame)
}

// MaxEntries bounds the changes, and the figures, that a files frame may
// bring, and the names of an imports frame: the runner looks at no more
// files than that in one watched directory (maxScan in js/files.ts). Code can
// forge frames, and every entry costs the server memory, a line of the
// result and a file in the store, so past it entries are refused.
const MaxEntries = 10_000

// Files is what a run's files frame brought: changed files and figures,
// with their bytes.
type Files struct {
	Changes []ChangedFile
	Figures []FigureData
	// RefusedChanges and RefusedFigures count the entries past MaxEntries:
	// their bytes were read and dropped.
	RefusedChanges, RefusedFigures int
}

// ChangedFile is a Change with its bytes; Data is nil for a deleted or
// omitted file.
type ChangedFile struct {
	Change
	Data []byte
}

// FigureData is a Figure with its bytes.
type FigureData struct {
	Figure
	Data []byte
}

// Run sends a run to the worker and reads until its result. onOutput is
// called for each output frame, in order, with its lines and the number of
// bytes the worker dropped past the output limit. The result frame is
// returned as is, with the files frame that came before it, if any; on
// error, what was printed before it has already gone to onOutput.
func (c *Conn) Run(ctx context.Context, req RunRequest, onOutput func(s Stream, lines []string, dropped int)) (ResultFrame, Files, error) {
	run := RunFrame{Code: req.Code, Globals: req.Globals, Watch: req.Watch, FilesLimit: req.FilesLimit, Tools: req.Tools, Ask: req.Ask}
	if err := c.write(ctx, run); err != nil {
		return ResultFrame{}, Files{}, err
	}
	var files Files
	seen := false
	for {
		f, err := c.read(ctx)
		if err != nil {
			return ResultFrame{}, files, err
		}
		switch m := f.(type) {
		case OutputFrame:
			if m.Stream != Stdout && m.Stream != Stderr {
				return ResultFrame{}, files, fmt.Errorf("bridge: output to unknown stream %q", m.Stream)
			}
			if m.Dropped < 0 {
				return ResultFrame{}, files, fmt.Errorf("bridge: negative dropped count %d", m.Dropped)
			}
			onOutput(m.Stream, m.Lines, m.Dropped)
		case FilesFrame:
			if seen || len(req.Watch) == 0 && len(m.Changes) > 0 {
				return ResultFrame{}, files, errors.New("bridge: unexpected files frame")
			}
			seen = true
			if files, err = c.readFiles(ctx, m, req.FilesLimit); err != nil {
				return ResultFrame{}, files, err
			}
		case ResultFrame:
			return m, files, nil
		case ToolCallFrame:
			if req.OnToolCall == nil {
				return ResultFrame{}, files, errors.New("bridge: a tool call, and no tools are configured")
			}
			req.OnToolCall(m.ToolCall)
		case AskFrame:
			if req.OnAsk == nil {
				return ResultFrame{}, files, errors.New("bridge: a round of questions, and no one to ask")
			}
			req.OnAsk(m)
		default:
			return ResultFrame{}, files, fmt.Errorf("bridge: unexpected %q frame during a run", f.Type())
		}
	}
}

// readFiles reads the bytes a files frame announced. The worker shares its
// interpreter with the code it ran, so the frame is checked, not trusted:
// every size must match its bytes, and the changed files together, and the
// figures together, must keep within limit (0: none). Of the changes, and
// of the figures, the first MaxEntries are kept; the bytes of the rest are
// read, so that the run's frames stay in step, and dropped.
func (c *Conn) readFiles(ctx context.Context, m FilesFrame, limit int64) (Files, error) {
	var files Files
	var changed, drawn int64
	next := func(size int64, total *int64) ([]byte, error) {
		*total += size
		if size < 0 || limit > 0 && *total > limit {
			return nil, fmt.Errorf("bridge: files past the limit of %d bytes", limit)
		}
		data, err := c.readBinary(ctx)
		if err != nil {
			return nil, err
		}
		if int64(len(data)) != size {
			return nil, fmt.Errorf("bridge: a file of %d bytes announced as %d", len(data), size)
		}
		return data, nil
	}
	for i, ch := range m.Changes {
		f := ChangedFile{Change: ch}
		if !ch.Deleted && !ch.Omitted {
			data, err := next(ch.Size, &changed)
			if err != nil {
				return Files{}, err
			}
			f.Data = data
		}
		if i >= MaxEntries {
			files.RefusedChanges++
			continue
		}
		files.Changes = append(files.Changes, f)
	}
	for i, fig := range m.Figures {
		data, err := next(fig.Size, &drawn)
		if err != nil {
			return Files{}, err
		}
		if i >= MaxEntries {
			files.RefusedFigures++
			continue
		}
		files.Figures = append(files.Figures, FigureData{Figure: fig, Data: data})
	}
	return files, nil
}

// Put makes dirs and writes files into the worker's file system: each
// Payload's Name is an absolute path there. The worker needs no file
// permission for that: the bytes travel over the bridge. The code may not
// change the trees of readOnly, which are among dirs, but for the other dirs
// within them.
func (c *Conn) Put(ctx context.Context, dirs, readOnly []string, files []Payload) error {
	if err := c.sendFiles(ctx, PutFrame{Files: announce(files), Dirs: dirs, ReadOnly: readOnly}, files); err != nil {
		return err
	}
	m, err := expect[PutFrame](ctx, c)
	if err == nil && m.Error != "" {
		err = errors.New(m.Error)
	}
	return err
}

// Ping checks that the worker's interpreter answers. The worker's main thread
// answers for a runner that rehearsed a call within the last second, and
// relays the frame to any other (js/worker.ts).
func (c *Conn) Ping(ctx context.Context) error {
	if err := c.write(ctx, PingFrame{}); err != nil {
		return err
	}
	_, err := expect[PongFrame](ctx, c)
	return err
}

// Imports returns the modules code imports that the worker's interpreter
// cannot import yet, as Pyodide's find_imports names them. Those under the
// top-level names in hide count as not importable even when they are: a
// worker that has a package set installed answers as a plain one would.
func (c *Conn) Imports(ctx context.Context, code string, hide []string) ([]string, error) {
	if err := c.write(ctx, ImportsFrame{Code: code, Names: hide}); err != nil {
		return nil, err
	}
	m, err := expect[ImportsFrame](ctx, c)
	if err == nil && len(m.Names) > MaxEntries {
		// Each name is looked up in the index: a forged list is refused whole.
		return nil, fmt.Errorf("bridge: an imports frame of %d names, more than %d", len(m.Names), MaxEntries)
	}
	return m.Names, err
}

// Payload is a file sent to a worker in binary frames after the frame that
// announces it: a wheel to install or to compile, or a file to put into the
// interpreter's file system (a mounted folder's). Its bytes are Data, or
// when Path is set the file there, which is read as it is sent, a chunk at
// a time (File.Size must be its size).
type Payload struct {
	File
	Data []byte
	Path string
}

// Install sends wheels to the worker, which unpacks them into its
// interpreter. The worker needs no file permission for that: the bytes
// travel over the bridge.
func (c *Conn) Install(ctx context.Context, wheels []Payload) error {
	err := c.sendFiles(ctx, InstallFrame{Files: announce(wheels)}, wheels)
	var m InstalledFrame
	if err == nil {
		m, err = expect[InstalledFrame](ctx, c)
	}
	if err == nil && m.Error != "" {
		err = errors.New(m.Error)
	}
	if err != nil {
		return fmt.Errorf("unpack wheels: %w", err)
	}
	return nil
}

// described is how a frame announces p: its File, with the size of the
// bytes it holds in memory.
func (p Payload) described() File {
	f := p.File
	if p.Path == "" {
		f.Size = int64(len(p.Data))
	}
	return f
}

// announce describes files for the frame that announces them.
func announce(files []Payload) []File {
	described := make([]File, len(files))
	for i, f := range files {
		described[i] = f.described()
	}
	return described
}

// sendFiles sends frame, which announces files, then their bytes.
func (c *Conn) sendFiles(ctx context.Context, frame Frame, files []Payload) error {
	if err := c.write(ctx, frame); err != nil {
		return err
	}
	buf := make([]byte, ChunkSize)
	for _, f := range files {
		if err := c.sendFile(ctx, f, buf); err != nil {
			return err
		}
	}
	return nil
}

// sendFile sends the bytes of f in chunks, through buf.
func (c *Conn) sendFile(ctx context.Context, f Payload, buf []byte) error {
	size := f.described().Size
	var r io.Reader = bytes.NewReader(f.Data)
	if f.Path != "" {
		file, err := os.Open(f.Path)
		if err != nil {
			return fmt.Errorf("bridge: send %s: %w", f.Name, err)
		}
		defer file.Close()
		r = file
	}
	for sent := int64(0); sent < size; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-sent)])
		if err != nil {
			// A file shorter than announced: the worker would wait for
			// the rest, so the connection cannot go on.
			c.Close()
			return fmt.Errorf("bridge: send %s: %w", f.Name, err)
		}
		if err := c.ws.Write(ctx, websocket.MessageBinary, buf[:n]); err != nil {
			return failure(ctx, err)
		}
		sent += int64(n)
	}
	return nil
}

// ToolResult answers the tool call id of the running code with value, the
// result as JSON, or with errText when the call failed. It is safe to call
// while Run is reading.
func (c *Conn) ToolResult(ctx context.Context, id int64, value json.RawMessage, errText string) error {
	m := ToolResultFrame{ID: id, Value: value, Error: errText}
	if errText != "" {
		m.Value = nil
	}
	return c.write(ctx, m)
}

// Answer answers the round of questions id of the running code with one
// answer per question, or with errText, which fails the round. It is safe
// to call while Run is reading.
func (c *Conn) Answer(ctx context.Context, id int64, answers []Answer, errText string) error {
	m := AnswerFrame{ID: id, Answers: answers, Error: errText}
	if errText != "" {
		m.Answers = nil
	}
	return c.write(ctx, m)
}

// Interrupt asks the worker to raise KeyboardInterrupt in the running code.
// It is safe to call while Run is reading.
func (c *Conn) Interrupt(ctx context.Context) error {
	return c.write(ctx, InterruptFrame{})
}

// Snapshot asks a worker started to make a memory snapshot for it, after
// importing modules (best effort: a module that fails to import is left
// out), and returns it.
func (c *Conn) Snapshot(ctx context.Context, modules []string) ([]byte, error) {
	if err := c.write(ctx, SnapshotFrame{Names: modules}); err != nil {
		return nil, err
	}
	return c.readBinary(ctx)
}

// CompileError is a compile that failed. Module, when set, is the module
// whose compile ended the worker's interpreter: a compile in a new worker
// that skips it may work.
type CompileError struct {
	Reason string
	Module string
}

// Error says why, and which module.
func (e *CompileError) Error() string {
	if e.Module == "" {
		return e.Reason
	}
	return e.Reason + " (compiling " + e.Module + ")"
}

// Compiled is what a compile worker made of a wheel: see CompileFrame.
type Compiled struct {
	Tag, Magic       string
	Modules, Skipped int
	// Archive is the zip of the .pyc files; nil when Modules is 0.
	Archive []byte
}

// Compile sends a wheel to a compile worker and returns its modules'
// bytecode, at most limit bytes of it: the worker refuses to make more,
// and a larger archive is refused here too. Raise the connection's read
// limit to that first. The modules skip (paths in the wheel) are not
// compiled. What the worker prints meanwhile goes to onOutput, and the
// module whose compile begins ("" as it ends) to onModule, each if not nil.
// The worker's failure is a *CompileError.
func (c *Conn) Compile(ctx context.Context, wheel Payload, limit int64, skip []string, onOutput func(lines []string), onModule func(module string)) (Compiled, error) {
	wheels := []Payload{wheel}
	if err := c.sendFiles(ctx, CompileFrame{Names: skip, Files: announce(wheels), Limit: limit}, wheels); err != nil {
		return Compiled{}, err
	}
	var f Frame
	for f == nil {
		var err error
		if f, err = c.read(ctx); err != nil {
			return Compiled{}, err
		}
		switch t := f.(type) {
		case OutputFrame:
			// Printed by the interpreter as it compiled (compile() runs
			// none of the module's code): no call's output, the caller's log.
			if onOutput != nil {
				onOutput(t.Lines)
			}
			f = nil
		case CompilingFrame:
			if onModule != nil {
				onModule(t.Module)
			}
			f = nil
		}
	}
	m, ok := f.(CompiledFrame)
	if !ok {
		return Compiled{}, fmt.Errorf("bridge: expected %s, got %q", TypeCompiled, f.Type())
	}
	if m.Error != "" {
		ce := &CompileError{Reason: m.Error}
		if len(m.Names) > 0 {
			ce.Module = m.Names[0]
		}
		return Compiled{}, ce
	}
	got := Compiled{Tag: m.Tag, Magic: m.Magic, Modules: m.Modules, Skipped: m.Skipped}
	if m.Modules > 0 {
		archive, err := c.readBinary(ctx)
		if err != nil {
			return Compiled{}, err
		}
		got.Archive = archive
		if int64(len(got.Archive)) > limit {
			return Compiled{}, fmt.Errorf("bridge: %d bytes of bytecode, past the limit of %d", len(got.Archive), limit)
		}
	}
	return got, nil
}

// readBinary returns the next frame, which must be binary; a fatal frame
// becomes an error.
func (c *Conn) readBinary(ctx context.Context) ([]byte, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, failure(ctx, err)
	}
	if typ != websocket.MessageBinary {
		if m, err := Decode(data); err == nil {
			if fatal, ok := m.(FatalFrame); ok {
				return nil, &FatalError{fatal.Error}
			}
		}
		return nil, errors.New("bridge: expected a binary frame")
	}
	return data, nil
}

// write sends f as a text frame.
func (c *Conn) write(ctx context.Context, f Frame) error {
	b, err := Encode(f)
	if err != nil {
		return err
	}
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return failure(ctx, err)
	}
	return nil
}

// read returns the next JSON frame; a fatal frame becomes an error.
func (c *Conn) read(ctx context.Context) (Frame, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, failure(ctx, err)
	}
	if typ != websocket.MessageText {
		return nil, errors.New("bridge: unexpected binary frame")
	}
	f, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if fatal, ok := f.(FatalFrame); ok {
		return nil, &FatalError{fatal.Error}
	}
	return f, nil
}

// failure explains why a read or write failed: the caller's context, or the
// connection itself.
func failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("bridge: %w", context.Cause(ctx))
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}
