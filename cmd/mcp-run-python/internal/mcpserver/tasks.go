package mcpserver

// MCP tasks (DESIGN 1.5): with --tasks, run_python_code is task-capable
// (execution.taskSupport "optional"). A tools/call whose params carry
// "task" gets its task at once; tasks/get polls it, with the call's latest
// progress message as its statusMessage; tasks/result returns what the
// plain call would have; tasks/list lists the caller's own; tasks/cancel
// cancels the call's context, so that the supervisor interrupts the code
// and kills its worker after --grace, as at the time limit.
//
// mcp-go v1.2.1 carries the protocol: only its handlers can answer a
// task-augmented tools/call and the tasks/* methods, and nothing in its API
// lets another store answer them. Its own store does not do what tasks need
// here, so the front end keeps its own (taskStore), which decides, and uses
// mcp-go's hooks to steer mcp-go's, which only carries:
//
//   - mcp-go runs the tool on the context of the tools/call, which it
//     cancels as soon as it has answered with the task: the code would be
//     cancelled at once. The run detaches from it (runTask).
//   - Its isolation is per MCP session only, and a request without one (the
//     stateless transport, protocol 2026-07-28) sees every task. Here a task
//     belongs to its owner as Python sessions do (identity.Of: the
//     principal, or the MCP session without authentication) and to its MCP
//     session; a request with neither gets no task, nor does one of
//     protocol 2026-07-28, whose tasks/result mcp-go lacks; a task id
//     that is not the caller's is answered as unknown (the before hooks
//     send mcp-go looking for the id "").
//   - It bounds running tasks server-wide only, and counts a cancelled one
//     as over while its code still runs; here each owner has at most
//     TaskOptions.PerOwner tasks, running or kept.
//   - It keeps a task for the ttl the client asks, from its creation, and
//     cancels it then even if it runs; without a ttl, forever. Here a task
//     is kept for TaskOptions.Retention after it ends, or until the ttl the
//     client asked runs out if that comes first (cancelling a run that
//     outlives it, as the protocol allows), and mcp-go's copy, which holds
//     no result (tasks/result reads this store's), is let go a while later
//     (carrierTTL).
//   - It keeps every result for as long as it keeps its task. Here the
//     results of ended tasks are bounded server-wide, in bytes
//     (TaskOptions.ResultsLimit) and in number (TaskOptions.MaxResults):
//     past either the oldest ended task's result is dropped, and its
//     tasks/get and tasks/result say so. Owners per MCP session, each with
//     TaskOptions.PerOwner tasks, would otherwise keep gigabytes.
//   - Its tasks/get knows no progress: the after hooks answer from this
//     store.
//
// What stays of mcp-go's: when a task ends, or is cancelled, mcp-go sends
// notifications/tasks/status to every initialized session, not only its
// owner's (sendTaskStatusNotification), with no hook; the transport drops it
// on the stream of any session that Tasks.SessionOwns says is not the
// task's. The task's log lines are not sent: its tools/call has been
// answered, and there is no stream left for them.

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// TaskOptions turns tasks on (--tasks) and bounds them.
type TaskOptions struct {
	// PerOwner is how many tasks, running or kept after their end, one
	// owner may have; 0 for no limit.
	PerOwner int
	// Retention is how long a task, and its result, is kept after it ends.
	Retention time.Duration
	// MaxRun bounds a task's run: the longest a call can take (its wait for
	// a worker, its time limit, its grace), with a margin. A task still
	// running then is cancelled; mcp-go forgets its tasks by a time fixed
	// at their creation (carrierTTL), which must come after the end.
	MaxRun time.Duration
	// ResultsLimit bounds the bytes (as JSON) of the results kept of
	// ended tasks, server-wide; 0 for no limit.
	ResultsLimit int64
	// MaxResults bounds how many results of ended tasks are kept,
	// server-wide; 0 for no limit.
	MaxResults int
}

// The flags of TaskOptions.ResultsLimit and MaxResults, which a dropped
// result names.
const (
	resultsLimitFlag = "--task-results-limit"
	maxResultsFlag   = "--max-task-results"
)

