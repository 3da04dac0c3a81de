package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// sentNote is a progress notification as a fake transport got it.
type sentNote struct {
	at       time.Time
	token    any
	progress float64
	total    *float64
	message  string
}

// recordingNotifier keeps the progress notifications it is given; after
// failAfter of them (when > 0) it fails.
type recordingNotifier struct {
	t         *testing.T
	failAfter int

	mu    sync.Mutex
	notes []sentNote
	calls int
}

// Notify implements Notifier.
func (r *recordingNotifier) Notify(_ context.Context, msg []byte) error {
	r.t.Helper()
	var n struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			Token    any      `json:"progressToken"`
			Progress float64  `json:"progress"`
			Total    *float64 `json:"total"`
			Message  string   `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &n); err != nil {
		r.t.Errorf("notification %s: %v", msg, err)
	}
	if n.JSONRPC != "2.0" || n.Method != "notifications/progress" {
		r.t.Errorf("notification %s: want a notifications/progress", msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failAfter > 0 && r.calls > r.failAfter {
		return errors.New("client gone")
	}
	r.notes = append(r.notes, sentNote{time.Now(), n.Params.Token, n.Params.Progress, n.Params.Total, n.Params.Message})
	return nil
}

// sent returns the notifications kept so far.
func (r *recordingNotifier) sent() []sentNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentNote(nil), r.notes...)
}

// messages returns the messages of notes.
func messages(notes []sentNote) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = n.message
	}
	return out
}

// checkIncreasing fails unless progress grows strictly.
func checkIncreasing(t *testing.T, notes []sentNote) {
	t.Helper()
	for i := 1; i < len(notes); i++ {
		if notes[i].progress <= notes[i-1].progress {
			t.Errorf("progress %v then %v (%q, %q): want it to grow", notes[i-1].progress, notes[i].progress, notes[i-1].message, notes[i].message)
		}
	}
}

func running(spent time.Duration) supervisor.ProgressEvent {
	return supervisor.ProgressEvent{Phase: supervisor.PhaseRunning, Spent: spent, Limit: time.Minute}
}

func TestProgressSenderRateLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingNotifier{t: t}
		s := newProgressSender(t.Context(), rec, "tok", progressInterval, zap.NewNop())
		start := time.Now()
		// A chatty download: a chunk every 5 ms for 2 s.
		const size = 400 << 10
		for i := range 400 {
			s.event(supervisor.ProgressEvent{Phase: supervisor.PhaseDownloading, Spent: time.Since(start), File: "big.whl", Bytes: int64(i+1) << 10, Size: size})
			time.Sleep(5 * time.Millisecond)
		}
		synctest.Wait()
		s.close()
		notes := rec.sent()
		if max := int(2*time.Second/progressInterval) + 1; len(notes) > max || len(notes) < max-1 {
			t.Errorf("%d notifications in 2 s, want about %d: %q", len(notes), max, messages(notes))
		}
		for i := 1; i < len(notes); i++ {
			if gap := notes[i].at.Sub(notes[i-1].at); gap < progressInterval {
				t.Errorf("notifications %d and %d %s apart, want at least %s", i-1, i, gap, progressInterval)
			}
		}
		checkIncreasing(t, notes)
		// The latest wins: the last is the download's end.
		if got, want := notes[len(notes)-1].message, "downloading big.whl: 410 kB of 410 kB"; got != want {
			t.Errorf("last message %q, want %q", got, want)
		}
		for _, n := range notes {
			if n.token != "tok" || n.total != nil {
				t.Errorf("token %v total %v, want tok and none: no time limit given", n.token, n.total)
			}
		}
	})
}

func TestProgressSenderKeepsPhaseChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingNotifier{t: t}
		s := newProgressSender(t.Context(), rec, 7.0, progressInterval, zap.NewNop())
		evs := []supervisor.ProgressEvent{
			{Phase: supervisor.PhaseResolving, Packages: []string{"numpy"}},
			{Phase: supervisor.PhaseDownloading, File: "numpy.whl", Bytes: 1000, Size: 3000},
			{Phase: supervisor.PhaseDownloading, File: "numpy.whl", Bytes: 2000, Size: 3000},
			{Phase: supervisor.PhaseDownloading, File: "numpy.whl", Bytes: 3000, Size: 3000},
			{Phase: supervisor.PhaseInstalling, Packages: []string{"numpy"}},
			running(0),
		}
		for _, ev := range evs { // all within a millisecond
			ev.Limit = time.Minute
			s.event(ev)
		}
		synctest.Wait()
		time.Sleep(4 * progressInterval)
		synctest.Wait()
		s.event(running(time.Second))
		s.close()
		s.event(running(2 * time.Second)) // after close: dropped
		want := []string{
			"resolving numpy",
			"downloading numpy.whl: 3.0 kB of 3.0 kB",
			"installing numpy",
			"running: 0s of 60s",
			"running: 1s of 60s",
		}
		notes := rec.sent()
		got := messages(notes)
		if len(got) != len(want) {
			t.Fatalf("messages %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("message %d = %q, want %q", i, got[i], want[i])
			}
			if notes[i].token != 7.0 || notes[i].total == nil || *notes[i].total != 60 {
				t.Errorf("note %d: token %v total %v, want 7 and 60", i, notes[i].token, notes[i].total)
			}
		}
		// Spent stood still at 0 for four notes: each got a millisecond more.
		checkIncreasing(t, notes)
		if notes[3].progress != 0.004 || notes[4].progress != 1 {
			t.Errorf("progress %v, %v, want 0.004 and 1", notes[3].progress, notes[4].progress)
		}
	})
}

func TestProgressSenderCloseFlushesAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingNotifier{t: t}
		s := newProgressSender(t.Context(), rec, "tok", progressInterval, zap.NewNop())
		s.event(running(0))
		synctest.Wait()
		s.event(running(100 * time.Millisecond)) // waits for its turn
		s.event(supervisor.ProgressEvent{Phase: supervisor.PhaseQueued, Place: 2})
		before := time.Now()
		s.close()
		if waited := time.Since(before); waited != 0 {
			t.Errorf("close waited %s: it sends what is queued at once", waited)
		}
		got := messages(rec.sent())
		want := []string{"running: 0s", "running: 0s", "queued: 2nd in line for a worker"}
		if len(got) != len(want) {
			t.Fatalf("messages %q, want %q", got, want)
		}
		time.Sleep(time.Second)
		s.event(running(time.Second))
		synctest.Wait()
		if n := len(rec.sent()); n != len(want) {
			t.Errorf("%d notifications after close, want none", n-len(want))
		}
	})
}

func TestProgressSenderStopsWhenTheClientFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingNotifier{t: t, failAfter: 1}
		s := newProgressSender(t.Context(), rec, "tok", progressInterval, zap.NewNop())
		for i := range 5 {
			s.event(running(time.Duration(i) * time.Second))
			time.Sleep(time.Second)
		}
		s.close()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.calls != 2 {
			t.Errorf("%d notifications tried, want 2: none after the first failure", rec.calls)
		}
	})
}

// TestProgressSenderSixtySeconds counts what a call that runs into a 60 s
// time limit sends: a tick a second, and one at the start.
func TestProgressSenderSixtySeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingNotifier{t: t}
		s := newProgressSender(t.Context(), rec, "tok", progressInterval, zap.NewNop())
		for sec := range 60 {
			s.event(running(time.Duration(sec) * time.Second))
			time.Sleep(time.Second)
		}
		s.close()
		if n := len(rec.sent()); n != 60 {
			t.Errorf("%d notifications, want 60", n)
		}
	})
}

func TestProgressMessage(t *testing.T) {
	for _, tc := range []struct {
		ev   supervisor.ProgressEvent
		want string
	}{
		{supervisor.ProgressEvent{Phase: supervisor.PhasePreparing, Step: "making the Pyodide memory snapshot"}, "preparing: making the Pyodide memory snapshot"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseQueued, Place: 1}, "queued: 1st in line for a worker"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseQueued, Place: 12}, "queued: 12th in line for a worker"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseQueued, Place: 23}, "queued: 23rd in line for a worker"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseResolving, Packages: []string{"numpy", "pandas>=2"}}, "resolving numpy, pandas>=2"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseDownloading, File: "a.whl", Bytes: 1500}, "downloading a.whl: 1.5 kB"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseDownloading, File: "a.whl", Bytes: 0, Size: 2_000_000}, "downloading a.whl: 0 B of 2.0 MB"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseInstalling, Packages: []string{"numpy", "pandas"}}, "installing numpy, pandas"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseRunning, Spent: 3900 * time.Millisecond, Limit: time.Minute}, "running: 3s of 60s"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseRunning, Spent: time.Second, Limit: 1500 * time.Millisecond}, "running: 1s of 1.5s"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseRunning, Spent: 2 * time.Second}, "running: 2s"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseAsking, Asking: supervisor.AskingModel, Questions: 1, Asked: 3, AskLimit: 50}, "waiting for the model: 3 of 50"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseAsking, Asking: supervisor.AskingModel, Questions: 64, Asked: 64, AskLimit: 100}, "waiting for the model: 64 at once, 64 of 100"},
		{supervisor.ProgressEvent{Phase: supervisor.PhaseAsking, Asking: supervisor.AskingPerson, Questions: 1, Asked: 2}, "waiting for the person: 2"},
	} {
		if got := progressMessage(tc.ev); got != tc.want {
			t.Errorf("progressMessage(%+v) = %q, want %q", tc.ev, got, tc.want)
		}
	}
}

// progressRunner reports the phases of a call with packages, then runs it
// as mcptest.FakeRunner does.
type progressRunner struct{ mcptest.FakeRunner }

func (r *progressRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	if req.OnProgress != nil {
		for _, ev := range []supervisor.ProgressEvent{
			{Phase: supervisor.PhaseResolving, Packages: []string{"numpy"}},
			{Phase: supervisor.PhaseInstalling, Packages: []string{"numpy"}},
			{Phase: supervisor.PhaseRunning},
		} {
			ev.Limit = time.Minute
			req.OnProgress(ev)
		}
	}
	return r.FakeRunner.Run(ctx, req)
}

// TestCallProgress checks that a call with a progressToken has all of its
// progress notifications sent when the handler returns its result, and that
// one without a token has none.
func TestCallProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta string
		want []string
	}{
		{"token", `,"_meta":{"progressToken":"p-1"}`, []string{"resolving numpy", "installing numpy", "running: 0s of 60s"}},
		{"no token", ``, nil},
		{"other meta", `,"_meta":{"x":1}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingNotifier{t: t}
			srv := New(testOptions(&progressRunner{}), true, &server.Hooks{})
			ctx := WithNotifier(mcptest.Context(t), rec)
			srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			resp := srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":"x"}`+tc.meta+`}}`))
			if _, ok := resp.(mcp.JSONRPCResponse); !ok {
				t.Fatalf("tools/call answered %#v, want a result", resp)
			}
			notes := rec.sent()
			got := messages(notes)
			if len(got) != len(tc.want) {
				t.Fatalf("messages when the result came %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] || notes[i].token != "p-1" {
					t.Errorf("notification %d: %q with token %v, want %q with p-1", i, got[i], notes[i].token, tc.want[i])
				}
			}
		})
	}
}

