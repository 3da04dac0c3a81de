package main_test

// End-to-end tests of MCP tasks (DESIGN 1.5): with --tasks, a client starts
// run_python_code as a task, polls it, fetches its result and cancels it,
// over every transport.
//
//	go test ./cmd/mcp-run-python/ -run TestTasks -count=1 -v

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// tasksProtocol is the first protocol version with tasks.
const tasksProtocol = mcp.ProtocolVersion20251125

// taskGrace is the servers' --grace: how long cancelled code gets before its
// worker is killed.
const taskGrace = time.Second

// startTask sends run_python_code with code as a task and returns the raw
// response.
func (c *e2eClient) startTask(t *testing.T, code string) *transport.JSONRPCResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId("e2e-task"),
		Method:  string(mcp.MethodToolsCall),
		Params:  map[string]any{"name": toolName, "arguments": map[string]any{"python_code": code}, "task": map[string]any{}},
	})
	if err != nil {
		t.Fatalf("task-augmented tools/call: %v", err)
	}
	return res
}

// newTask starts code as a task and returns its id.
func (c *e2eClient) newTask(t *testing.T, code string) string {
	t.Helper()
	res := c.startTask(t, code)
	if res.Error != nil {
		t.Fatalf("task-augmented tools/call: error %d %s", res.Error.Code, res.Error.Message)
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(res.Result, &created); err != nil || created.Task.TaskId == "" {
		t.Fatalf("task-augmented tools/call answered %s (%v), want a task", res.Result, err)
	}
	return created.Task.TaskId
}

// getTask returns the task id as tasks/get shows it.
func (c *e2eClient) getTask(t *testing.T, id string) mcp.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	if err != nil {
		t.Fatalf("tasks/get %s: %v", id, err)
	}
	return res.Task
}

// pollTask polls the task id until until holds or a call's time is up, and
// returns the task then and every statusMessage seen on the way.
func (c *e2eClient) pollTask(t *testing.T, id string, until func(mcp.Task) bool) (mcp.Task, []string) {
	t.Helper()
	var seen []string
	for deadline := time.Now().Add(callTimeout); ; time.Sleep(100 * time.Millisecond) {
		task := c.getTask(t, id)
		if task.StatusMessage != "" {
			seen = append(seen, task.StatusMessage)
		}
		if until(task) {
			return task, seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is still %s (%q)", id, task.Status, task.StatusMessage)
		}
	}
}

// taskResultContent returns the raw content of the task id's result.
func (c *e2eClient) taskResultContent(t *testing.T, id string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("e2e-task-result"),
		Method: string(mcp.MethodTasksResult), Params: map[string]any{"taskId": id},
	})
	if err != nil || res.Error != nil {
		t.Fatalf("tasks/result %s: %v %v", id, err, res.Error)
	}
	var result struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(res.Result, &result); err != nil {
		t.Fatalf("tasks/result %s: %v", id, err)
	}
	return result.Content
}