// defaultTaskMaxRun is TaskOptions.MaxRun when it is not set.
const defaultTaskMaxRun = 24 * time.Hour

// taskPollInterval is the poll interval tasks suggest: progress ticks once a
// second while code runs.
const taskPollInterval = 1000 // ms

// Why a task's call was cancelled, which its result says.
var (
	errTaskCancelled = errors.New("the task was cancelled (tasks/cancel)")
	errTaskTooLong   = errors.New("the task ran too long")
	errTaskExpired   = errors.New("the task's ttl ran out")
)

// Why a task is refused, as the error of its tools/call.
var (
	errTaskNoOwner  = errors.New("tasks need an MCP session or an authenticated caller; call without \"task\"")
	errTooManyTasks = errors.New("too many tasks")
	// mcp-go v1.2.1 answers no tasks/result from 2026-07-28, whose tasks
	// changed, so such a task's result could not be fetched.
	errTaskModern = errors.New("tasks are offered up to protocol version 2025-11-25; call without \"task\"")
)

// task is one run_python_code call made as a task. Its fields after
// created are guarded by its store's mu.
type task struct {
	owner   identity.Principal
	session string          // MCP session id, "" for none
	call    *mcp.TaskParams // its tools/call's, see taskStore.byCall
	created time.Time

	ttl time.Duration // the client's, 0 for none: the task is let go by created+ttl

	id         string        // mcp-go's task id, once it has answered
	registered chan struct{} // closed once id is set, or t is gone
	status     mcp.TaskStatus
	message    string
	updated    time.Time
	finished   time.Time           // zero while the run goes on
	result     *mcp.CallToolResult // once finished, nil again once dropped
	dropped    bool                // its result was dropped for the bound on kept results
	kept       *list.Element       // in taskStore.kept while its result is
	size       int64               // of result, as JSON
	cancel     context.CancelCauseFunc
	expiry     *time.Timer // lets it go, from its ttl or its end
	gone       bool        // removed from the store
}

// taskStore keeps the tasks of one MCP server, and is what tasks/* answer
// from (see the top of this file for why not mcp-go's store).
type taskStore struct {
	opts TaskOptions

	mu      sync.Mutex
	byID    map[string]*task
	byCall  map[*mcp.TaskParams]*task // from a tools/call to its task; see hook
	byOwner map[identity.Principal]int
	kept    *list.List // the ended tasks whose results are kept, oldest first
	size    int64      // of their results
}

// newTaskStore returns an empty store.
func newTaskStore(opts TaskOptions) *taskStore {
	if opts.MaxRun <= 0 {
		opts.MaxRun = defaultTaskMaxRun
	}
	return &taskStore{
		opts:    opts,
		byID:    map[string]*task{},
		byCall:  map[*mcp.TaskParams]*task{},
		byOwner: map[identity.Principal]int{},
		kept:    list.New(),
	}
}

// carrierTTL is the ttl, in ms, of mcp-go's copy of a task: after the
// longest run and the retention, so that it outlives this store's.
func (s *taskStore) carrierTTL() int64 {
	return (s.opts.MaxRun + s.opts.Retention + time.Minute).Milliseconds()
}

