package transport_test

import (
	"context"
	"encoding/json"
	"slices"
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

// How many tasks the owner runs, and how many pings it sends after each,
// until it hears of one (see TestTaskStatusOnlyToOwner).
const (
	maxTaskTries = 5
	pingsPerTask = 200
)

// runTask makes a task of c that runs "1" and returns its id.
func runTask(ctx context.Context, t *testing.T, c *mcptest.Client) string {
	t.Helper()
	res, err := c.GetTransport().SendRequest(ctx, clienttransport.JSONRPCRequest{
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
	return created.Task.TaskId
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
			// mcp-go loses a session's notification now and then: one that
			// comes as a request of the session ends is taken off the
			// session's channel by that request's forwarder, which then finds
			// the request done and drops it. So the owner runs tasks until it
			// hears of one, which shows the statuses were sent.
			var ids []string
			for len(heard[0].got()) == 0 {
				if len(ids) == maxTaskTries {
					t.Fatalf("the owner heard nothing of its %d tasks", len(ids))
				}
				ids = append(ids, runTask(ctx, t, owner))
				for range pingsPerTask {
					if len(heard[0].got()) > 0 {
						break
					}
					if err := owner.Ping(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			// By then the other session was sent it too: its next answer
			// comes after it.
			if err := other.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if got := heard[0].got(); !slices.Contains(ids, got[0]) {
				t.Errorf("the owner heard of %v, want one of %v", got, ids)
			}
			if got := heard[1].got(); len(got) != 0 {
				t.Errorf("another session heard of tasks %v", got)
			}
		})
	}
}
