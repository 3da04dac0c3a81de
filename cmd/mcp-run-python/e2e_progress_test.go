package main_test

// End-to-end tests of progress notifications (DESIGN 1.5): a tools/call
// with a progressToken hears what it is doing, over every transport.
//
//	go test ./cmd/mcp-run-python/ -run TestProgress -count=1 -v

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// progressNote is one notifications/progress as the client got it.
type progressNote struct {
	progress float64
	total    float64 // 0: none
	message  string
}

// progressLog keeps a client's progress notifications, by token.
type progressLog struct {
	mu    sync.Mutex
	notes map[string][]progressNote
}

// listen makes c record its progress notifications in l.
func (l *progressLog) listen(t *testing.T, c *e2eClient) {
	l.notes = map[string][]progressNote{}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		f := n.Params.AdditionalFields
		token := fmt.Sprint(f["progressToken"])
		progress, ok := f["progress"].(float64)
		total, _ := f["total"].(float64)
		message, _ := f["message"].(string)
		if !ok || message == "" {
			t.Errorf("progress notification %v: want a progress and a message", f)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.notes[token] = append(l.notes[token], progressNote{progress, total, message})
	})
}

// of returns the notes of token so far.
func (l *progressLog) of(token string) []progressNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.notes[token])
}

// count returns how many notes came, for any token.
func (l *progressLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, notes := range l.notes {
		n += len(notes)
	}
	return n
}

// callWithToken runs code with progressToken token ("" for none) and
// returns the result's text and the notes of token that came before it.
func callWithToken(t *testing.T, c *e2eClient, l *progressLog, token, code string) (string, []progressNote) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": code}}}
	if token != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	res, err := c.CallTool(ctx, req)
	// Taken at once: what arrived before the result.
	notes := l.of(token)
	if err != nil {
		t.Fatalf("tools/call with token %q: %v", token, err)
	}
	return resultText(t, res), notes
}

// checkNotes fails unless the notes' progress grows strictly and every
// total is the 60 s time limit.
func checkNotes(t *testing.T, notes []progressNote) {
	t.Helper()
	for i, n := range notes {
		if n.total != 60 {
			t.Errorf("note %q: total %v, want the time limit, 60", n.message, n.total)
		}
		if i > 0 && n.progress <= notes[i-1].progress {
			t.Errorf("progress %v (%q) after %v (%q): want it to grow", n.progress, n.message, notes[i-1].progress, notes[i-1].message)
		}
	}
}

// phases returns the notes' messages but those of the waits before a call
// gets its worker, which depend on the pool's state.
func phases(notes []progressNote) []string {
	var out []string
	for _, n := range notes {
		if !strings.HasPrefix(n.message, "preparing: ") && !strings.HasPrefix(n.message, "queued: ") {
			out = append(out, n.message)
		}
	}
	return out
}

var runningMessage = regexp.MustCompile(`^running: (\d+)s of 60s$`)