// TestTasks runs a task to its end and cancels another, over every
// transport; in stateless mode, without a session or a caller to own them,
// tasks are refused.
func TestTasks(t *testing.T) {
	s := setup(t)
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tg := startTarget(t, s, mode, "--tasks", "--workers", "1", "--grace", taskGrace.String())
			c := tg.connectProtocol(t, tasksProtocol)
			if mode == modeStateless {
				tools := string(c.rawRequest(t, string(mcp.MethodToolsList), map[string]any{}))
				if strings.Contains(tools, "taskSupport") {
					t.Errorf("stateless tools/list offers tasks: %s", tools)
				}
				if res := c.startTask(t, "1"); res.Error == nil || !strings.Contains(res.Error.Message, "tasks need an MCP session") {
					t.Errorf("stateless task: %s %+v, want a clear error", res.Result, res.Error)
				}
				c.expectWorks(t)
				return
			}
			if tools := string(c.rawRequest(t, string(mcp.MethodToolsList), map[string]any{})); !strings.Contains(tools, `"execution":{"taskSupport":"optional"}`) {
				t.Errorf("tools/list: %s, want run_python_code with taskSupport optional", tools)
			}

			t.Run("to_completion", func(t *testing.T) {
				start := time.Now()
				id := c.newTask(t, "import time\ntime.sleep(2)\nprint('slept')\n'done'")
				if took := time.Since(start); took > 1500*time.Millisecond {
					t.Errorf("the task's id came after %v, not at once", took)
				}
				task, seen := c.pollTask(t, id, func(task mcp.Task) bool { return task.Status.IsTerminal() })
				if task.Status != mcp.TaskStatusCompleted || task.TTL == nil {
					t.Errorf("finished task = %+v, want completed with a ttl", task)
				}
				if !strings.Contains(strings.Join(seen, "\n"), "running: ") {
					t.Errorf("statusMessages seen while it ran: %q, want the call's progress", seen)
				}
				var content []struct{ Type, Text string }
				if err := json.Unmarshal(c.taskResultContent(t, id), &content); err != nil {
					t.Fatal(err)
				}
				want := "<status>success</status>\n<output>\nslept\n</output>\n<return_value>\ndone\n</return_value>"
				if len(content) != 1 || content[0].Type != "text" || content[0].Text != want {
					t.Errorf("tasks/result content: %+v, want one text: %q", content, want)
				}
				ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
				defer cancel()
				list, err := c.ListTasks(ctx, mcp.ListTasksRequest{})
				if err != nil || len(list.Tasks) == 0 || list.Tasks[0].TaskId != id {
					t.Errorf("tasks/list = %+v (%v), want the task", list, err)
				}
			})

			t.Run("same_result_as_plain_call", func(t *testing.T) {
				code := "print('hi')\n1 + 1"
				var plain struct {
					Content json.RawMessage `json:"content"`
				}
				if err := json.Unmarshal(c.rawRequest(t, string(mcp.MethodToolsCall), map[string]any{"name": toolName, "arguments": map[string]any{"python_code": code}}), &plain); err != nil {
					t.Fatal(err)
				}
				if got := c.taskResultContent(t, c.newTask(t, code)); string(got) != string(plain.Content) {
					t.Errorf("tasks/result content %s, want the plain call's %s", got, plain.Content)
				}
			})

			t.Run("cancel", func(t *testing.T) {
				id := c.newTask(t, "while True: pass")
				c.pollTask(t, id, func(task mcp.Task) bool { return strings.HasPrefix(task.StatusMessage, "running: ") })
				ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
				defer cancel()
				start := time.Now()
				res, err := c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
				if err != nil || res.Status != mcp.TaskStatusCancelled {
					t.Fatalf("tasks/cancel = %+v, %v; want cancelled", res, err)
				}
				c.pollTask(t, id, func(task mcp.Task) bool { return task.StatusMessage == "cancelled; the code has stopped" })
				// Under load on two cores, the kill and the call's return
				// take a while past the grace.
				if took, limit := time.Since(start), taskGrace+10*time.Second; took > limit {
					t.Errorf("the code stopped %v after the cancel, want within %v", took, limit)
				}
				c.expectWorks(t) // on a new worker: the one worker was killed
			})

			if mode == modeStdio {
				return // one client per server
			}
			t.Run("owners", func(t *testing.T) {
				id := c.newTask(t, "1")
				other := tg.connectProtocol(t, tasksProtocol)
				ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
				defer cancel()
				if _, err := other.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}); err == nil {
					t.Error("another client's tasks/get of the task succeeded")
				}
				if list, err := other.ListTasks(ctx, mcp.ListTasksRequest{}); err != nil || len(list.Tasks) != 0 {
					t.Errorf("another client's tasks/list = %+v (%v), want none", list, err)
				}
			})
		})
	}
}

// TestTasksStatelessWithAuth checks that stateless Streamable HTTP, which
// keeps no MCP session, offers tasks to authenticated callers: a task is its
// principal's, across requests, and no one else's.
func TestTasksStatelessWithAuth(t *testing.T) {
	s := setup(t)
	const aliceToken, bobToken = "alice-0123456789abcdef0123456789", "bob-0123456789abcdef0123456789ab"
	tg := startTarget(t, s, modeStateless, "--tasks", "--auth-token-file", tokenFile(t, aliceToken, bobToken))
	alice := tg.as(aliceToken).connectProtocol(t, tasksProtocol)
	bob := tg.as(bobToken).connectProtocol(t, tasksProtocol)
	id := alice.newTask(t, "'hers'")
	alice.pollTask(t, id, func(task mcp.Task) bool { return task.Status == mcp.TaskStatusCompleted })
	var content []struct{ Text string }
	if err := json.Unmarshal(alice.taskResultContent(t, id), &content); err != nil || len(content) != 1 || !strings.Contains(content[0].Text, "hers") {
		t.Errorf("alice's tasks/result: %+v (%v)", content, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := bob.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}); err == nil {
		t.Error("bob's tasks/get of alice's task succeeded")
	}
	if _, err := bob.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}}); err == nil {
		t.Error("bob's tasks/cancel of alice's task succeeded")
	}
}

