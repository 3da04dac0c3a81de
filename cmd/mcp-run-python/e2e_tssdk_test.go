package main_test

// End-to-end tests with the official MCP TypeScript SDK (npm
// @modelcontextprotocol/sdk): testdata/tssdk/client.ts drives progress,
// structured results and tasks (issue 28) through the SDK's own client, over
// each transport the SDK has (SSE is deprecated there, still shipped), against
// one server per transport; this test judges the line it prints.
//
//	go test ./cmd/mcp-run-python/ -run TestTypeScriptSDK -count=1 -v

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	// tssdkDir holds the script and its deno.lock, which pins the SDK's
	// dependencies (the SDK's version is in the script's imports). To move
	// to a newer SDK, change the version in the imports, delete the lock
	// file and run `deno check --no-config --lock=deno.lock client.ts` there:
	// deno writes the lock again.
	tssdkDir = "../../testdata/tssdk"
	// tssdkTimeout bounds one run of the script: about ten seconds, plus
	// deno's download of the SDK on a cold cache.
	tssdkTimeout = 2 * time.Minute
	// tssdkToken authenticates the stateless client: without a session,
	// tasks need a principal to own them.
	tssdkToken = "tssdk-0123456789abcdef0123456789ab"
)

// tsCall is a call's result as client.ts reports it.
type tsCall struct {
	IsError           bool            `json:"isError"`
	Text              string          `json:"text"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

// tsReport is the line client.ts prints. Each scenario's Error is what
// stopped it, if anything did.
type tsReport struct {
	Tool struct {
		OutputSchema bool   `json:"outputSchema"`
		TaskSupport  string `json:"taskSupport"`
	} `json:"tool"`
	Progress struct {
		Error string `json:"error"`
		Notes []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
			Message  string  `json:"message"`
		} `json:"notes"`
		Result tsCall `json:"result"`
	} `json:"progress"`
	Structured struct {
		Error string            `json:"error"`
		Calls map[string]tsCall `json:"calls"`
	} `json:"structured"`
	Task struct {
		Error          string   `json:"error"`
		TaskID         string   `json:"taskId"`
		CreatedMs      float64  `json:"createdMs"`
		Statuses       []string `json:"statuses"`
		StatusMessages []string `json:"statusMessages"`
		Result         tsCall   `json:"result"`
		Listed         []string `json:"listed"`
	} `json:"task"`
	Cancel struct {
		Error       string `json:"error"`
		Status      string `json:"status"`
		StreamError string `json:"streamError"`
	} `json:"cancel"`
	Ask struct {
		Error    string `json:"error"`
		Result   tsCall `json:"result"`
		Sampled  int    `json:"sampled"`
		Elicited int    `json:"elicited"`
	} `json:"ask"`
	Errors []string `json:"errors"`
}

// TestTypeScriptSDK runs client.ts against a --return-mode json --tasks
// --sampling --elicitation server on each transport: a call with onprogress
// hears increasing progress before its result, the SDK accepts every
// structuredContent against the listed outputSchema, a task the SDK starts
// by itself is polled to its result, another cancelled, and code's
// questions reach the SDK's sampling and elicitation handlers.
func TestTypeScriptSDK(t *testing.T) {
	s := setup(t)
	dir, err := filepath.Abs(tssdkDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			flags := []string{"--return-mode", "json", "--tasks", "--timeout", "60s", "--workers", "1", "--grace", taskGrace.String(), "--sampling", "--elicitation"}
			var args []string
			if mode == modeStateless {
				flags = append(flags, "--auth-token-file", tokenFile(t, tssdkToken))
				args = append(args, "--bearer", tssdkToken)
			}
			tg := startTarget(t, s, mode, flags...)
			switch mode {
			case modeStdio:
				args = append(append(append(args, "stdio", s.bin), tg.launch.args...), modeStdio)
			case modeSSE:
				args = append(args, "sse", tg.url+"/sse")
			default:
				args = append(args, "streamable-http", tg.url+"/mcp")
			}
			r, stderr := runTSClient(t, s, dir, args)
			if t.Failed() {
				return
			}
			// For stdio, the server's stderr is in the script's.
			if tg.stderr != nil {
				stderr += "\nserver stderr:\n" + tg.stderr.String()
			}
			checkTSReport(t, mode, r)
			if t.Failed() {
				t.Logf("stderr:\n%s", stderr)
			}
		})
	}
}

// runTSClient runs client.ts with args and returns its report and stderr.
func runTSClient(t *testing.T, s *e2eSetup, dir string, args []string) (tsReport, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tssdkTimeout)
	defer cancel()
	// As TestConformance runs the suite: --no-config and a working
	// directory of its own keep deno away from the repository's deno.json;
	// --frozen-lockfile fails rather than resolve other dependencies.
	cmd := exec.CommandContext(ctx, s.deno, append([]string{"run", "--no-config",
		"--lock=" + filepath.Join(dir, "deno.lock"), "--frozen-lockfile", "-A",
		filepath.Join(dir, "client.ts")}, args...)...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	var r tsReport
	if err := cmd.Run(); err != nil {
		t.Errorf("client.ts %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		return r, stderr.String()
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Errorf("client.ts printed %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	return r, stderr.String()
}

// checkTSReport fails unless r, the report of a client over mode, shows
// every scenario working.
func checkTSReport(t *testing.T, mode string, r tsReport) {
	t.Helper()
	if !r.Tool.OutputSchema || r.Tool.TaskSupport != "optional" {
		t.Errorf("tools/list showed the SDK %+v, want an outputSchema and taskSupport optional", r.Tool)
	}

	t.Run("progress", func(t *testing.T) {
		p := r.Progress
		if p.Error != "" {
			t.Fatalf("callTool with onprogress: %s", p.Error)
		}
		expectTSCall(t, "the result", p.Result, false, `{"status":"success","output":[],"return_value":"done"}`)
		notes := make([]progressNote, len(p.Notes))
		for i, n := range p.Notes {
			notes[i] = progressNote{n.Progress, n.Total, n.Message}
		}
		checkNotes(t, notes)
		var secs []string
		for _, m := range phases(notes) {
			if got := runningMessage.FindStringSubmatch(m); got != nil {
				secs = append(secs, got[1])
			}
		}
		if len(secs) < 2 || secs[0] != "0" || secs[1] != "1" {
			t.Errorf("onprogress heard %v, want running ticks at 0 and 1 s", notes)
		}
	})

	t.Run("structured", func(t *testing.T) {
		st := r.Structured
		if st.Error != "" {
			t.Fatalf("callTool (the SDK validates structuredContent): %s", st.Error)
		}
		for _, tc := range []struct {
			name    string
			isError bool
			want    string
		}{
			{"success", false, `{"status":"success","output":["hi"],"return_value":{"a":[1,2.5,null]}}`},
			{"run_error", false, `{"status":"run-error","output":["before"],"error":"Traceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    print(unknown)\n          ^^^^^^^\nNameError: name 'unknown' is not defined\n"}`},
			{"tool_error", true, `{"status":"error","output":[],"error":"missing required argument \"python_code\": the Python code to run"}`},
		} {
			got, ok := st.Calls[tc.name]
			if !ok {
				t.Errorf("no %s call in %+v", tc.name, st.Calls)
				continue
			}
			expectTSCall(t, tc.name, got, tc.isError, tc.want)
		}
	})

	t.Run("task", func(t *testing.T) {
		task := r.Task
		if task.Error != "" {
			t.Fatalf("callToolStream: %s", task.Error)
		}
		if task.TaskID == "" || task.CreatedMs > 1500 {
			t.Errorf("task %q created after %v ms, want a task at once", task.TaskID, task.CreatedMs)
		}
		if len(task.Statuses) == 0 || task.Statuses[len(task.Statuses)-1] != "completed" {
			t.Errorf("statuses %q, want them to end completed", task.Statuses)
		}
		if !slices.ContainsFunc(task.StatusMessages, func(m string) bool { return strings.HasPrefix(m, "running: ") }) {
			t.Errorf("statusMessages %q, want the call's progress", task.StatusMessages)
		}
		expectTSCall(t, "tasks/result", task.Result, false, `{"status":"success","output":["slept"],"return_value":"done"}`)
		if !slices.Contains(task.Listed, task.TaskID) {
			t.Errorf("tasks/list showed %q, want the task %q", task.Listed, task.TaskID)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		c := r.Cancel
		if c.Error != "" {
			t.Fatalf("cancelTask: %s", c.Error)
		}
		if c.Status != "cancelled" || !strings.Contains(c.StreamError, "was cancelled") {
			t.Errorf("cancelTask answered %q and the stream ended with %q, want cancelled", c.Status, c.StreamError)
		}
	})

	t.Run("ask", func(t *testing.T) {
		a := r.Ask
		if a.Error != "" {
			t.Fatalf("callTool: %s", a.Error)
		}
		// A stateless server forgets what the client declared at
		// initialize: the question says so.
		if mode == modeStateless {
			if a.Result.IsError || a.Sampled+a.Elicited != 0 || !strings.Contains(a.Result.Text, tsStatelessRefusal) {
				t.Errorf("asked %d and %d times, the result %+v; want the refusal %q", a.Sampled, a.Elicited, a.Result, tsStatelessRefusal)
			}
			return
		}
		expectTSCall(t, "the result", a.Result, false, `{"status":"success","output":[],"return_value":["re: one","re: a","re: b","re: c","Ada",{"age":36}]}`)
		if a.Sampled != 4 || a.Elicited != 2 {
			t.Errorf("the SDK's model was asked %d times and its person %d, want 4 and 2", a.Sampled, a.Elicited)
		}
	})

	// Such as a progress notification after its result, whose token the
	// SDK no longer knows.
	if len(r.Errors) != 0 {
		t.Errorf("the SDK reported errors: %q", r.Errors)
	}
}

// tsStatelessRefusal is what code's question raises on a stateless
// server, whose clients older than 2026-07-28 it cannot ask.
const tsStatelessRefusal = "a stateless server does not know the sampling capability of a client older than protocol 2026-07-28"

// expectTSCall fails unless the call's text is want (a tool error's is its
// own message), its isError is isError, and its structuredContent is want's
// object.
func expectTSCall(t *testing.T, name string, got tsCall, isError bool, want string) {
	t.Helper()
	if got.IsError != isError {
		t.Errorf("%s: isError %v (%q), want %v", name, got.IsError, got.Text, isError)
	}
	if !isError && got.Text != want {
		t.Errorf("%s: text\n got: %s\nwant: %s", name, got.Text, want)
	}
	var gotValue, wantValue any
	if err := json.Unmarshal([]byte(want), &wantValue); err != nil {
		t.Fatalf("%s: the case's object %s: %v", name, want, err)
	}
	if err := json.Unmarshal(got.StructuredContent, &gotValue); err != nil || !reflect.DeepEqual(gotValue, wantValue) {
		t.Errorf("%s: structuredContent\n got: %s (%v)\nwant: %s", name, got.StructuredContent, err, want)
	}
}
