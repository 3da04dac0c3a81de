package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// newTestTask adds a task of owner and session to s, as a tools/call does.
func newTestTask(t *testing.T, s *taskStore, owner identity.Principal, session, id string) *task {
	t.Helper()
	tk, err := s.add(owner, session, &mcp.TaskParams{}, 0)
	if err != nil {
		t.Fatalf("add(%q): %v", owner, err)
	}
	s.register(tk, id)
	return tk
}

// TestTaskStoreOwners checks that a task is found only by its owner, in its
// MCP session, and that no one owns the tasks of "".
func TestTaskStoreOwners(t *testing.T) {
	s := newTaskStore(TaskOptions{Retention: time.Minute})
	newTestTask(t, s, "alice", "s1", "a")
	tests := []struct {
		name    string
		owner   identity.Principal
		session string
		found   bool
	}{
		{"owner", "alice", "s1", true},
		{"another owner", "bob", "s1", false},
		{"another session", "alice", "s2", false},
		{"no owner", "", "s1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.lookup(tt.owner, tt.session, "a") != nil; got != tt.found {
				t.Errorf("lookup by %q in %q found %v, want %v", tt.owner, tt.session, got, tt.found)
			}
		})
	}
	if err := s.check(""); !errors.Is(err, errTaskNoOwner) {
		t.Errorf("check(\"\") = %v, want %v", err, errTaskNoOwner)
	}
}

// TestTaskStoreBound checks the bound per owner: it counts running and kept
// tasks, one owner's only, and frees a place when a task is let go.
func TestTaskStoreBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTaskStore(TaskOptions{PerOwner: 2, Retention: time.Minute})
		a := newTestTask(t, s, "alice", "s", "a1")
		newTestTask(t, s, "alice", "s", "a2")
		if err := s.check("alice"); !errors.Is(err, errTooManyTasks) {
			t.Fatalf("third task: %v, want %v", err, errTooManyTasks)
		}
		if err := s.check("bob"); err != nil {
			t.Errorf("another owner's first task: %v", err)
		}
		s.finish(a, mcp.NewToolResultText("done"), nil)
		if err := s.check("alice"); !errors.Is(err, errTooManyTasks) {
			t.Errorf("a finished task is kept, and counts: %v", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := s.check("alice"); err != nil {
			t.Errorf("after the retention: %v", err)
		}
	})
}

// TestTaskStoreRetention checks that a task is kept, result and all, for
// the retention after it ends, and not a moment less; a running task is
// kept however long it runs.
func TestTaskStoreRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTaskStore(TaskOptions{Retention: 10 * time.Minute})
		tk := newTestTask(t, s, "alice", "s", "a")
		time.Sleep(time.Hour)
		if s.lookup("alice", "s", "a") == nil {
			t.Fatal("a running task was let go")
		}
		s.finish(tk, mcp.NewToolResultText("done"), nil)
		wire := s.wire(tk, mcp.Task{TaskId: "a"})
		if wire.Status != mcp.TaskStatusCompleted || wire.TTL == nil || *wire.TTL != (time.Hour+10*time.Minute).Milliseconds() {
			t.Errorf("finished task = %+v, want completed with ttl 70 min", wire)
		}
		time.Sleep(10*time.Minute - time.Nanosecond)
		if s.lookup("alice", "s", "a") == nil {
			t.Fatal("let go before its retention")
		}
		if out := s.outcome(tk); out.IsError || len(out.Content) != 1 {
			t.Errorf("kept result = %+v", out)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if s.lookup("alice", "s", "a") != nil {
			t.Error("kept past its retention")
		}
	})
}