// heardOf returns how many notifications of method c has received.
func (c *e2eClient) heardOf(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.others {
		if m == method {
			n++
		}
	}
	return n
}

// TestTasksKept checks what a server keeps of its tasks: a task has the
// ttl its client asked, and past --max-task-results the oldest ended
// task's result is dropped, which its tasks/get and tasks/result say.
func TestTasksKept(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStdio, "--tasks", "--workers", "1", "--max-task-results", "1")
	c := tg.connectProtocol(t, tasksProtocol)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("e2e-ttl"), Method: string(mcp.MethodToolsCall),
		Params: map[string]any{"name": toolName, "arguments": map[string]any{"python_code": "'first'"}, "task": map[string]any{"ttl": 120000}},
	})
	var created mcp.CreateTaskResult
	if err != nil || res.Error != nil || json.Unmarshal(res.Result, &created) != nil {
		t.Fatalf("task with a ttl: %v %+v", err, res)
	}
	if ttl := created.Task.TTL; ttl == nil || *ttl != 120000 {
		t.Errorf("ttl of a task that asked 120000 ms: %v", ttl)
	}
	first := created.Task.TaskId
	c.pollTask(t, first, func(task mcp.Task) bool { return task.Status.IsTerminal() })
	second := c.newTask(t, "'second'")
	c.pollTask(t, second, func(task mcp.Task) bool { return task.Status.IsTerminal() })

	dropped := c.getTask(t, first)
	if dropped.Status != mcp.TaskStatusCompleted || !strings.Contains(dropped.StatusMessage, "--max-task-results") {
		t.Errorf("tasks/get of the task whose result was dropped: %+v, want completed, naming --max-task-results", dropped)
	}
	if ttl := dropped.TTL; ttl == nil || *ttl != 120000 {
		t.Errorf("ttl of the ended task: %v, want 120000 (before the retention)", ttl)
	}
	var content []struct{ Text string }
	if err := json.Unmarshal(c.taskResultContent(t, first), &content); err != nil || len(content) != 1 || !strings.Contains(content[0].Text, "result was dropped") {
		t.Errorf("tasks/result of the task whose result was dropped: %+v (%v)", content, err)
	}
	if err := json.Unmarshal(c.taskResultContent(t, second), &content); err != nil || len(content) != 1 || !strings.Contains(content[0].Text, "second") {
		t.Errorf("tasks/result of the newest task: %+v (%v)", content, err)
	}
}

// TestTasksStatusToOwner checks that notifications/tasks/status, which
// mcp-go sends to every session, reaches the task's owner only: another
// principal does not hear of the task.
func TestTasksStatusToOwner(t *testing.T) {
	s := setup(t)
	const aliceToken, bobToken = "alice-0123456789abcdef0123456789", "bob-0123456789abcdef0123456789ab"
	for _, mode := range []string{modeSSE, modeStateful} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tg := startTarget(t, s, mode, "--tasks", "--auth-token-file", tokenFile(t, aliceToken, bobToken))
			alice := tg.as(aliceToken).connectProtocol(t, tasksProtocol)
			bob := tg.as(bobToken).connectProtocol(t, tasksProtocol)
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			defer cancel()
			// mcp-go now and then loses a notification that comes as one of
			// the session's requests ends (transport.TestTaskStatusOnlyToOwner),
			// so alice runs tasks until she hears of one.
			for tries := 0; alice.heardOf(mcp.MethodNotificationTasksStatus) == 0; tries++ {
				if tries == 5 {
					t.Fatalf("alice heard nothing of her %d tasks' ends", tries)
				}
				id := alice.newTask(t, "'hers'")
				alice.pollTask(t, id, func(task mcp.Task) bool { return task.Status.IsTerminal() })
				for range 100 {
					if alice.heardOf(mcp.MethodNotificationTasksStatus) > 0 {
						break
					}
					if err := alice.Ping(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Bob's session was sent it as alice's was: it would precede the
			// answer to his ping.
			if err := bob.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if n := bob.heardOf(mcp.MethodNotificationTasksStatus); n != 0 {
				t.Errorf("bob heard of %d status of alice's task", n)
			}
		})
	}
}
