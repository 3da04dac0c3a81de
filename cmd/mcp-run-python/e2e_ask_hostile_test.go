package main_test

// End-to-end tests of hostile callers and code that asks (issue 39),
// through the real binary and its workers: what the front end's and the
// supervisor's unit tests pin with stand-ins, here with real deno.
//
//	go test ./cmd/mcp-run-python/ -run TestE2EAskHostile -count=1 -v

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// The tokens of TestE2EAskHostile's two principals.
const (
	aliceAsks = "alice-ask-0123456789abcdef012345"
	bobAsks   = "bob-ask-0123456789abcdef01234567"
)

// hostilePark is the --park-timeout of TestE2EAskHostile's server: short,
// so that the retry that never comes ends within the test.
const hostilePark = 2 * time.Second

// mrtrResult is a tools/call result as a 2026-07-28 client reads it.
type mrtrResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError       bool                       `json:"isError"`
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// text is the result's one text block, failing the test for another.
func (r mrtrResult) text(t *testing.T) string {
	t.Helper()
	if r.ResultType == "input_required" || len(r.Content) != 1 {
		t.Fatalf("result %+v, want one text", r)
	}
	return r.Content[0].Text
}

// mrtrCall sends by hand, as a 2026-07-28 client that can sample and elicit
// with token as its bearer token ("" for none), a tools/call of code; with state, it is
// the retry of that state with answers, each sampling request's id
// answered with its text.
func mrtrCall(t *testing.T, tg *target, token, code, state string, answers map[string]string) mrtrResult {
	t.Helper()
	params := map[string]any{
		"name":      toolName,
		"arguments": map[string]any{"python_code": code},
		"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    modernProtocol,
			mcp.MetaKeyClientCapabilities: map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}},
		},
	}
	if state != "" {
		responses := map[string]any{}
		for id, text := range answers {
			responses[id] = map[string]any{"role": "assistant", "model": "by-hand", "content": map[string]any{"type": "text", "text": text}}
		}
		params["requestState"], params["inputResponses"] = state, responses
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	headers := []string{"MCP-Protocol-Version", modernProtocol, mcp.HeaderMethod, "tools/call", mcp.HeaderName, toolName}
	if token != "" {
		headers = append(headers, "Authorization", "Bearer "+token)
	}
	a := tg.do(t, "/mcp", string(body), headers...)
	var resp struct {
		Result *mrtrResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(a.body), &resp); err != nil || resp.Result == nil {
		t.Fatalf("tools/call: %d %q (%v)", a.status, a.body, err)
	}
	return *resp.Result
}

// parked calls code, which must ask the model once, and returns the
// input_required result.
func parked(t *testing.T, tg *target, token, code string) mrtrResult {
	t.Helper()
	r := mrtrCall(t, tg, token, code, "", nil)
	if r.ResultType != "input_required" || len(r.InputRequests) != 1 || r.RequestState == "" {
		t.Fatalf("call of %q: %+v, want input_required with one request", code, r)
	}
	return r
}

// forge returns state with its claims edited by edit and its signature
// kept.
func forge(t *testing.T, state string, edit func(claims map[string]any)) string {
	t.Helper()
	payload, sig, _ := strings.Cut(state, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	raw, err = json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw) + "." + sig
}

// TestE2EAskHostile sends hostile requestStates by hand to a stateless
// server with two principals and one worker, leaves a parked call without
// its retry, and lets code flood the model and meet a person who declines,
// all through the real binary; then, on a server with MCP sessions, an
// older client cancels a call while its question is pending, hears
// progress while it waits, and is told to stop when the wait runs out.
func TestE2EAskHostile(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStateless, "--sampling", "--elicitation", "--workers", "1",
		"--auth-token-file", tokenFile(t, aliceAsks, bobAsks), "--park-timeout", hostilePark.String(), "--llm-requests", "5")
	t.Run("states", func(t *testing.T) { testAskStates(t, tg) })
	t.Run("retry_never_comes", func(t *testing.T) { testAskRetryNeverComes(t, tg) })
	t.Run("flood", func(t *testing.T) { testAskFlood(t, tg) })
	t.Run("declined", func(t *testing.T) { testAskDeclined(t, tg) })
	t.Run("sigterm_while_parked", func(t *testing.T) {
		testAskStopWhileParked(t, startTarget(t, s, modeStateless, "--sampling", "--shutdown-timeout", "1m"))
	})

	older := startTarget(t, s, modeStdio, "--sampling", "--workers", "1")
	t.Run("cancel_while_asked", func(t *testing.T) { testAskCancelled(t, older) })
	t.Run("progress_while_asked", func(t *testing.T) { testAskProgress(t, older) })
	t.Run("wait_runs_out", func(t *testing.T) {
		testAskWaitRunsOut(t, startTarget(t, s, modeStateful, "--sampling", "--llm-wait", "1s"))
	})
}

