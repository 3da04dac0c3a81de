package transport

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// message is what the front end reads of a JSON-RPC message that a client
// POSTs, decoded once per request (mcp-go decodes the body again).
type message struct {
	// ok is false when the body is not one JSON-RPC message (not JSON, or
	// a batch).
	ok     bool
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	// Result is what a response carries; mcp-go answers no message with a
	// result that is not null, even one with a method and an ID.
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	// body is the whole message. The params, the bulk of a tools/call, are
	// not decoded, nor copied: only a notifications/cancelled, which is
	// small, has its _meta read (see isCancel).
	body []byte
}

// decodeMessage decodes body.
func decodeMessage(body []byte) message {
	m := message{body: body}
	m.ok = json.Unmarshal(body, &m) == nil
	return m
}

// requestKey returns the key (see mcpGo.idKey) of the message's ID when it
// is a request, which mcp-go answers; false for anything else
// (notifications, responses, batches, garbage).
func (m message) requestKey() (string, bool) {
	if !m.ok || m.Method == "" || (len(m.Result) > 0 && string(m.Result) != "null") {
		return "", false
	}
	return (mcpGo{}).idKey(m.ID)
}

// isResponse reports whether the message is a response: an ID, a result
// or an error, and no method.
func (m message) isResponse() bool {
	return m.ok && m.Method == "" && len(m.ID) > 0 && (len(m.Result) > 0 || len(m.Error) > 0)
}

// requestID returns the raw ID of the message, nil when it has none that a
// response could carry.
func (m message) requestID() json.RawMessage {
	if _, ok := (mcpGo{}).idKey(m.ID); !m.ok || !ok {
		return nil
	}
	return m.ID
}

// isInitialize reports whether the message is an initialize request.
func (m message) isInitialize() bool {
	return m.ok && m.Method == string(mcp.MethodInitialize)
}

// isCancel reports whether the message is a notifications/cancelled, and
// the protocol version its _meta names ("" for none).
func (m message) isCancel() (protocolVersion string, ok bool) {
	if !m.ok || m.Method != string(mcp.MethodNotificationCancelled) {
		return "", false
	}
	var msg struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(m.body, &msg) != nil {
		return "", false
	}
	return msg.Params.Meta.ProtocolVersion(), true
}