// check reports whether owner may start one more task.
func (s *taskStore) check(owner identity.Principal) error {
	if owner == "" {
		return errTaskNoOwner
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.byOwner[owner]; s.opts.PerOwner > 0 && n >= s.opts.PerOwner {
		return fmt.Errorf("%w: %d running or kept, the limit per caller; a task is kept for %s after it ends", errTooManyTasks, n, s.opts.Retention)
	}
	return nil
}

// add records a new task of owner and session, made by the tools/call whose
// params.task is call, unless check would fail now. ttl is the client's, 0
// for none; it is bounded by the longest a task is kept, its longest run
// and the retention.
func (s *taskStore) add(owner identity.Principal, session string, call *mcp.TaskParams, ttl time.Duration) (*task, error) {
	if err := s.check(owner); err != nil {
		return nil, err
	}
	now := time.Now()
	t := &task{owner: owner, session: session, call: call, created: now, status: mcp.TaskStatusWorking, updated: now, registered: make(chan struct{})}
	if ttl > 0 {
		t.ttl = min(ttl, s.opts.MaxRun+s.opts.Retention)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.byOwner[owner]; s.opts.PerOwner > 0 && n >= s.opts.PerOwner { // another call got there first
		return nil, errTooManyTasks
	}
	s.byOwner[owner]++
	s.byCall[call] = t
	if t.ttl > 0 {
		t.expiry = time.AfterFunc(t.ttl, func() { s.remove(t, errTaskExpired) })
	}
	return t, nil
}

// ofCall returns the task of the tools/call whose params.task is call.
func (s *taskStore) ofCall(call *mcp.TaskParams) *task {
	if call == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byCall[call]
}

// register gives t the id mcp-go gave it, under which tasks/* find it.
func (s *taskStore) register(t *task, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.gone {
		return
	}
	t.id = id
	s.byID[id] = t
	close(t.registered)
}

// lookup returns the task id of owner and session, or nil: another's task
// is not there for it.
func (s *taskStore) lookup(owner identity.Principal, session, id string) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil || owner == "" || t.owner != owner || t.session != session {
		return nil
	}
	return t
}

// start records the cancellation of t's run; a task cancelled before its
// run started is cancelled at once.
func (s *taskStore) start(t *task, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.cancel = cancel
	if t.status == mcp.TaskStatusCancelled || t.gone {
		cancel(errTaskCancelled)
	}
}

// progress records the latest progress message of t's run.
func (s *taskStore) progress(t *task, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.finished.IsZero() && t.status == mcp.TaskStatusWorking {
		t.message, t.updated = message, time.Now()
	}
}

// finish records the end of t's run, with res (nil for a failure), keeps
// res within the bound on kept results, and lets t go Retention later, or
// at its ttl if that comes first.
func (s *taskStore) finish(t *task, res *mcp.CallToolResult, failure error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.finished.IsZero() {
		return
	}
	t.finished, t.updated, t.result = time.Now(), time.Now(), res
	switch {
	case t.status == mcp.TaskStatusCancelled:
		t.message = "cancelled; the code has stopped"
		if res != nil && !res.IsError {
			// The code ended as it was cancelled: the task's outcome stays
			// what tasks/result has been saying since the cancel.
			t.result = nil
		}
	case failure != nil:
		t.status, t.message = mcp.TaskStatusFailed, failure.Error()
	default:
		t.status, t.message = mcp.TaskStatusCompleted, ""
	}
	if t.gone {
		t.result = nil
		return
	}
	if t.expiry != nil {
		t.expiry.Stop()
	}
	t.expiry = time.AfterFunc(s.lifetime(t)-t.finished.Sub(t.created), func() { s.remove(t, errTaskExpired) })
	if t.result != nil {
		t.size = resultSize(t.result)
		t.kept = s.kept.PushBack(t)
		s.size += t.size
		s.bound()
	}
}

// lifetime returns how long from its creation t is kept: once it has
// ended, Retention past its end, or its ttl if that comes first; while it
// runs, its ttl, 0 for none. s.mu is held.
func (s *taskStore) lifetime(t *task) time.Duration {
	if t.finished.IsZero() {
		return t.ttl
	}
	kept := t.finished.Sub(t.created) + s.opts.Retention
	if t.ttl > 0 {
		kept = min(kept, t.ttl)
	}
	return kept
}

// resultSize is the size of res as JSON: what the bound on kept results
// counts, close to what it holds (its text, its structured content).
func resultSize(res *mcp.CallToolResult) int64 {
	b, err := json.Marshal(res)
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// bound drops the results of the oldest ended tasks until those kept are
// within ResultsLimit and MaxResults. s.mu is held.
func (s *taskStore) bound() {
	for s.kept.Len() > 0 && (s.opts.ResultsLimit > 0 && s.size > s.opts.ResultsLimit ||
		s.opts.MaxResults > 0 && s.kept.Len() > s.opts.MaxResults) {
		t := s.kept.Front().Value.(*task)
		s.unkeep(t)
		t.result, t.dropped = nil, true
		t.message = s.droppedMessage()
	}
}

// unkeep takes t's result out of the bound's count. s.mu is held.
func (s *taskStore) unkeep(t *task) {
	if t.kept == nil {
		return
	}
	s.kept.Remove(t.kept)
	s.size -= t.size
	t.kept = nil
}

// droppedMessage says why a task's result is gone, naming the flags of the
// bounds that are set.
func (s *taskStore) droppedMessage() string {
	var bounds []string
	if s.opts.ResultsLimit > 0 {
		bounds = append(bounds, resultsLimitFlag+" "+humanize.IBytes(uint64(s.opts.ResultsLimit)))
	}
	if s.opts.MaxResults > 0 {
		bounds = append(bounds, fmt.Sprintf("%s %d", maxResultsFlag, s.opts.MaxResults))
	}
	return "its result was dropped to keep the server's bound on the results of ended tasks (" +
		strings.Join(bounds, ", ") + "; the oldest go first)"
}

// requestCancel cancels t's run, unless it has ended: t is cancelled from
// now on, and its code stops as at its time limit.
func (s *taskStore) requestCancel(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.status != mcp.TaskStatusWorking || !t.finished.IsZero() {
		return
	}
	t.status, t.message, t.updated = mcp.TaskStatusCancelled, "cancelled; stopping the code", time.Now()
	if t.cancel != nil {
		t.cancel(errTaskCancelled)
	}
}

// remove lets t go, cancelling its run with cause if it still goes on.
func (s *taskStore) remove(t *task, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(t, cause)
}

// removeLocked is remove with s.mu held.
func (s *taskStore) removeLocked(t *task, cause error) {
	if t.gone {
		return
	}
	t.gone = true
	if t.id == "" {
		close(t.registered)
	}
	if t.cancel != nil && t.finished.IsZero() {
		t.cancel(cause)
	}
	if t.expiry != nil {
		t.expiry.Stop()
	}
	s.unkeep(t)
	if t.id != "" {
		delete(s.byID, t.id)
	}
	delete(s.byCall, t.call)
	if s.byOwner[t.owner]--; s.byOwner[t.owner] <= 0 {
		delete(s.byOwner, t.owner)
	}
}

// endSession lets go the tasks of an MCP session that ended: no one can
// reach them any more.
func (s *taskStore) endSession(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.byCall {
		if t.session == session {
			s.removeLocked(t, errTaskCancelled)
		}
	}
}

// wire returns t as the protocol shows it, from base, mcp-go's copy (whose
// id and creation time it keeps). Its ttl counts from its creation, as the
// protocol's does: while it runs, the client's, or unknown (null) without;
// once it has ended, until it is let go.
func (s *taskStore) wire(t *task, base mcp.Task) mcp.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	base.Status, base.StatusMessage = t.status, t.message
	base.LastUpdatedAt = t.updated.UTC().Format(time.RFC3339)
	base.TTL = nil
	if ttl := s.lifetime(t); ttl > 0 || !t.finished.IsZero() {
		ms := ttl.Milliseconds()
		base.TTL = &ms
	}
	poll := int64(taskPollInterval)
	base.PollInterval = &poll
	return base
}

// outcome returns the result of t for tasks/result: its call's; for one
// whose result was dropped, why; for a task cancelled, unless its call says
// more, that it was.
func (s *taskStore) outcome(t *task) *mcp.CallToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case t.result != nil:
		return t.result
	case t.dropped:
		return mcp.NewToolResultError("the task is " + string(t.status) + ", but " + s.droppedMessage())
	}
	return mcp.NewToolResultError("the call was cancelled: " + errTaskCancelled.Error())
}