// testAskStates: a forged, a foreign and a replayed requestState are each
// refused, and leave the parked call to its rightful retry.
func testAskStates(t *testing.T, tg *target) {
	const code = `llm_query("a") + ", " + llm_query("b")`
	first := parked(t, tg, aliceAsks, code)
	refused := func(what string, r mrtrResult, want string) {
		t.Helper()
		if got := r.text(t); !r.IsError || got != want {
			t.Errorf("%s: isError %v, %q; want %q", what, r.IsError, got, want)
		}
	}
	const (
		forged  = "invalid requestState: this server did not make it (or has restarted since)"
		foreign = "invalid requestState: it belongs to another caller"
		used    = "invalid requestState: it was used already; retry with the requestState of the latest input_required result"
		ended   = "invalid requestState: its call has ended (cancelled, timed out, or waited past --park-timeout)"
	)
	answer := map[string]string{"q0": "A"}
	refused("a later round, signature kept", mrtrCall(t, tg, aliceAsks, code, forge(t, first.RequestState, func(c map[string]any) { c["r"] = 2.0 }), answer), forged)
	refused("a state of no signature", mrtrCall(t, tg, aliceAsks, code, strings.Split(first.RequestState, ".")[0], answer), forged)
	refused("bob's retry of alice's state", mrtrCall(t, tg, bobAsks, code, first.RequestState, answer), foreign)
	second := mrtrCall(t, tg, aliceAsks, code, first.RequestState, answer)
	if second.ResultType != "input_required" {
		t.Fatalf("alice's retry: %+v, want the second round", second)
	}
	refused("alice's first state again", mrtrCall(t, tg, aliceAsks, code, first.RequestState, answer), used)
	done := mrtrCall(t, tg, aliceAsks, code, second.RequestState, map[string]string{"q0": "B"})
	if got, want := done.text(t), "<status>success</status>\n<return_value>\nA, B\n</return_value>"; got != want {
		t.Errorf("the call's result %q, want %q", got, want)
	}
	refused("the last state after the result", mrtrCall(t, tg, aliceAsks, code, second.RequestState, answer), ended)
}

// testAskRetryNeverComes: a call parked without its retry holds the only
// worker until --park-timeout, then is killed: the next call runs, and the
// late retry is refused.
func testAskRetryNeverComes(t *testing.T, tg *target) {
	start := time.Now()
	r := parked(t, tg, aliceAsks, `llm_query("anyone?")`)
	c := tg.as(bobAsks).connectProtocol(t, modernProtocol)
	c.expectWorks(t)
	if took := time.Since(start); took < hostilePark {
		t.Errorf("the next call ran after %v, before the parked call's --park-timeout %v: it had no worker to wait for", took, hostilePark)
	}
	late := mrtrCall(t, tg, aliceAsks, `llm_query("anyone?")`, r.RequestState, map[string]string{"q0": "me"})
	if got := late.text(t); !late.IsError || !strings.HasPrefix(got, "invalid requestState: ") {
		t.Errorf("the late retry: %q, want its state refused", got)
	}
}

// testAskStopWhileParked: SIGTERM with a call parked for its retry, which
// can no longer come once the listener is closed: the call ends and the
// server exits at once, rather than at --shutdown-timeout.
func testAskStopWhileParked(t *testing.T, tg *target) {
	parked(t, tg, "", `llm_query("anyone?")`)
	start := time.Now()
	if err := stopServer(tg.cmd.Process); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tg.done:
	case <-time.After(stopTimeout):
		t.Fatalf("the server did not exit within %v of SIGTERM, with --shutdown-timeout 1m and a parked call", stopTimeout)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the server exited %v after SIGTERM: it waited for a retry that could not come", took)
	}
}

// floodCode asks one question past --llm-requests 5, then a prompt past
// --llm-prompt-limit, and prints what each raised.
const floodCode = `n = 0
try:
    while True:
        llm_query(f"q{n}")
        n += 1
except LLMQueryError as e:
    print(n, type(e).__name__, e)
try:
    llm_query("x" * (256 * 1024 + 1))
except ValueError as e:
    print(type(e).__name__, e)`