// TestProgressTokenBound checks that a request whose progressToken is too
// long or not a string or integer is refused with an error naming the bound
// before its call runs, and that the tokens MCP allows still run.
func TestProgressTokenBound(t *testing.T) {
	long := strings.Repeat("t", maxProgressTokenBytes)
	for _, tc := range []struct {
		name string
		meta string
		want string // in the refusal; "" when the call runs
	}{
		{"string at the bound", `{"progressToken":"` + long + `"}`, ""},
		{"string past the bound", `{"progressToken":"` + long + `x"}`, "more than the 256 a progress token may have"},
		{"escaped past the bound", `{"progress\u0054oken":"` + long + `x"}`, "more than the 256"},
		{"7 MiB string", `{"progressToken":"` + strings.Repeat("t", 7<<20) + `"}`, "more than the 256"},
		{"integer", `{"progressToken":-42}`, ""},
		{"largest safe integer", `{"progressToken":9007199254740991}`, ""},
		{"integer past 2^53", `{"progressToken":9007199254740993}`, "at most 2^53-1"},
		{"fraction", `{"progressToken":1.5}`, "expected a string or an integer"},
		{"boolean", `{"progressToken":true}`, "expected a string or an integer, got boolean"},
		{"object", `{"progressToken":{"a":1}}`, "got object"},
		{"array", `{"progressToken":[1]}`, "got array"},
		{"null", `{"progressToken":null}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefusal(t, `"arguments":{"python_code":"x"},"_meta":`+tc.meta, tc.want)
		})
	}
}
