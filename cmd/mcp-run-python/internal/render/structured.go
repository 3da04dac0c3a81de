package render

import (
	"encoding/json"
	"strings"
)

// statusError is the status of the structured result of a call that gave
// a tool error (isError): the call did not give a result of its own (bad
// arguments, a busy server, a cancelled call...), and "error" says why.
// Results of code that ran have the supervisor's statuses.
const statusError = "error"

// outputSchema is the JSON Schema of JSON mode's result object, which
// run_python_code declares as its outputSchema: exactly the keys and
// values renderJSON writes, plus statusError for tool errors (see
// toolError). It names no $schema and uses only keywords that mean the same
// in draft-07, which the input schema names, and in 2020-12, the MCP
// default, so that every client's validator reads it alike. Its whitespace
// goes: the JSON encoder compacts it on the wire.
const outputSchema = `{
  "type": "object",
  "properties": {
    "status": {
      "description": "success: the code ran; install-error: its dependencies could not be installed; run-error: it raised; error: the call gave a tool error (isError)",
      "enum": ["success", "install-error", "run-error", "error"]
    },
    "dependencies": {
      "description": "The packages the call asked for: its PEP 723 dependencies, or those inferred from its imports; absent when none",
      "type": "array",
      "items": {"type": "string"}
    },
    "output": {
      "description": "What the code printed, stdout and stderr in print order, one item per line",
      "type": "array",
      "items": {"type": "string"}
    },
    "return_value": {
      "description": "On success only: the value of the last expression as JSON (a str as a string), null for None"
    },
    "error": {
      "description": "Unless success: the traceback, why the install failed, or why the call gave a tool error",
      "type": "string"
    },
    "files": {
      "description": "The files the code wrote under /home/pyodide, readable at their uri with resources/read; absent when none",
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "path": {"type": "string"},
          "size": {"type": "integer", "minimum": 0},
          "mime_type": {"type": "string"},
          "uri": {"type": "string"}
        },
        "required": ["path", "size", "mime_type", "uri"],
        "additionalProperties": false
      }
    }
  },
  "required": ["status", "output"],
  "additionalProperties": false,
  "if": {"properties": {"status": {"const": "success"}}},
  "then": {"required": ["return_value"], "properties": {"error": false}},
  "else": {"required": ["error"], "properties": {"return_value": false}}
}`

// OutputSchema returns the JSON Schema of JSON mode's result object
// (DESIGN 1.4), which run_python_code declares as its outputSchema.
func OutputSchema() json.RawMessage {
	return json.RawMessage(outputSchema)
}

// Structured returns the structuredContent of a JSON-mode answer whose text
// content is text. A result's text is already the object, so it is that
// text, byte for byte, and the two cannot disagree; a tool error's text is
// a plain message, which toolError wraps.
func Structured(text string, isError bool) json.RawMessage {
	if isError {
		return json.RawMessage(toolError(text))
	}
	return json.RawMessage(text)
}

// toolError is the object of a tool error whose message is msg, in JSON
// mode's key order: {"status":"error","output":[],"error":msg}. The MCP
// spec asks a tool with an outputSchema for structuredContent that
// validates against it; error results carry it too, so that a program
// reads one shape whatever happened, and it validates, as a client that
// checks (the TypeScript SDK does) checks any structuredContent, an
// error's too.
func toolError(msg string) string {
	var b strings.Builder
	b.WriteString(`{"status":`)
	WriteJSString(&b, statusError)
	b.WriteString(`,"output":[],"error":`)
	WriteJSString(&b, msg)
	b.WriteByte('}')
	return b.String()
}