// Tasks is what the transport may ask of a server's tasks (NewWithTasks).
type Tasks struct{ store *taskStore }

// SessionOwns reports whether the task id is the MCP session's, the one
// session that may hear of it (notifications/tasks/status, which mcp-go
// sends to every session). A task of no session, or not known (yet, or any
// more), is no session's; nil Tasks, a server without tasks, has none.
func (ts *Tasks) SessionOwns(session, id string) bool {
	if ts == nil || session == "" {
		return false
	}
	ts.store.mu.Lock()
	defer ts.store.mu.Unlock()
	t := ts.store.byID[id]
	return t != nil && t.session == session
}

// taskNotifier is the Notifier of a task's run: its tools/call has been
// answered, so nothing is sent; each progress message becomes the task's
// statusMessage.
type taskNotifier struct {
	store *taskStore
	task  *task
}

// Notify implements Notifier.
func (n taskNotifier) Notify(_ context.Context, msg []byte) error {
	var note struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &note) == nil && note.Method == string(mcp.MethodNotificationProgress) {
		n.store.progress(n.task, note.Params.Message)
	}
	return nil
}

// taskProgressToken asks the progress of a task's run, which taskNotifier
// turns into its statusMessage.
const taskProgressToken = "task"

// handler returns run_python_code's handler that runs the calls made as
// tasks (those the hooks recorded) in the background.
func (s *taskStore) handler(inner server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		t := s.ofCall(req.Params.Task)
		if t == nil {
			return inner(ctx, req)
		}
		return s.runTask(ctx, t, req, inner)
	}
}

