package transport

// The one place that relies on what mcp-go does rather than on what its API
// promises. Every such behaviour is a method or constant of mcpGo, and
// TestMCPGoPinned (mcpgo_test.go) fails, listing them, when go.mod requires
// another mcp-go than mcpGoVersion; the tests named below fail when one of
// them changes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/server"
)

// mcpGoVersion is the mcp-go release whose behaviour mcpGo was checked
// against.
const mcpGoVersion = "v1.2.1"

// mcpGo is the front end's adapter over mcp-go's servers. It relies on
// these behaviours of theirs:
//
//   - SSE (SSEServer): a POST to the message endpoint that mcp-go accepts is
//     answered 202, and its response is queued for the session's stream
//     after the handler returns; the stream's goroutine writes each queued
//     event with one Write of "event: message\ndata: JSON\n\n" and then
//     flushes (sseAccepted, responseEvent; TestMCPGoSSEResponseFlushed).
//   - SSE: SendEventToSession never blocks: on a full queue (100 events) it
//     fails with the plain error "event queue full" (queueFull;
//     TestMCPGoSSEQueueFull).
//   - SSE and Streamable HTTP: each notification, and so each
//     notifications/tasks/status that mcp-go sends to every session, is
//     one Write of an event (taskStatusEvent; TestTaskStatusOnlyToOwner).
//   - mcp-go decodes request IDs and encodes them again in the response, so
//     that 1.0 and -0 come back as 1 and 0 (idKey); it answers every request
//     but one that carries a result (message.requestKey).
//   - Streamable HTTP: once a request's session is upgraded
//     (UpgradeToSSEWhenReceiveNotification) while its handler runs, mcp-go
//     writes the response as one more SSE event on the request's own
//     response, after calling WriteHeader again (upgradeToSSE, callStream;
//     TestNotificationsPrecedeResult).
//   - stdio: the worker pool of WithWorkerPoolSize is capped at 100
//     (maxStdioWorkers), and every message is written with a single Write
//     (syncWriter). Listen cancels every request once its context ends,
//     and returns once its workers have written their results (ServeStdio);
//     it does the same, dropping the calls still queued, once it reads the
//     end of its input (lineLimitReader.atEnd; TestStdioAnswersAtEOF).
//
// The front end's policies also answer what mcp-go does, though through its
// API, and say so where they are: the SSE server registers a session with
// the context of the GET that opens its stream (newSSEFrontEnd); Streamable
// HTTP keys requests in flight by session ID and request ID, and in
// stateless mode registers a GET stream as session "" (streamableHandler);
// it resolves the session ID manager with each request, and with nil from
// its idle sweeper, which Shutdown stops (sessionIDs, newStreamableFrontEnd).
type mcpGo struct{}

// maxStdioWorkers is the largest worker pool mcp-go's stdio server takes.
const maxStdioWorkers = 100

// sseEventPrefix starts every message event mcp-go writes to an SSE stream,
// and those the front end writes itself on a Streamable HTTP response, so
// that clients read both alike.
const sseEventPrefix = "event: message\ndata: "

// sseAccepted reports whether mcp-go's answer to an SSE POST means that it
// will send a response on the session's stream.
func (mcpGo) sseAccepted(status int) bool { return status == http.StatusAccepted }

// responseEvent returns the key (see idKey) of the JSON-RPC response that
// one Write of mcp-go's to an SSE stream carries; false for other events
// (notifications, requests, the endpoint).
func (g mcpGo) responseEvent(event []byte) (string, bool) {
	data, ok := bytes.CutPrefix(event, []byte(sseEventPrefix))
	if !ok {
		return "", false
	}
	return g.responseKey(bytes.TrimSpace(data))
}

// responseKey returns the key (see idKey) of the JSON-RPC response msg;
// false for other messages (notifications, requests). It reads msg up to
// the result or error and no further once it has the ID, which mcp-go
// writes first: a large result is not read again.
func (g mcpGo) responseKey(msg []byte) (string, bool) {
	// The notifications, most of what a call writes, as mcp-go and the
	// front end write them: decoding costs some 6 µs a line.
	if bytes.HasPrefix(msg, []byte(`{"jsonrpc":"2.0","method":`)) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var id json.RawMessage
	answer := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch key {
		case "method":
			return "", false
		case "id":
			err = dec.Decode(&id)
		case "result", "error":
			answer = true
			if id == nil { // read past it to the ID
				err = dec.Decode(new(json.RawMessage))
			}
		default:
			err = dec.Decode(new(json.RawMessage))
		}
		if err != nil {
			return "", false
		}
		if answer && id != nil {
			return g.idKey(id)
		}
	}
	return "", false
}

// idKey returns a key for a JSON-RPC ID that matches however the ID is
// spelled, in a request or in mcp-go's response to it.
func (mcpGo) idKey(raw json.RawMessage) (string, bool) {
	var id any
	if len(raw) == 0 || json.Unmarshal(raw, &id) != nil {
		return "", false
	}
	switch id := id.(type) {
	case string:
		return "s:" + id, true
	case float64:
		if id == 0 {
			id = 0 // -0, which mcp-go answers as 0
		}
		return "n:" + strconv.FormatFloat(id, 'g', -1, 64), true
	}
	return "", false
}

// queueFull reports whether err, from SendEventToSession, says that the
// session's event queue is full: mcp-go has no sentinel error for it.
func (mcpGo) queueFull(err error) bool {
	return err != nil && strings.Contains(err.Error(), "queue full")
}

// upgradeToSSE makes mcp-go answer the Streamable HTTP request of ctx as an
// event stream, so that its response follows the events the handler writes
// on it.
func (mcpGo) upgradeToSSE(ctx context.Context) error {
	session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithStreamableHTTPConfig)
	if !ok {
		return errors.New("no streamable HTTP session in context")
	}
	session.UpgradeToSSEWhenReceiveNotification()
	return nil
}