// TestTaskStoreCancel checks that a cancel cancels the run's context with
// its cause, marks the task cancelled at once, and that the task's result
// and retention start when the run returns.
func TestTaskStoreCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTaskStore(TaskOptions{Retention: time.Minute})
		tk := newTestTask(t, s, "alice", "s", "a")
		ctx, cancel := context.WithCancelCause(t.Context())
		s.start(tk, cancel)
		s.progress(tk, "running: 1s of 60s")
		if got := s.wire(tk, mcp.Task{}).StatusMessage; got != "running: 1s of 60s" {
			t.Errorf("statusMessage = %q, want the latest progress", got)
		}
		s.requestCancel(tk)
		if !errors.Is(context.Cause(ctx), errTaskCancelled) {
			t.Fatalf("run's context: cause %v, want %v", context.Cause(ctx), errTaskCancelled)
		}
		if w := s.wire(tk, mcp.Task{}); w.Status != mcp.TaskStatusCancelled || w.TTL != nil {
			t.Errorf("cancelled, running task = %+v", w)
		}
		if out := s.outcome(tk); !out.IsError {
			t.Errorf("result of a task cancelled whose code still runs = %+v, want an error", out)
		}
		s.progress(tk, "running: 2s of 60s") // the last tick, as the code stops
		time.Sleep(2 * time.Second)          // the grace
		s.finish(tk, mcp.NewToolResultError("the call was cancelled"), nil)
		w := s.wire(tk, mcp.Task{})
		if w.Status != mcp.TaskStatusCancelled || w.StatusMessage != "cancelled; the code has stopped" {
			t.Errorf("cancelled, stopped task = %+v", w)
		}
		s.requestCancel(tk) // a second cancel changes nothing
		if got := s.wire(tk, mcp.Task{}); got.Status != mcp.TaskStatusCancelled {
			t.Errorf("after a second cancel: %+v", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if s.lookup("alice", "s", "a") != nil {
			t.Error("kept past its retention")
		}
	})
}

// TestTaskStoreResultsBound checks the server-wide bound on kept results:
// past its bytes or its count the oldest ended task's result is dropped,
// whoever owns it, and its tasks/get and tasks/result say so, naming the
// flag; a result let go with its task leaves the bound's count.
func TestTaskStoreResultsBound(t *testing.T) {
	text := strings.Repeat("x", 1000)
	size := resultSize(mcp.NewToolResultText(text))
	tests := []struct {
		name  string
		opts  TaskOptions
		flag  string
		kept  int // of 4, the newest
		total int64
	}{
		{"bytes", TaskOptions{ResultsLimit: 2*size + size/2}, resultsLimitFlag, 2, 2 * size},
		{"count", TaskOptions{MaxResults: 3}, maxResultsFlag, 3, 3 * size},
		{"no bound", TaskOptions{}, "", 4, 4 * size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.opts.Retention = time.Minute
				s := newTaskStore(tt.opts)
				var tasks []*task
				for i, owner := range []identity.Principal{"alice", "bob", "alice", "bob"} {
					tk := newTestTask(t, s, owner, string(owner), string(rune('a'+i)))
					s.finish(tk, mcp.NewToolResultText(text), nil)
					tasks = append(tasks, tk)
					time.Sleep(time.Second)
				}
				for i, tk := range tasks {
					w, out := s.wire(tk, mcp.Task{}), s.outcome(tk)
					if i >= len(tasks)-tt.kept {
						if out.IsError || w.StatusMessage != "" {
							t.Errorf("task %d, within the bound: %+v, %+v", i, w, out)
						}
						continue
					}
					msg := mcp.GetTextFromContent(out.Content[0])
					if w.Status != mcp.TaskStatusCompleted || !strings.Contains(w.StatusMessage, tt.flag) || !out.IsError || !strings.Contains(msg, "result was dropped") || !strings.Contains(msg, tt.flag) {
						t.Errorf("task %d, past the bound: %+v, %q; want completed, its result dropped, naming %s", i, w, msg, tt.flag)
					}
				}
				if n, size := keptResults(s); size != tt.total || n != tt.kept {
					t.Errorf("kept %d results, %d bytes; want %d, %d", n, size, tt.kept, tt.total)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if n, size := keptResults(s); size != 0 || n != 0 {
					t.Errorf("after the retention: %d results, %d bytes kept", n, size)
				}
			})
		})
	}
}

// keptResults returns how many results s keeps for the bound, and their
// bytes.
func keptResults(s *taskStore) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept.Len(), s.size
}

