package bridge

import "encoding/json"

// The wire protocol between the supervisor and a worker process.
//
// Every frame is one JSON object with a "type" field, except the binary
// frames: the memory snapshot, which a worker started to make one sends
// when asked, and the bytes of the files that follow an install, a put, a
// compile or a files frame. A worker's first frame is always a hello
// carrying its one-time secret; nothing else is read from a connection that
// has not proved who it is.
//
// Each type of frame is a Go type below, named for its "type" and ending in
// Frame; Decode reads a frame into the one its "type" names, Encode writes
// one. Only the JSON crosses the bridge: the runner (js/runner.ts and the
// modules it imports and installs) builds and reads the same objects.

// The "type" of each frame.
const (
	TypeHello      = "hello"
	TypeReady      = "ready"
	TypeOutput     = "output"
	TypeResult     = "result"
	TypeFatal      = "fatal"
	TypeRun        = "run"
	TypeImports    = "imports"
	TypeInstall    = "install"
	TypeInstalled  = "installed"
	TypeInterrupt  = "interrupt"
	TypePing       = "ping"
	TypePong       = "pong"
	TypePut        = "put"
	TypeFiles      = "files"
	TypeSnapshot   = "snapshot"
	TypeStandby    = "standby"
	TypeRestore    = "restore"
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	TypeCompile    = "compile"
	TypeCompiled   = "compiled"
	TypeCompiling  = "compiling"
	TypeRecycle    = "recycle"
	TypeRecycled   = "recycled"
	TypeAsk        = "ask"
	TypeAnswer     = "answer"
)

// Frame is one JSON frame: one of the types below.
type Frame interface {
	// Type is the frame's "type" field, one of the Type constants.
	Type() string
}

// HelloFrame (worker → Go) is a worker's first frame: it proves the
// worker's identity.
type HelloFrame struct {
	Secret string `json:"secret,omitempty"`
}

// ReadyFrame (worker → Go) says Pyodide is loaded: the worker takes one run.
type ReadyFrame struct {
	Python   string `json:"python,omitempty"`   // Python version, such as "3.14.2"
	Snapshot bool   `json:"snapshot,omitempty"` // Pyodide was restored from a snapshot
}

// StandbyFrame (worker → Go) is the first frame of a worker started lazily,
// instead of a ReadyFrame: Pyodide's module is compiled, the interpreter not
// made. A RestoreFrame (Go → worker) makes it; the worker then sends a
// ReadyFrame.
type StandbyFrame struct{}

// RestoreFrame (Go → worker) makes the interpreter of a worker on standby.
type RestoreFrame struct{}

// RecycleFrame (Go → worker) ends the worker's runner, whose call is over,
// and starts a new one for the next call: the process's main thread
// terminates the runner's Web Worker, starts another and answers with a
// RecycledFrame of the same nonce, which no runner sees. The new runner
// then sends what a new worker's sends: a StandbyFrame or a ReadyFrame.
type RecycleFrame struct {
	Nonce string `json:"nonce,omitempty"`
}

// RecycledFrame (worker → Go) marks the end of the old runner's frames:
// every frame before it is the old runner's, every frame after it the new
// one's. Its nonce is the RecycleFrame's, so the old runner cannot forge it.
type RecycledFrame struct {
	Nonce string `json:"nonce,omitempty"`
}

// OutputFrame (worker → Go) carries lines printed by the running code,
// without their newlines.
type OutputFrame struct {
	Stream  Stream   `json:"stream,omitempty"`
	Lines   []string `json:"lines,omitempty"`
	Dropped int      `json:"dropped,omitempty"` // bytes printed past the output limit, not sent
}

// ResultFrame (worker → Go) says the run finished, and how.
type ResultFrame struct {
	Status       string          `json:"status,omitempty"`        // ResultSuccess or ResultRunError
	ReturnValue  json.RawMessage `json:"return_value,omitempty"`  // indented JSON; absent for None; cut by the worker past the output limit
	ReturnString bool            `json:"return_string,omitempty"` // the value is a Python str
	Error        string          `json:"error,omitempty"`
	// ReturnCut and ErrorCut are the sizes in bytes of a return value or an
	// error text that the worker cut to the output limit; 0 when whole.
	ReturnCut int `json:"return_cut,omitempty"`
	ErrorCut  int `json:"error_cut,omitempty"`
}