// runTask runs the call of t, on mcp-go's goroutine for it, and returns an
// empty result for mcp-go's copy: tasks/result reads t's.
func (s *taskStore) runTask(ctx context.Context, t *task, req mcp.CallToolRequest, inner server.ToolHandlerFunc) (_ *mcp.CallToolResult, err error) {
	// mcp-go cancels ctx once it has answered the tools/call with the task;
	// the run keeps its values (its caller, its session) but not its end.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, s.opts.MaxRun, errTaskTooLong)
	defer stop()
	s.start(t, cancel)
	finished := false
	defer func() {
		if !finished { // a panic, which mcp-go's recovery turns into a failure
			s.finish(t, nil, errors.New("the call failed"))
		}
	}()
	ctx = WithNotifier(ctx, taskNotifier{store: s, task: t})
	meta := mcp.Meta{ProgressToken: taskProgressToken}
	if req.Params.Meta != nil {
		meta.AdditionalFields = req.Params.Meta.AdditionalFields
	}
	req.Params.Meta = &meta
	res, err := inner(ctx, req)
	finished = true
	s.finish(t, res, err)
	// mcp-go sends the task's status to every session once this returns:
	// its own session must know the task's id by then (Tasks.SessionOwns).
	select {
	case <-t.registered:
	case <-ctx.Done():
	}
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{}, nil
}