// TestTaskStoreTTL checks that a task is let go by the ttl its client
// asked, from its creation, or the retention after its end if that comes
// first, that a run outliving its ttl is cancelled, and that tasks/get
// shows the ttl, the client's while it runs.
func TestTaskStoreTTL(t *testing.T) {
	const retention = 10 * time.Minute
	tests := []struct {
		name    string
		ttl     time.Duration
		run     time.Duration // until it ends; 0: it outlives its ttl
		wantTTL time.Duration // once it has ended
	}{
		{"ttl before the retention", 2 * time.Minute, time.Minute, 2 * time.Minute},
		{"retention before the ttl", time.Hour, time.Minute, time.Minute + retention},
		{"no ttl", 0, time.Minute, time.Minute + retention},
		{"run outlives its ttl", 30 * time.Second, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTaskStore(TaskOptions{Retention: retention, MaxRun: 2 * time.Hour})
				tk, err := s.add("alice", "s", &mcp.TaskParams{}, tt.ttl)
				if err != nil {
					t.Fatal(err)
				}
				s.register(tk, "a")
				ctx, cancel := context.WithCancelCause(t.Context())
				s.start(tk, cancel)
				w := s.wire(tk, mcp.Task{})
				if (tt.ttl == 0) != (w.TTL == nil) || w.TTL != nil && *w.TTL != tt.ttl.Milliseconds() {
					t.Errorf("running task's ttl = %v, want %v (none for 0)", w.TTL, tt.ttl)
				}
				if tt.run == 0 {
					time.Sleep(tt.ttl)
					synctest.Wait()
					if s.lookup("alice", "s", "a") != nil || !errors.Is(context.Cause(ctx), errTaskExpired) {
						t.Errorf("a run past its ttl: kept %v, cause %v; want let go, cancelled", s.lookup("alice", "s", "a") != nil, context.Cause(ctx))
					}
					return
				}
				time.Sleep(tt.run)
				s.finish(tk, mcp.NewToolResultText("done"), nil)
				if w := s.wire(tk, mcp.Task{}); w.TTL == nil || *w.TTL != tt.wantTTL.Milliseconds() {
					t.Errorf("ended task's ttl = %v, want %v", w.TTL, tt.wantTTL)
				}
				time.Sleep(tt.wantTTL - tt.run - time.Nanosecond)
				if s.lookup("alice", "s", "a") == nil {
					t.Fatal("let go before its ttl")
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if s.lookup("alice", "s", "a") != nil {
					t.Error("kept past its ttl")
				}
			})
		})
	}
}

// TestTaskStoreCancelRace checks a cancel that comes as the code ends: the
// task stays cancelled, and tasks/result says so before the run returns
// and after, even when the code got to succeed.
func TestTaskStoreCancelRace(t *testing.T) {
	s := newTaskStore(TaskOptions{Retention: time.Minute})
	tk := newTestTask(t, s, "alice", "s", "a")
	s.start(tk, func(error) {})
	s.requestCancel(tk)
	before := s.outcome(tk)
	s.finish(tk, mcp.NewToolResultText("<status>success</status>"), nil)
	after := s.outcome(tk)
	if w := s.wire(tk, mcp.Task{}); w.Status != mcp.TaskStatusCancelled || !before.IsError || !after.IsError {
		t.Errorf("cancelled as it succeeded: %s, result before its end %+v, after %+v; want cancelled, an error both times", w.Status, before, after)
	}
}

// TestTaskStoreSessionEnd checks that the tasks of an MCP session that
// ended are let go, and their runs cancelled.
func TestTaskStoreSessionEnd(t *testing.T) {
	s := newTaskStore(TaskOptions{Retention: time.Minute})
	tk := newTestTask(t, s, "s1", "s1", "a")
	other := newTestTask(t, s, "s2", "s2", "b")
	ctx, cancel := context.WithCancelCause(t.Context())
	s.start(tk, cancel)
	s.endSession("s1")
	if s.lookup("s1", "s1", "a") != nil || ctx.Err() == nil {
		t.Error("the task of an ended session is kept, or runs on")
	}
	if s.lookup("s2", "s2", "b") != other {
		t.Error("another session's task was let go")
	}
}

// taskProgressRunner is a FakeRunner whose calls report one progress event
// before they run.
type taskProgressRunner struct{ mcptest.FakeRunner }

// Run reports progress, then runs as FakeRunner.
func (r *taskProgressRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	if req.OnProgress != nil {
		req.OnProgress(supervisor.ProgressEvent{Phase: supervisor.PhaseRunning, Spent: time.Second, Limit: time.Minute})
	}
	return r.FakeRunner.Run(ctx, req)
}