// FatalFrame (worker → Go) says the worker cannot go on. Conn reads it as a
// *FatalError.
type FatalFrame struct {
	Error string `json:"error,omitempty"`
}

// RunFrame (Go → worker) runs code.
type RunFrame struct {
	Code string `json:"code,omitempty"`
	// Globals is a JSON object whose entries become globals before the code
	// runs; Watch are the directories whose changes come back in a files
	// frame, up to FilesLimit bytes of content (0: no limit).
	Globals    json.RawMessage `json:"globals,omitempty"`
	Watch      []string        `json:"watch,omitempty"`
	FilesLimit int64           `json:"files_limit,omitempty"`
	// Tools lists the tools the code may call, as a JSON array of
	// supervisor.ToolSpec: the worker makes Python's mcp_tools module of it.
	Tools json.RawMessage `json:"tools,omitempty"`
	// Ask, when set, makes the code's llm_query, llm_query_batched,
	// ask_user and input() ask through ask frames; nil leaves the
	// interpreter as it is, without them.
	Ask *AskSpec `json:"ask,omitempty"`
}

// AskSpec is what a run's code may ask (see AskFrame): the model (Model)
// or the person (Person), with the limits Python checks before a round
// leaves it, so that code hears of them early and clearly. The supervisor
// checks every round again: the worker shares its interpreter with the
// code.
type AskSpec struct {
	Model  bool `json:"model,omitempty"`
	Person bool `json:"person,omitempty"`
	// Batch bounds the questions of a round, PromptBytes the bytes of one
	// prompt, system text, message or schema; 0 for no limit.
	Batch       int `json:"batch,omitempty"`
	PromptBytes int `json:"prompt_bytes,omitempty"`
	// FrameBytes is the largest ask frame the supervisor reads.
	FrameBytes int64 `json:"frame_bytes,omitempty"`
}

// ImportsFrame asks the worker (Go → worker) which modules Code imports that
// its interpreter cannot import yet; the worker answers with an ImportsFrame
// too. Go → worker, Names are the top-level modules to count as not
// importable even when they are, those of a learned package set (see
// Conn.Imports); worker → Go, the top-level or dotted module names not
// importable.
type ImportsFrame struct {
	Code  string   `json:"code,omitempty"`
	Names []string `json:"names,omitempty"`
}

// InstallFrame (Go → worker) announces Files, the wheels that follow as
// binary frames. The worker unpacks them into its interpreter and answers
// with an InstalledFrame.
type InstallFrame struct {
	Files []File `json:"files,omitempty"`
}

// InstalledFrame (worker → Go) answers an InstallFrame, with Error set if it
// failed.
type InstalledFrame struct {
	Error string `json:"error,omitempty"`
}

// InterruptFrame (Go → worker) raises KeyboardInterrupt in the running code.
// The worker's main thread acts on it, since the runner's thread is busy
// running Python.
type InterruptFrame struct{}

// PingFrame (Go → worker) asks an idle worker's interpreter to answer with a
// PongFrame: a worker that does not is frozen or wedged.
type PingFrame struct{}

// PongFrame (worker → Go) answers a PingFrame.
type PongFrame struct{}

