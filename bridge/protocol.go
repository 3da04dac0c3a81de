package bridge

import "encoding/json"

// The wire protocol between the supervisor and a worker process.
//
// Every frame is one JSON object with a "type" field, except the binary
// frames: the memory snapshot, which a worker started to make one sends
// when asked, and the bytes of the files that follow an install, a put or
// a files frame. A worker's first frame is
// always a Hello carrying its one-time secret; nothing else is read from a
// connection that has not proved who it is.

// Message types sent by a worker.
const (
	TypeHello  = "hello"  // worker → Go: first frame, proves the worker's identity
	TypeReady  = "ready"  // worker → Go: Pyodide is loaded, the worker takes one run
	TypeOutput = "output" // worker → Go: lines printed by the running code
	TypeResult = "result" // worker → Go: the run finished
	TypeFatal  = "fatal"  // worker → Go: the worker cannot go on
	TypeRun    = "run"    // Go → worker: run this code
	// TypeImports asks the worker (Go → worker) which modules the code
	// imports that its interpreter cannot import yet; the worker answers
	// with the same type and Names.
	TypeImports = "imports"
	// TypeInstall (Go → worker) announces Files, the wheels that follow as
	// binary frames, one each, in order. The worker unpacks them into its
	// interpreter and answers TypeInstalled, with Error set if it failed.
	TypeInstall   = "install"
	TypeInstalled = "installed"
	// TypeInterrupt (Go → worker) raises KeyboardInterrupt in the running
	// code. The worker's main thread acts on it, since the runner's thread
	// is busy running Python.
	TypeInterrupt = "interrupt"
	// TypePing (Go → worker) asks an idle worker's interpreter to answer
	// TypePong: a worker that does not is frozen or wedged.
	TypePing = "ping"
	TypePong = "pong"
	// TypePut (Go → worker) makes the directories Dirs and announces
	// Files, whose Name is an absolute path in the interpreter's file
	// system, and whose bytes follow as binary frames: the mounted host
	// folders. The worker writes them and answers TypePut, with Error set
	// if it failed.
	TypePut = "put"
	// TypeFiles (worker → Go), sent during a run before its result, lists
	// the files the run changed under the watched directories and the
	// images it made; the bytes of every change that is not deleted or
	// omitted, then of every figure, follow as binary frames, in order.
	TypeFiles = "files"
	// TypeSnapshot (Go → worker) asks a worker started to make a memory
	// snapshot, once ready (and given its packages by install frames), to
	// import the modules Names and send the snapshot as one binary frame.
	TypeSnapshot = "snapshot"
	// TypeStandby (worker → Go) is the first frame of a worker started
	// lazily, instead of TypeReady: Pyodide's module is compiled, the
	// interpreter not made. TypeRestore (Go → worker) makes it; the worker
	// then sends TypeReady.
	TypeStandby = "standby"
	TypeRestore = "restore"
	// TypeToolCall (worker → Go), sent during a run, asks for a call of a
	// tool of another MCP server (code mode): ID, Server, Tool and Args.
	// TypeToolResult (Go → worker) answers it, with the same ID and either
	// Value, the result as JSON, or Error.
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	// TypeCompile (Go → worker) asks a compile worker, one where no user
	// code has run and none will, to compile the modules of the wheel in
	// Files, whose bytes follow as binary frames, to bytecode of at most
	// Limit bytes, skipping the modules Names (paths in the wheel). It
	// answers TypeCompiled with its interpreter's Tag and Magic and the
	// Modules compiled and Skipped, then, when Modules is not 0, one binary
	// frame: a zip archive of the .pyc files, stored, by their paths in the
	// wheel; or with Error, and in Names the module it was compiling if
	// that ended the interpreter (nesting past the wasm stack).
	TypeCompile  = "compile"
	TypeCompiled = "compiled"
)

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

// Message is one JSON frame. Only the fields of its Type are set.
type Message struct {
	Type string `json:"type"`

	// hello
	Secret string `json:"secret,omitempty"`

	// ready
	Python   string `json:"python,omitempty"`   // Python version, such as "3.14.2"
	Snapshot bool   `json:"snapshot,omitempty"` // Pyodide was restored from a snapshot

	// output
	Stream  Stream   `json:"stream,omitempty"`
	Lines   []string `json:"lines,omitempty"`
	Dropped int      `json:"dropped,omitempty"` // bytes printed past the output limit, not sent

	// run, imports
	Code string `json:"code,omitempty"`
	// run: Globals is a JSON object whose entries become globals before
	// the code runs; Watch are the directories whose changes come back in
	// a files frame, up to FilesLimit bytes of content (0: no limit).
	Globals    json.RawMessage `json:"globals,omitempty"`
	Watch      []string        `json:"watch,omitempty"`
	FilesLimit int64           `json:"files_limit,omitempty"`
	// run: Tools lists the tools the code may call, as a JSON array of
	// supervisor.ToolSpec: the worker makes Python's mcp_tools module of it.
	Tools json.RawMessage `json:"tools,omitempty"`

	// tool_call, tool_result
	ID     int64           `json:"id,omitempty"`
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`

	// files
	Changes []Change `json:"changes,omitempty"`
	Figures []Figure `json:"figures,omitempty"`

	// imports (worker → Go): top-level or dotted module names not importable;
	// (Go → worker): top-level modules to count as not importable even when
	// they are, those of a learned package set (see Conn.Imports);
	// compile, compiled: modules of a wheel, as above
	Names []string `json:"names,omitempty"`

	// install, put, compile: the files that follow as binary frames
	Files []File `json:"files,omitempty"`
	// put: directories to make, even when no file goes into them
	Dirs []string `json:"dirs,omitempty"`
	// put: those of Dirs that the code may not change (read-only mounts):
	// its writes there raise OSError(EROFS) rather than vanish
	ReadOnly []string `json:"readonly,omitempty"`

	// compile: the most bytes of bytecode the worker may send
	Limit int64 `json:"limit,omitempty"`
	// compiled: the interpreter's cache tag ("cpython-314") and magic
	// number (hex), and the modules compiled and skipped
	Tag     string `json:"tag,omitempty"`
	Magic   string `json:"magic,omitempty"`
	Modules int    `json:"modules,omitempty"`
	Skipped int    `json:"skipped,omitempty"`

	// result
	Status       string          `json:"status,omitempty"`
	ReturnValue  json.RawMessage `json:"return_value,omitempty"`  // indented JSON; absent for None; cut by the worker past the output limit
	ReturnString bool            `json:"return_string,omitempty"` // the value is a Python str
	Error        string          `json:"error,omitempty"`         // result, installed, compiled, fatal and tool_result
	// ReturnCut and ErrorCut are the sizes in bytes of a return value or an
	// error text that the worker cut to the output limit; 0 when whole.
	ReturnCut int `json:"return_cut,omitempty"`
	ErrorCut  int `json:"error_cut,omitempty"`
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

// File describes one package file of an install frame.
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
