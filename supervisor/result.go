package supervisor

import (
	"encoding/json"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// Status is the outcome of a call, as shown to MCP clients.
type Status string

// The statuses of the upstream contract.
const (
	StatusSuccess      Status = "success"
	StatusInstallError Status = "install-error"
	StatusRunError     Status = "run-error"
)

// Stream names where a line of a call comes from.
type Stream string

// The two streams user code prints to, and the supervisor's own lines about
// a call's packages, which are not part of a result's output.
const (
	Stdout   Stream = Stream(bridge.Stdout)
	Stderr   Stream = Stream(bridge.Stderr)
	Progress Stream = "progress" // package resolution, download and install
	Failure  Stream = "failure"  // why packages could not be installed
)

// Line is one line printed by user code, without its newline, or one of the
// supervisor's lines about the call's packages.
type Line struct {
	Stream Stream
	Text   string
}

// Result is the outcome of running one piece of code.
type Result struct {
	Status       Status
	Dependencies []string // requested dependencies, in request order
	Output       []string // stdout and stderr lines, interleaved in print order
	// ReturnValue is the value of the code's last expression as indented JSON
	// (pydantic_core's to_json conventions), or nil when it was None.
	//
	// A value whose text (a str itself, anything else its JSON) is longer
	// than the output limit is cut on a character boundary to the limit and
	// followed by a line such as "[return value truncated: the value is 9.5
	// MiB, more than the 64 KiB limit]". The cut value is always a str, with
	// ReturnString set: cut JSON is no longer JSON, and a str keeps JSON
	// mode's return_value valid while XML mode shows the same text.
	ReturnValue json.RawMessage
	// ReturnString reports that the value is a Python str: XML rendering then
	// shows the string itself rather than its JSON form.
	ReturnString bool
	Error        string // the error text when Status is not StatusSuccess
	// Files are what the call did under WorkDir, by path; empty unless
	// Config.Files is set.
	Files []File
	// Figures are the images the call made.
	Figures []Figure
	// SessionLost reports that the call ended its session: its worker had
	// to be killed, or crashed. Error says so too.
	SessionLost bool
}

// Request is one call: its code, and what the code starts with.
type Request struct {
	Code string
	// Globals is a JSON object whose entries become the code's globals
	// before it runs (upstream's global_variables), or nil.
	Globals json.RawMessage
	// OnLine, if not nil, is called for each line the code prints, in
	// order, before Run returns.
	OnLine func(Line)
	// OnProgress, if not nil, is called with what the call is doing: its
	// place in the queue, its packages, and every progressTick while the
	// code runs. Calls are one at a time, the last before Run returns; it
	// should return at once, as some come with the queue's or the runtime's
	// bookkeeping waiting on it.
	OnProgress func(ProgressEvent)
	// Principal is who the call is for, when the front end knows (an
	// authenticated caller): one principal holds at most
	// Config.MaxCallsPerPrincipal of the pool's workers, and waiting calls
	// are served round robin across principals. "" is no one in particular,
	// held to no share. It is an opaque key, only compared: how callers are
	// named is the front end's business.
	Principal string
	// Ask is what the call's code may ask of the client's model and of the
	// person at the client, and who answers. Its zero value asks nothing:
	// the code sees upstream's interpreter.
	Ask Ask
}

// WorkDir is the working directory of the code, in the interpreter's file
// system: Pyodide's home. The files a call leaves there come back.
const WorkDir = "/home/pyodide"

// File is a file that a call created, changed or deleted under WorkDir.
type File struct {
	// Path is relative to WorkDir, with slashes.
	Path string
	Size int64
	// Data is the file's bytes; nil for a deleted or omitted file.
	Data []byte
	// Deleted reports that the call deleted a file that was there before.
	Deleted bool
	// Omitted reports that the file was past Config.FilesLimit: only its
	// size is known.
	Omitted bool
}

// Figure is an image a call made: its last value's own image (the IPython
// display protocol) or a matplotlib figure.
type Figure struct {
	MIMEType string // image/png, image/jpeg or image/svg+xml
	Data     []byte
}