// PutFrame (Go → worker) makes the directories Dirs and announces Files,
// whose Name is an absolute path in the interpreter's file system, and whose
// bytes follow as binary frames: the mounted host folders. The code may not
// change the trees of ReadOnly, which are among Dirs: its writes there raise
// OSError(EROFS) rather than vanish. The worker writes them and answers with
// a PutFrame, with Error set if it failed.
type PutFrame struct {
	Files    []File   `json:"files,omitempty"`
	Dirs     []string `json:"dirs,omitempty"`
	ReadOnly []string `json:"readonly,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// FilesFrame (worker → Go), sent during a run before its result, lists the
// files the run changed under the watched directories and the images it
// made; the bytes of every change that is not deleted or omitted, then of
// every figure, follow as binary frames, in order.
type FilesFrame struct {
	Changes []Change `json:"changes,omitempty"`
	Figures []Figure `json:"figures,omitempty"`
}

// SnapshotFrame (Go → worker) asks a worker started to make a memory
// snapshot, once ready (and given its packages by install frames), to import
// the modules Names and send the snapshot as one binary frame.
type SnapshotFrame struct {
	Names []string `json:"names,omitempty"`
}

// ToolCallFrame (worker → Go), sent during a run, asks for a call of a tool
// of another MCP server (code mode). A ToolResultFrame (Go → worker) answers
// it.
type ToolCallFrame struct {
	ToolCall
}

// ToolResultFrame (Go → worker) answers the ToolCallFrame of the same ID
// with either Value, the result as JSON, or Error.
type ToolResultFrame struct {
	ID    int64           `json:"id,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

// AskFrame (worker → Go), sent during a run, asks one round of Questions:
// one llm_query, ask_user or input(), or all the prompts of one
// llm_query_batched. An AnswerFrame (Go → worker) answers it.
type AskFrame struct {
	ID        int64      `json:"id,omitempty"`
	Questions []Question `json:"questions,omitempty"`
}

// AnswerFrame (Go → worker) answers the AskFrame of the same ID with one
// Answer per question, in order, or with Error, which fails the round.
type AnswerFrame struct {
	ID      int64    `json:"id,omitempty"`
	Answers []Answer `json:"answers,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// CompileFrame (Go → worker) asks a compile worker, one where no user code
// has run and none will, to compile the modules of the wheel in Files, whose
// bytes follow as binary frames, to bytecode of at most Limit bytes,
// skipping the modules Names (paths in the wheel). It answers with a
// CompiledFrame.
type CompileFrame struct {
	Names []string `json:"names,omitempty"`
	Files []File   `json:"files,omitempty"`
	Limit int64    `json:"limit,omitempty"`
}

// CompiledFrame (worker → Go) answers a CompileFrame with the interpreter's
// cache Tag ("cpython-314") and Magic number (hex) and the Modules compiled
// and Skipped, then, when Modules is not 0, one binary frame: a zip archive
// of the .pyc files, stored, by their paths in the wheel. Or it has Error,
// and in Names the module it was compiling if that ended the interpreter
// (nesting past the wasm stack).
type CompiledFrame struct {
	Names   []string `json:"names,omitempty"`
	Tag     string   `json:"tag,omitempty"`
	Magic   string   `json:"magic,omitempty"`
	Modules int      `json:"modules,omitempty"`
	Skipped int      `json:"skipped,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// CompilingFrame (worker → Go), before the CompiledFrame of a compile, names
// the Module (its path in the wheel) whose compile begins, or is "" as it
// ends: the supervisor stops a module that takes too long or too much
// memory, and compiles the wheel again without it.
type CompilingFrame struct {
	Module string `json:"module"`
}

// Type returns TypeHello.
func (HelloFrame) Type() string { return TypeHello }

// Type returns TypeReady.
func (ReadyFrame) Type() string { return TypeReady }

// Type returns TypeStandby.
func (StandbyFrame) Type() string { return TypeStandby }

// Type returns TypeRestore.
func (RestoreFrame) Type() string { return TypeRestore }

// Type returns TypeRecycle.
func (RecycleFrame) Type() string { return TypeRecycle }

// Type returns TypeRecycled.
func (RecycledFrame) Type() string { return TypeRecycled }

// Type returns TypeOutput.
func (OutputFrame) Type() string { return TypeOutput }

// Type returns TypeResult.
func (ResultFrame) Type() string { return TypeResult }

// Type returns TypeFatal.
func (FatalFrame) Type() string { return TypeFatal }

// Type returns TypeRun.
func (RunFrame) Type() string { return TypeRun }

// Type returns TypeImports.
func (ImportsFrame) Type() string { return TypeImports }

// Type returns TypeInstall.
func (InstallFrame) Type() string { return TypeInstall }

// Type returns TypeInstalled.
func (InstalledFrame) Type() string { return TypeInstalled }

// Type returns TypeInterrupt.
func (InterruptFrame) Type() string { return TypeInterrupt }

// Type returns TypePing.
func (PingFrame) Type() string { return TypePing }

// Type returns TypePong.
func (PongFrame) Type() string { return TypePong }

// Type returns TypePut.
func (PutFrame) Type() string { return TypePut }

// Type returns TypeFiles.
func (FilesFrame) Type() string { return TypeFiles }

// Type returns TypeSnapshot.
func (SnapshotFrame) Type() string { return TypeSnapshot }

// Type returns TypeToolCall.
func (ToolCallFrame) Type() string { return TypeToolCall }

// Type returns TypeToolResult.
func (ToolResultFrame) Type() string { return TypeToolResult }

// Type returns TypeAsk.
func (AskFrame) Type() string { return TypeAsk }

// Type returns TypeAnswer.
func (AnswerFrame) Type() string { return TypeAnswer }

// Type returns TypeCompile.
func (CompileFrame) Type() string { return TypeCompile }

// Type returns TypeCompiled.
func (CompiledFrame) Type() string { return TypeCompiled }

// Type returns TypeCompiling.
func (CompilingFrame) Type() string { return TypeCompiling }

// Stream names the standard stream a line was printed to.
type Stream string

// The two streams user code can print to.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// The statuses a result frame may carry.
const (
	ResultSuccess  = "success"
	ResultRunError = "run-error"
)

// ToolCall is a tool of another MCP server that running code asked to call.
// It comes from the worker, which shares its interpreter with the code: its
// fields are the code's, to be checked.
type ToolCall struct {
	ID     int64           `json:"id,omitempty"`
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// The Kind of a Question.
const (
	AskModel  = "model"  // llm_query: Prompt, System, MaxTokens, Temperature, ModelHint
	AskPerson = "person" // ask_user or input(): Message, Schema
)

// Question is one question of an ask frame. It comes from the worker, which
// shares its interpreter with the code: its fields are the code's, to be
// checked.
type Question struct {
	Kind        string          `json:"kind,omitempty"`
	Prompt      string          `json:"prompt,omitempty"`
	System      string          `json:"system,omitempty"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	ModelHint   string          `json:"model_hint,omitempty"`
	Message     string          `json:"message,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
}

// Answer is the answer to one Question: Text (the model's, or the
// person's without a schema), Value (the person's object, with one), or
// why there is none: Declined (the person declined, or the client
// refused) and Error.
type Answer struct {
	Text     string          `json:"text,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	Declined bool            `json:"declined,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Change is a file a run created, changed or deleted, by its absolute path
// in the interpreter's file system. An omitted file was changed but its
// bytes were past the run frame's FilesLimit; only its size comes.
type Change struct {
	Path    string `json:"path"`
	Size    int64  `json:"size,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	Omitted bool   `json:"omitted,omitempty"`
}

// Figure is an image a run made: its last value's display image, or a
// matplotlib figure.
type Figure struct {
	MIMEType string `json:"mime_type"`
	Size     int64  `json:"size"`
}

// File describes one file that an install, put or compile frame announces.
type File struct {
	Name string `json:"name"` // file name, such as "pkg-1.0-py3-none-any.whl"
	// InstallDir is where Pyodide unpacks it, as its lock file says: "site"
	// (site-packages, the default), "stdlib" or "dynlib" (shared libraries).
	InstallDir string `json:"install_dir,omitempty"`
	// Size is its length in bytes. Go → worker, the bytes follow in binary
	// frames of at most ChunkSize bytes, a file's before the next one's, so
	// that no frame is larger than that however large the file.
	Size int64 `json:"size"`
}

// ChunkSize is the largest binary frame that carries a file to a worker.
const ChunkSize = 1 << 20