// testAskFlood: code asking past --llm-requests is stopped, and told
// which flag stopped it.
func testAskFlood(t *testing.T, tg *target) {
	c := tg.as(aliceAsks).connectProtocol(t, modernProtocol, client.WithSamplingHandler(mcptest.ScriptedModel{}))
	golden(t, "ask_flood.txt", c.run(t, floodCode))
}

// declineCode asks the person for text, for a form, and through input().
const declineCode = `for ask in (lambda: ask_user("Your name?"), lambda: ask_user("Age?", {"type": "object", "properties": {"age": {"type": "integer"}}}), lambda: input("Your name? ")):
    try:
        ask()
    except UserDeclinedError as e:
        print(type(e).__name__, isinstance(e, AskUserError), isinstance(e, EOFError), e)`

// testAskDeclined: a person who declines raises UserDeclinedError, an
// EOFError for input().
func testAskDeclined(t *testing.T, tg *target) {
	c := tg.as(aliceAsks).connectProtocol(t, modernProtocol, client.WithElicitationHandler(mcptest.ScriptedPerson{Decline: true}))
	golden(t, "ask_declined.txt", c.run(t, declineCode))
}

// heldModel is a client's model that signals each request on asked and
// answers it only when its context ends, or release is closed.
type heldModel struct {
	asked   chan struct{}
	release chan struct{}
}

// CreateMessage implements client.SamplingHandler.
func (m heldModel) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	m.asked <- struct{}{}
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-m.release:
		return mcptest.ScriptedModel{}.CreateMessage(ctx, req)
	}
}

// testAskCancelled: an older client cancels its call while the model's
// answer is pending (over stdio, mcp-go's client sends
// notifications/cancelled): the call's worker is free for the next call at
// once.
func testAskCancelled(t *testing.T, tg *target) {
	m := heldModel{asked: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(m.release)
	c := tg.connectProtocol(t, e2eProtocol, client.WithSamplingHandler(m))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": `llm_query("hold")`}}})
		errc <- err
	}()
	select {
	case <-m.asked:
	case <-time.After(callTimeout):
		t.Fatal("the model was never asked")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call ended with %v", err)
	}
	start := time.Now()
	c.expectWorks(t)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the next call took %v: the cancelled call held the only worker", took)
	}
}

// testAskWaitRunsOut: an older client's model never answers; past
// --llm-wait the question raises, and the server tells the client to stop
// (notifications/cancelled, on the call's own stream).
func testAskWaitRunsOut(t *testing.T, tg *target) {
	m := heldModel{asked: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(m.release)
	c := tg.connectProtocol(t, e2eProtocol, client.WithSamplingHandler(m))
	golden(t, "ask_wait_runs_out.txt", c.run(t, `try:
    llm_query("hold")
except AskError as e:
    print(type(e).__name__, e)`))
	deadline := time.Now().Add(startTimeout)
	for !slices.Contains(c.notificationMethods(), string(mcp.MethodNotificationCancelled)) {
		if time.Now().After(deadline) {
			t.Fatalf("no notifications/cancelled from the server; it sent %q", c.notificationMethods())
		}
		time.Sleep(20 * time.Millisecond) // bounded polling for the notification
	}
}

// notificationMethods are the methods of the notifications but log
// messages that c received.
func (c *e2eClient) notificationMethods() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.others)
}

// testAskProgress: an older client that asked for progress hears, while
// its model's answer is pending, that the call waits for the model.
func testAskProgress(t *testing.T, tg *target) {
	m := heldModel{asked: make(chan struct{}, 2), release: make(chan struct{})}
	c := tg.connectProtocol(t, e2eProtocol, client.WithSamplingHandler(m))
	var l progressLog
	l.listen(t, c)
	go func() {
		<-m.asked
		deadline := time.Now().Add(startTimeout)
		for !slices.ContainsFunc(l.of("p1"), func(n progressNote) bool { return strings.HasPrefix(n.message, "waiting for the model") }) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // bounded polling for the note
		}
		close(m.release)
	}()
	text, notes := callWithToken(t, c, &l, "p1", `llm_query("slow")`)
	if text != "<status>success</status>\n<return_value>\nre: slow\n</return_value>" {
		t.Errorf("result %q", text)
	}
	if !slices.ContainsFunc(notes, func(n progressNote) bool { return n.message == "waiting for the model: 1 of 100" }) {
		t.Errorf("progress %+v, want %q", notes, "waiting for the model: 1 of 100")
	}
}