// taskWire is what the tests read of a task on the wire.
type taskWire struct {
	ID     int `json:"id"`
	Result struct {
		Task              mcp.Task        `json:"task"`
		Tasks             []mcp.Task      `json:"tasks"`
		Content           json.RawMessage `json:"content"`
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	} `json:"result"`
	// Got is the result of tasks/get and tasks/cancel: a task.
	Got   mcp.Task `json:"-"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// exchange sends msg and decodes the answer to it, skipping notifications.
func (s *rawStdio) exchange(msg string) taskWire {
	s.t.Helper()
	s.send(msg)
	return s.answer()
}

// answerTo decodes the answer to the request id, skipping notifications and
// other answers.
func (s *rawStdio) answerTo(id int) taskWire {
	s.t.Helper()
	for {
		if w := s.answer(); w.ID == id {
			return w
		}
	}
}

// answer decodes the next answer, skipping notifications.
func (s *rawStdio) answer() taskWire {
	s.t.Helper()
	for {
		line := s.recv()
		if !strings.Contains(line, `"id"`) {
			continue
		}
		var w taskWire
		var raw struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			s.t.Fatalf("decode %s: %v", line, err)
		}
		if json.Unmarshal([]byte(line), &raw) == nil && raw.Result != nil {
			_ = json.Unmarshal(raw.Result, &w.Got) // not every result is a task
		}
		return w
	}
}

// TestTasksOverStdio runs tasks through mcp-go's server: a task's id comes
// at once, tasks/get shows its progress, tasks/result gives the plain
// call's result, tasks/list the caller's tasks, a cancel cancels the run,
// unknown ids are unknown, and the bound is a clear error.
func TestTasksOverStdio(t *testing.T) {
	blocker := mcptest.NewBlocker()
	o := testOptions(&taskProgressRunner{mcptest.FakeRunner{Block: blocker.Block}})
	o.Tasks = &TaskOptions{PerOwner: 2, Retention: time.Minute}
	s := newRawStdio(t, o)
	s.exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	plain := s.exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"print(1)"}}}`)

	created := s.exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"print(1)"},"task":{"ttl":50000}}}`)
	id := created.Result.Task.TaskId
	if status := created.Result.Task.Status; created.Error != nil || id == "" || (status != mcp.TaskStatusWorking && status != mcp.TaskStatusCompleted) {
		t.Fatalf("task-augmented call: %+v", created)
	}
	if ttl := created.Result.Task.TTL; ttl == nil || *ttl != 50000 {
		t.Errorf("ttl = %v, want the 50000 ms asked", ttl)
	}
	if p := created.Result.Task.PollInterval; p == nil || *p != taskPollInterval {
		t.Errorf("pollInterval = %v, want %d", p, taskPollInterval)
	}
	got := s.exchange(`{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	if got.Error != nil || string(got.Result.Content) != string(plain.Result.Content) || got.Result.IsError {
		t.Errorf("tasks/result = %s (error %v), want the plain call's %s", got.Result.Content, got.Error, plain.Result.Content)
	}
	done := s.exchange(`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"` + id + `"}}`)
	if done.Got.Status != mcp.TaskStatusCompleted || done.Got.TTL == nil {
		t.Errorf("tasks/get of a finished task = %+v", done.Got)
	}

	held := s.exchange(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` + mcptest.BlockCode + `"},"task":{}}}`)
	heldID := held.Result.Task.TaskId
	blocker.WaitStarted(t)
	// The progress goes out on its sender's goroutine: poll, as a client does.
	var working taskWire
	for deadline := time.Now().Add(mcptest.Timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if working = s.exchange(`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"` + heldID + `"}}`); working.Got.StatusMessage != "" {
			break
		}
	}
	if working.Got.Status != mcp.TaskStatusWorking || working.Got.StatusMessage != "running: 1s of 60s" {
		t.Errorf("tasks/get of a running task = %+v, want working with its progress", working.Got)
	}
	full := s.exchange(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"print(2)"},"task":{}}}`)
	if full.Error == nil || !strings.Contains(full.Error.Message, "too many tasks") {
		t.Errorf("a task past the bound: %+v, want a clear error", full)
	}
	listed := s.exchange(`{"jsonrpc":"2.0","id":10,"method":"tasks/list"}`)
	if len(listed.Result.Tasks) != 2 {
		t.Errorf("tasks/list = %+v, want the 2 tasks", listed.Result.Tasks)
	}
	cancelled := s.exchange(`{"jsonrpc":"2.0","id":11,"method":"tasks/cancel","params":{"taskId":"` + heldID + `"}}`)
	if cancelled.Error != nil || cancelled.Got.Status != mcp.TaskStatusCancelled {
		t.Errorf("tasks/cancel = %+v", cancelled)
	}
	if c := blocker.WaitCancelled(t); !errors.Is(c.Cause, errTaskCancelled) {
		t.Errorf("run cancelled by %v, want %v", c.Cause, errTaskCancelled)
	}
	modern := s.exchange(`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1"},"task":{},"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28"}}}`)
	if modern.Error == nil || !strings.Contains(modern.Error.Message, "2025-11-25") {
		t.Errorf("a task of protocol 2026-07-28: %+v, want a clear error", modern)
	}
	// A "task" spelled so that the first check misses it: past the bound,
	// the call runs as a plain one.
	escaped := s.exchange(`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1"},"\u0074ask":{}}}`)
	if escaped.Error != nil || escaped.Result.Task.TaskId != "" || !strings.Contains(string(escaped.Result.Content), "return_value") {
		t.Errorf("a task past the bound that the first check missed: %+v, want a plain call", escaped)
	}
	unknown := s.exchange(`{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{"taskId":"nope"}}`)
	if unknown.Error == nil || unknown.Error.Code != mcp.INVALID_PARAMS {
		t.Errorf("tasks/get of an unknown id = %+v, want invalid params", unknown)
	}
}

