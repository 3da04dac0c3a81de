package transport

// A task's notifications/tasks/status is its owner's only. mcp-go sends it
// to every initialized session when a task ends or is cancelled
// (MCPServer.sendTaskStatusNotification through SendNotificationToAllClients),
// with no hook to choose whom; so where mcp-go writes a session's events,
// on an SSE stream or a Streamable HTTP response, the front end drops those
// of a task that is not the session's (mcpserver.Tasks.SessionOwns). Over
// stdio there is one session, whose every task is its own.

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
)

// taskStatusFilter is the http.ResponseWriter through which mcp-go writes
// one session's events: it drops the notifications/tasks/status of tasks
// that are not the session's.
type taskStatusFilter struct {
	streamWriter
	tasks   *mcpserver.Tasks
	session func() string // the session's id, "" while it has none
}

// streamWriter is a ResponseWriter that flushes, as mcp-go's streams
// require.
type streamWriter interface {
	http.ResponseWriter
	http.Flusher
}

// filterTaskStatus returns w writing through a taskStatusFilter for the
// session that session names; w itself without tasks, which have no
// notifications.
func filterTaskStatus(w streamWriter, tasks *mcpserver.Tasks, session func() string) http.ResponseWriter {
	if tasks == nil {
		return w
	}
	return &taskStatusFilter{streamWriter: w, tasks: tasks, session: session}
}

// Write implements http.ResponseWriter. mcp-go writes each event with one
// Write (mcpGo), so a dropped notification leaves the stream whole.
func (f *taskStatusFilter) Write(p []byte) (int, error) {
	if id, ok := (mcpGo{}).taskStatusEvent(p); ok && !f.tasks.SessionOwns(f.session(), id) {
		return len(p), nil
	}
	return f.streamWriter.Write(p)
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (f *taskStatusFilter) Unwrap() http.ResponseWriter { return f.streamWriter }

// taskStatusEvent returns the task id of the notifications/tasks/status that
// one Write of mcp-go's to an event stream carries; false for other events.
func (mcpGo) taskStatusEvent(event []byte) (string, bool) {
	data, ok := bytes.CutPrefix(event, []byte(sseEventPrefix))
	if !ok || !bytes.Contains(data, []byte(mcp.MethodNotificationTasksStatus)) {
		return "", false
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &msg) != nil || msg.Method != mcp.MethodNotificationTasksStatus {
		return "", false
	}
	return msg.Params.TaskID, true
}
