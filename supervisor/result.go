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
}
