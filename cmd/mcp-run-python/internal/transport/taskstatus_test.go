package transport_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
)

// taskStatuses records the task ids of the notifications/tasks/status a
// client receives.
type taskStatuses struct {
	mu  sync.Mutex
	ids []string
}

// handle is a client's notification handler.
func (s *taskStatuses) handle(n mcp.JSONRPCNotification) {
	if n.Method != mcp.MethodNotificationTasksStatus {
		return
	}
	id, _ := n.Params.AdditionalFields["taskId"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
}

// got returns the ids received so far.
func (s *taskStatuses) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// TestTaskStatusOnlyToOwner runs a task of one client beside another on
// each shared transport with sessions: its notifications/tasks/status,
// which mcp-go sends to every session, reaches its owner's session only.
func TestTaskStatusOnlyToOwner(t *testing.T) {
	for _, tc := range transporttest.Cases() {
		if !tc.Shared || tc.Name == "streamable_http_stateless" {
			continue // stateless sessions hear no notification but their call's
		}
		t.Run(tc.Name, func(t *testing.T) {
			connect := tc.Serve(t, &mcptest.FakeRunner{}, func(o *mcpserver.Options) {
				o.Tasks = &mcpserver.TaskOptions{Retention: time.Minute}
			})
			var heard [2]taskStatuses
			clients := [2]*mcptest.Client{connect(t, mcptest.Legacy), connect(t, mcptest.Legacy)}
			for i, c := range clients {
				c.OnNotification(heard[i].handle)
			}
			owner, other := clients[0], clients[1]
			ctx := mcptest.Context(t)
			res, err := owner.GetTransport().SendRequest(ctx, clienttransport.JSONRPCRequest{
				JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("task"), Method: string(mcp.MethodToolsCall),
				Params: map[string]any{"name": mcptest.ToolName, "arguments": map[string]any{mcptest.CodeArgument: "1"}, "task": map[string]any{}},
			})
			if err != nil || res.Error != nil {
				t.Fatalf("task-augmented tools/call: %v %+v", err, res)
			}
			var created mcp.CreateTaskResult
			if err := json.Unmarshal(res.Result, &created); err != nil || created.Task.TaskId == "" {
				t.Fatalf("task-augmented tools/call answered %s (%v)", res.Result, err)
			}
			// The owner hears of its task's end, on its stream or with the
			// answer to its next request.
			for deadline := time.Now().Add(mcptest.Timeout); len(heard[0].got()) == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the owner heard nothing of its task")
				}
				if err := owner.Ping(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// By then the other session was sent it too: its next answer
			// comes after it.
			if err := other.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if got := heard[0].got(); got[0] != created.Task.TaskId {
				t.Errorf("the owner heard of %v, want %s", got, created.Task.TaskId)
			}
			if got := heard[1].got(); len(got) != 0 {
				t.Errorf("another session heard of tasks %v", got)
			}
		})
	}
}