// TestTasksOffered checks that tools/list and initialize offer tasks only
// with TaskOptions, and only to a request with an owner.
func TestTasksOffered(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name       string
		tasks      bool
		perSession bool
		want       bool
	}{
		{"off", false, true, false},
		{"on", true, true, true},
		{"stateless", true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(&mcptest.FakeRunner{})
			if tt.tasks {
				o.Tasks = &TaskOptions{Retention: time.Minute}
			}
			s := New(o, tt.perSession, &server.Hooks{})
			c := server.NewInProcessSession("s1", nil)
			if err := s.RegisterSession(ctx, c); err != nil {
				t.Fatal(err)
			}
			sctx := s.WithContext(ctx, c)
			res := s.HandleMessage(sctx, json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"taskSupport":"optional"`); got != tt.want {
				t.Errorf("tools/list offers tasks: %v, want %v: %s", got, tt.want, b)
			}
		})
	}
}

// TestTaskEndsAtShutdown checks that a running task counts against the call
// gate: the shutdown cancels its run, its result says why, and no new task
// is taken.
func TestTaskEndsAtShutdown(t *testing.T) {
	blocker := mcptest.NewBlocker()
	o := testOptions(&mcptest.FakeRunner{Block: blocker.Block})
	o.Calls = NewCallGate(0, mcptest.Timeout)
	o.Tasks = &TaskOptions{Retention: time.Minute}
	s := newRawStdio(t, o)
	s.exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	id := s.exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"` + mcptest.BlockCode + `"},"task":{}}}`).Result.Task.TaskId
	blocker.WaitStarted(t)
	if !o.Calls.Shutdown(zap.NewNop()) {
		t.Error("the shutdown did not see the task's run end")
	}
	if c := blocker.WaitCancelled(t); !errors.Is(c.Cause, ErrShuttingDown) {
		t.Errorf("run cancelled by %v, want %v", c.Cause, ErrShuttingDown)
	}
	got := s.exchange(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	if !got.Result.IsError || !strings.Contains(string(got.Result.Content), "shutting down") {
		t.Errorf("tasks/result of a task the shutdown ended = %+v", got)
	}
	refused := s.exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1"},"task":{}}}`)
	if refused.Error == nil || !strings.Contains(refused.Error.Message, "shutting down") {
		t.Errorf("a task during the shutdown: %+v, want refused", refused)
	}
}

// TestTasksCancelRace cancels tasks as they end, many at once: each ends
// either completed, with its result, or cancelled, with an error, and says
// the same each time it is asked.
func TestTasksCancelRace(t *testing.T) {
	const n = 200
	o := testOptions(&mcptest.FakeRunner{})
	o.Tasks = &TaskOptions{Retention: time.Minute}
	s := newRawStdio(t, o)
	s.exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ids := make([]string, n)
	for i := range ids {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"1"},"task":{}}}`, 100+i))
		ids[i] = s.answerTo(100 + i).Result.Task.TaskId
		// Not waiting for the answer: the cancel races the run.
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/cancel","params":{"taskId":%q}}`, 1000+i, ids[i]))
	}
	for i, id := range ids {
		var got []taskWire
		for j := range 2 {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/result","params":{"taskId":%q}}`, 2000+2*i+j, id))
			got = append(got, s.answerTo(2000+2*i+j))
		}
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q}}`, 3000+i, id))
		task := s.answerTo(3000 + i).Got
		ok := got[0].Error == nil && string(got[0].Result.Content) == string(got[1].Result.Content) && got[0].Result.IsError == got[1].Result.IsError
		switch task.Status {
		case mcp.TaskStatusCompleted:
			ok = ok && !got[0].Result.IsError && strings.Contains(string(got[0].Result.Content), "return_value")
		case mcp.TaskStatusCancelled:
			ok = ok && got[0].Result.IsError
		default:
			ok = false
		}
		if !ok {
			t.Errorf("task %d: %s (%q), results %s (error %v, %v) then %s (error %v)", i, task.Status, task.StatusMessage,
				got[0].Result.Content, got[0].Result.IsError, got[0].Error, got[1].Result.Content, got[1].Result.IsError)
		}
	}
}