func TestProgress(t *testing.T) {
	s := setup(t)
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			repo := packageRepo(t)
			srv, _ := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
			tg := startTarget(t, s, mode, "--timeout", "60s", "--workers", "1", "--index-url", srv.URL+"/simple/")
			c := tg.connect(t)
			var l progressLog
			l.listen(t, c)

			t.Run("running_ticks", func(t *testing.T) {
				// A second call, sent while the first runs, waits for the
				// one worker.
				queued := make(chan []progressNote, 1)
				go func() {
					for !slices.ContainsFunc(l.of("ticks"), func(n progressNote) bool { return strings.HasPrefix(n.message, "running: ") }) {
						time.Sleep(10 * time.Millisecond)
					}
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					defer cancel()
					req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": "2"}}}
					req.Params.Meta = &mcp.Meta{ProgressToken: "queued"}
					if _, err := c.CallTool(ctx, req); err != nil {
						t.Errorf("the waiting call: %v", err)
					}
					queued <- l.of("queued")
				}()
				text, notes := callWithToken(t, c, &l, "ticks", "import time\ntime.sleep(2.5)\n'done'")
				if want := "<status>success</status>\n<return_value>\ndone\n</return_value>"; text != want {
					t.Errorf("result %q, want %q", text, want)
				}
				checkNotes(t, notes)
				t.Logf("notes: %v", notes)
				var secs []string
				for _, m := range phases(notes) {
					got := runningMessage.FindStringSubmatch(m)
					if got == nil {
						t.Errorf("message %q, want running: Ns of 60s", m)
						continue
					}
					secs = append(secs, got[1])
				}
				// A tick at the start and one a second: 0s, 1s, 2s (3s when
				// the machine is slow).
				if len(secs) < 3 || secs[0] != "0" || secs[1] != "1" || secs[2] != "2" {
					t.Errorf("running ticks at %v s, want 0, 1, 2", secs)
				}
				waited := <-queued
				checkNotes(t, waited)
				t.Logf("the waiting call's notes: %v", waited)
				if len(waited) == 0 || waited[0].message != "queued: 1st in line for a worker" {
					t.Errorf("the waiting call heard %v, want its place in the queue first", waited)
				}
				// Nothing after the results: not a late tick either.
				before := l.count()
				time.Sleep(1500 * time.Millisecond)
				if after := l.count(); after != before {
					t.Errorf("%d progress notifications after the results", after-before)
				}
			})

			t.Run("without_token", func(t *testing.T) {
				before := l.count()
				text, _ := callWithToken(t, c, &l, "", "import time\ntime.sleep(1.2)\n1")
				if want := "<status>success</status>\n<return_value>\n1\n</return_value>"; text != want {
					t.Errorf("result %q, want %q", text, want)
				}
				if after := l.count(); after != before {
					t.Errorf("%d progress notifications for a call without a token", after-before)
				}
			})

			t.Run("packages", func(t *testing.T) {
				text, notes := callWithToken(t, c, &l, "packages", script(`"greet>=2"`, "import greet\ngreet.__version__"))
				if want := "<status>success</status>\n<dependencies>[\"greet>=2\"]</dependencies>\n<return_value>\n2.0\n</return_value>"; text != want {
					t.Errorf("result %q, want %q", text, want)
				}
				checkNotes(t, notes)
				t.Logf("notes: %v", notes)
				got := phases(notes)
				// Each phase once at least, in order: changes of phase are
				// never dropped, while a phase's own notes may be.
				wantPrefixes := []string{"resolving greet>=2", "downloading ", "installing ", "running: "}
				i := 0
				for _, m := range got {
					if i < len(wantPrefixes) && strings.HasPrefix(m, wantPrefixes[i]) {
						i++
					}
				}
				if i != len(wantPrefixes) {
					t.Errorf("messages %q, want phases starting %q in order", got, wantPrefixes)
				}
				for _, m := range got {
					if strings.HasPrefix(m, "downloading ") && !regexp.MustCompile(`^downloading \S+\.whl: [0-9.]+ k?B of [0-9.]+ k?B$`).MatchString(m) {
						t.Errorf("message %q, want the file with its bytes of its size", m)
					}
					if strings.HasPrefix(m, "installing ") && !strings.Contains(m, "greet") {
						t.Errorf("message %q, want the packages installed", m)
					}
				}
			})

			t.Run("bounds", func(t *testing.T) {
				longest := strings.Repeat("t", 256)
				text, notes := callWithToken(t, c, &l, longest, "1")
				if want := "<status>success</status>\n<return_value>\n1\n</return_value>"; text != want || len(notes) == 0 {
					t.Errorf("call with a 256-byte token: result %q after %d notes, want %q after some", text, len(notes), want)
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				for _, tc := range []struct {
					name  string
					token any
					args  map[string]any
					want  string
				}{
					{"long token", longest + "x", nil, "more than the 256 a progress token may have"},
					{"boolean token", true, nil, "expected a string or an integer, got boolean"},
					{"unknown argument", nil, map[string]any{"padding": strings.Repeat("p", 100<<10)}, "more than the 65536 a call may carry beyond its code"},
				} {
					args := map[string]any{"python_code": "1"}
					maps.Copy(args, tc.args)
					req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: args}}
					if tc.token != nil {
						req.Params.Meta = &mcp.Meta{ProgressToken: tc.token}
					}
					if _, err := c.CallTool(ctx, req); err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
					}
				}
				c.expectWorks(t)
			})

			t.Run("forged_notifications", func(t *testing.T) {
				// Over stdio the one client forges ids it did not use; over
				// HTTP a second client forges the first's ids too.
				forger := c
				ids := []any{1e300, strings.Repeat("9", 64<<10), "x", nil, true, map[string]any{}, []any{1}}
				if mode != modeStdio {
					forger = tg.connect(t)
					for id := range 30 {
						ids = append(ids, id, strconv.Itoa(id))
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				result := make(chan string, 1)
				go func() {
					req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": "import time\ntime.sleep(2)\n'intact'"}}}
					req.Params.Meta = &mcp.Meta{ProgressToken: "victim"}
					res, err := c.CallTool(ctx, req)
					if err != nil {
						result <- err.Error()
						return
					}
					text, _ := onlyText(res)
					result <- text
				}()
				for !slices.ContainsFunc(l.of("victim"), func(n progressNote) bool { return strings.HasPrefix(n.message, "running: ") }) {
					time.Sleep(10 * time.Millisecond)
				}
				notify := func(method mcp.MCPMethod, params map[string]any) {
					err := forger.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
						Notification: mcp.Notification{Method: string(method), Params: mcp.NotificationParams{AdditionalFields: params}}})
					if err != nil {
						t.Fatalf("send %s: %v", method, err)
					}
				}
				notify(mcp.MethodNotificationProgress, map[string]any{"progressToken": "victim", "progress": 99, "message": "forged"})
				notify(mcp.MethodNotificationCancelled, nil)
				for _, id := range ids {
					notify(mcp.MethodNotificationCancelled, map[string]any{"requestId": id, "reason": "forged"})
				}
				if err := forger.Ping(ctx); err != nil {
					t.Fatalf("ping after the forged notifications: %v", err)
				}
				if text, want := <-result, "<status>success</status>\n<return_value>\nintact\n</return_value>"; text != want {
					t.Errorf("the call under forged notifications: %q, want %q", text, want)
				}
				if slices.ContainsFunc(l.of("victim"), func(n progressNote) bool { return n.message == "forged" }) {
					t.Errorf("a forged progress notification reached the caller: %v", l.of("victim"))
				}
				c.expectWorks(t)
				forger.expectWorks(t)
			})
		})
	}
}