// install adds to hooks what steers mcp-go's tasks by this store, for the
// tool named tool: gate refuses tasks at shutdown, principals names a
// request's owner and MCP session.
func (s *taskStore) install(hooks *server.Hooks, tool string, gate *CallGate, principals principals) {
	caller := func(ctx context.Context) (identity.Principal, string) {
		return principals.of(ctx), principals.mcpSession(ctx)
	}
	// Refusals must be errors of the tools/call itself, which only this
	// hook can give. It reads the raw message again, so only one that may
	// ask for a task: a tools/call with code is large.
	hooks.AddOnRequestInitialization(func(ctx context.Context, _ any, message any) error {
		raw, ok := message.(json.RawMessage)
		if !ok || !bytes.Contains(raw, []byte(`"task"`)) {
			return nil
		}
		var call struct {
			Method string `json:"method"`
			Params struct {
				Name string          `json:"name"`
				Task json.RawMessage `json:"task"`
				Meta *mcp.Meta       `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &call) != nil || call.Method != string(mcp.MethodToolsCall) ||
			call.Params.Name != tool || len(call.Params.Task) == 0 || string(call.Params.Task) == "null" {
			return nil
		}
		if mcp.IsModernProtocol(call.Params.Meta.ProtocolVersion()) {
			return errTaskModern
		}
		select {
		case <-gate.Closed():
			return errRefused
		default:
		}
		owner, _ := caller(ctx)
		return s.check(owner)
	})
	// This hook decides: a call that the one above let through (its check
	// raced another call, or its message spelled "task" otherwise) but
	// that may not have a task runs as a plain call.
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, req *mcp.CallToolRequest) {
		if req.Params.Task == nil || req.Params.Name != tool {
			return
		}
		owner, session := caller(ctx)
		// A TaskParams of our own, mcp-go's for the task's ttl, ties the
		// call, which mcp-go copies, to its task: the handler and the after
		// hook get the same pointer.
		var asked time.Duration
		if ms := req.Params.Task.TTL; ms != nil && *ms > 0 {
			asked = time.Duration(min(*ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
		}
		ttl := s.carrierTTL()
		call := &mcp.TaskParams{TTL: &ttl}
		req.Params.Task = nil
		if server.IsModernRequest(ctx) {
			return
		}
		if _, err := s.add(owner, session, call, asked); err == nil {
			req.Params.Task = call
		}
	})
	hooks.AddAfterCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest, result any) {
		t := s.ofCall(req.Params.Task)
		created, ok := result.(*mcp.CreateTaskResult)
		if t == nil || !ok {
			return
		}
		s.register(t, created.Task.TaskId)
		created.Task = s.wire(t, created.Task)
	})
	hooks.AddOnError(func(_ context.Context, _ any, method mcp.MCPMethod, message any, _ error) {
		if req, ok := message.(*mcp.CallToolRequest); ok && method == mcp.MethodToolsCall {
			if t := s.ofCall(req.Params.Task); t != nil {
				s.remove(t, errTaskCancelled) // mcp-go made no task of it
			}
		}
	})
	// Another's task, or one let go, is sent looking for "", which mcp-go
	// answers as it answers an unknown id.
	find := func(ctx context.Context, id *string) *task {
		owner, session := caller(ctx)
		t := s.lookup(owner, session, *id)
		if t == nil {
			*id = ""
		}
		return t
	}
	hooks.AddBeforeGetTask(func(ctx context.Context, _ any, req *mcp.GetTaskRequest) { find(ctx, &req.Params.TaskId) })
	hooks.AddBeforeTaskResult(func(ctx context.Context, _ any, req *mcp.TaskResultRequest) { find(ctx, &req.Params.TaskId) })
	hooks.AddBeforeCancelTask(func(ctx context.Context, _ any, req *mcp.CancelTaskRequest) {
		if t := find(ctx, &req.Params.TaskId); t != nil {
			s.requestCancel(t)
		}
	})
	hooks.AddAfterGetTask(func(ctx context.Context, _ any, _ *mcp.GetTaskRequest, res *mcp.GetTaskResult) {
		owner, session := caller(ctx)
		if t := s.lookup(owner, session, res.TaskId); t != nil {
			res.Task = s.wire(t, res.Task)
		}
	})
	hooks.AddAfterCancelTask(func(ctx context.Context, _ any, _ *mcp.CancelTaskRequest, res *mcp.CancelTaskResult) {
		owner, session := caller(ctx)
		if t := s.lookup(owner, session, res.TaskId); t != nil {
			res.Task = s.wire(t, res.Task)
		}
	})
	hooks.AddAfterTaskResult(func(ctx context.Context, _ any, req *mcp.TaskResultRequest, res *mcp.TaskResultResult) {
		owner, session := caller(ctx)
		t := s.lookup(owner, session, req.Params.TaskId)
		if t == nil {
			return
		}
		out := s.outcome(t)
		res.Content, res.StructuredContent, res.IsError = out.Content, out.StructuredContent, out.IsError
	})
	hooks.AddAfterListTasks(func(ctx context.Context, _ any, _ *mcp.ListTasksRequest, res *mcp.ListTasksResult) {
		owner, session := caller(ctx)
		own := res.Tasks[:0]
		for _, listed := range res.Tasks {
			if t := s.lookup(owner, session, listed.TaskId); t != nil {
				own = append(own, s.wire(t, listed))
			}
		}
		res.Tasks = own
	})
	if principals.perSession {
		hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
			s.endSession(session.SessionID())
		})
	}
}

// offerTasks returns the tool filter that shows run_python_code's
// execution.taskSupport only to requests that can have tasks: with an owner,
// and of a protocol before 2026-07-28.
func offerTasks(tool string, principals principals) server.ToolFilterFunc {
	return func(ctx context.Context, listed []mcp.Tool) []mcp.Tool {
		if principals.of(ctx) != "" && !server.IsModernRequest(ctx) {
			return listed
		}
		for i := range listed {
			if listed[i].Name == tool {
				listed[i].Execution = nil
			}
		}
		return listed
	}
}
