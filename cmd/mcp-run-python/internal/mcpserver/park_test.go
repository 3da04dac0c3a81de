package mcpserver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// TestStateOpen checks that a requestState opens only for the caller, the
// MCP session and the time it was made for, and only as it was made.
func TestStateOpen(t *testing.T) {
	s := newStateSigner()
	now := time.UnixMilli(1_000_000)
	claims := stateClaims{Call: "call", Round: 2, Principal: "alice", Session: "s1", Expires: now.Add(time.Minute).UnixMilli()}
	good := s.seal(claims)
	payload, sig, _ := strings.Cut(good, ".")
	other := newStateSigner().seal(claims)
	tampered := s.seal(stateClaims{Call: "other", Round: 2, Principal: "alice", Session: "s1", Expires: claims.Expires})
	tamperedPayload, _, _ := strings.Cut(tampered, ".")
	for _, tc := range []struct {
		name      string
		state     string
		principal identity.Principal
		session   string
		at        time.Time
		want      error
	}{
		{"its own", good, "alice", "s1", now, nil},
		{"another key's", other, "alice", "s1", now, errStateForged},
		{"another payload under its signature", tamperedPayload + "." + sig, "alice", "s1", now, errStateForged},
		{"no signature", payload, "alice", "s1", now, errStateForged},
		{"not base64", "!!." + sig, "alice", "s1", now, errStateForged},
		{"empty", "", "alice", "s1", now, errStateForged},
		{"another principal's", good, "mallory", "s1", now, errStateForeign},
		{"another session's", good, "alice", "s2", now, errStateForeign},
		{"no one's for someone", good, "", "s1", now, errStateForeign},
		{"expired", good, "alice", "s1", now.Add(time.Minute), errStateExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.open(tc.state, tc.principal, tc.session, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("open: %v, want %v", err, tc.want)
			}
			if err == nil && got != claims {
				t.Errorf("claims %+v, want %+v", got, claims)
			}
		})
	}
}

// askingRun is a call whose code asks each round of rounds in turn and
// returns the answers' texts, or why a round failed, as a tool result; it
// reports how it ended on ended.
func askingRun(rounds [][]supervisor.Question, ended chan<- error) func(context.Context, supervisor.Asker, func(supervisor.Line), func(supervisor.ProgressEvent)) *mcp.CallToolResult {
	return func(ctx context.Context, ask supervisor.Asker, _ func(supervisor.Line), _ func(supervisor.ProgressEvent)) *mcp.CallToolResult {
		var out []string
		for _, round := range rounds {
			answers, err := ask.Ask(ctx, round)
			if err != nil {
				if ctx.Err() != nil {
					ended <- context.Cause(ctx)
					return mcp.NewToolResultError("cancelled")
				}
				out = append(out, "failed: "+err.Error())
				continue
			}
			for _, a := range answers {
				out = append(out, a.Text+a.Err)
			}
		}
		ended <- nil
		return mcp.NewToolResultText(strings.Join(out, "\n"))
	}
}

// question is llm_query(prompt).
func question(prompt string) []supervisor.Question {
	return []supervisor.Question{{Sample: &supervisor.SampleQuestion{Prompt: prompt}}}
}

// retry is the retry of res, a parked call's input_required, with the
// model answering each sampling request "re: " and its prompt.
func retry(t *testing.T, res *mcp.CallToolResult) mcp.CallToolRequest {
	t.Helper()
	if !res.NeedsInput() {
		t.Fatalf("result %+v, want input_required", res)
	}
	responses := mcp.InputResponses{}
	for id, r := range res.InputRequests {
		prompt := r.Sampling.Messages[0].Content.(mcp.TextContent).Text
		responses[id] = mcp.NewSamplingInputResponse(mcp.CreateMessageResult{
			SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("re: " + prompt)},
		})
	}
	var req mcp.CallToolRequest
	req.Params.RequestState = res.RequestState
	req.Params.InputResponses = responses
	return req
}

// resultText is the text of a tool result, failing the test for another.
func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.NeedsInput() || len(res.Content) != 1 {
		t.Fatalf("result %+v, want one text", res)
	}
	return res.Content[0].(mcp.TextContent).Text
}

// TestParkedCallRounds runs a call that asks twice: each round goes out
// as input_required and its retry resumes the call; a replayed state, an
// older one, and one for another caller are refused and change nothing.
func TestParkedCallRounds(t *testing.T) {
	pk := newParking(&AskOptions{ParkTimeout: time.Minute}, nil)
	ended := make(chan error, 1)
	ctx := t.Context()
	first := pk.start(ctx, "alice", "s1", &requestSinks{}, askingRun([][]supervisor.Question{question("one"), question("two")}, ended))
	r1 := retry(t, first)
	if got := pk.resume(ctx, r1, "mallory", "s1", &requestSinks{}); !strings.Contains(resultText(t, got), errStateForeign.Error()) {
		t.Errorf("another caller's retry: %+v", got)
	}
	second := pk.resume(ctx, r1, "alice", "s1", &requestSinks{})
	r2 := retry(t, second)
	if got := pk.resume(ctx, r1, "alice", "s1", &requestSinks{}); !strings.Contains(resultText(t, got), errStateUsed.Error()) {
		t.Errorf("a replayed retry: %+v", got)
	}
	if got := resultText(t, pk.resume(ctx, r2, "alice", "s1", &requestSinks{})); got != "re: one\nre: two" {
		t.Errorf("result %q", got)
	}
	if err := <-ended; err != nil {
		t.Errorf("the call ended with %v", err)
	}
	if got := pk.resume(ctx, r2, "alice", "s1", &requestSinks{}); !strings.Contains(resultText(t, got), errStateGone.Error()) {
		t.Errorf("a retry after the result: %+v", got)
	}
	if n := pk.parked(); n != 0 {
		t.Errorf("%d calls still parked", n)
	}
}

// TestParkedCallLinesFollowTheRequest checks that the lines a parked call
// prints go to the request that serves it at the time: the first request's
// before the first question, the retry's after.
func TestParkedCallLinesFollowTheRequest(t *testing.T) {
	pk := newParking(&AskOptions{ParkTimeout: time.Minute}, nil)
	var first, second []string
	sink := func(lines *[]string) *requestSinks {
		return &requestSinks{onLine: func(l supervisor.Line) { *lines = append(*lines, l.Text) }}
	}
	res := pk.start(t.Context(), "", "", sink(&first), func(ctx context.Context, ask supervisor.Asker, onLine func(supervisor.Line), _ func(supervisor.ProgressEvent)) *mcp.CallToolResult {
		onLine(supervisor.Line{Text: "before"})
		if _, err := ask.Ask(ctx, question("q")); err != nil {
			return mcp.NewToolResultError(err.Error())
		}
		onLine(supervisor.Line{Text: "after"})
		return mcp.NewToolResultText("done")
	})
	if got := resultText(t, pk.resume(t.Context(), retry(t, res), "", "", sink(&second))); got != "done" {
		t.Fatalf("result %q", got)
	}
	if !slices.Equal(first, []string{"before"}) || !slices.Equal(second, []string{"after"}) {
		t.Errorf("the first request got %q, the retry %q", first, second)
	}
}

// TestParkedCallTimesOut leaves a parked call without its retry: past the
// park timeout the call is cancelled, forgotten, and its state expired.
func TestParkedCallTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Minute
		pk := newParking(&AskOptions{ParkTimeout: timeout}, nil)
		ended := make(chan error, 1)
		res := pk.start(t.Context(), "alice", "", &requestSinks{}, askingRun([][]supervisor.Question{question("one")}, ended))
		r := retry(t, res)
		time.Sleep(timeout - time.Millisecond)
		synctest.Wait()
		select {
		case err := <-ended:
			t.Fatalf("the call ended before its time: %v", err)
		default:
		}
		time.Sleep(time.Millisecond)
		if err := <-ended; !errors.Is(err, errParkTimeout) {
			t.Errorf("the call ended with %v, want %v", err, errParkTimeout)
		}
		if n := pk.parked(); n != 0 {
			t.Errorf("%d calls still parked", n)
		}
		if got := pk.resume(t.Context(), r, "alice", "", &requestSinks{}); !strings.Contains(resultText(t, got), errStateExpired.Error()) {
			t.Errorf("a retry too late: %+v", got)
		}
	})
}

// TestParkedCallsPerPrincipal parks one call of a principal allowed one: a
// second call of the same principal has its question refused and ends,
// another principal's parks, and so does the first principal's once its
// first call is over.
func TestParkedCallsPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pk := newParking(&AskOptions{ParkTimeout: time.Minute, ParkedPerPrincipal: 1}, nil)
		ctx := t.Context()
		ended := make(chan error, 8)
		run := askingRun([][]supervisor.Question{question("one")}, ended)
		first := pk.start(ctx, "alice", "", &requestSinks{}, run)
		retry(t, first)
		refused := resultText(t, pk.start(ctx, "alice", "", &requestSinks{}, run))
		if !strings.Contains(refused, "--max-parked-calls-per-principal") {
			t.Errorf("alice's second call: %q", refused)
		}
		retry(t, pk.start(ctx, "bob", "", &requestSinks{}, run))
		// No one in particular is held to no cap.
		retry(t, pk.start(ctx, "", "", &requestSinks{}, run))
		retry(t, pk.start(ctx, "", "", &requestSinks{}, run))
		if got := resultText(t, pk.resume(ctx, retry(t, first), "alice", "", &requestSinks{})); got != "re: one" {
			t.Errorf("alice's first call: %q", got)
		}
		retry(t, pk.start(ctx, "alice", "", &requestSinks{}, run))
		if n := pk.parked(); n != 4 {
			t.Errorf("%d calls parked, want 4", n)
		}
		// Nothing outlives its park timeout.
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := pk.parked(); n != 0 {
			t.Errorf("%d calls parked past their timeout", n)
		}
	})
}

// TestParkedCallCancelled cancels the request that serves a call: the call
// is cancelled with it, and its result returned.
func TestParkedCallCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pk := newParking(&AskOptions{ParkTimeout: time.Minute}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		ended := make(chan error, 1)
		done := make(chan *mcp.CallToolResult)
		go func() {
			done <- pk.start(ctx, "alice", "", &requestSinks{}, func(ctx context.Context, _ supervisor.Asker, _ func(supervisor.Line), _ func(supervisor.ProgressEvent)) *mcp.CallToolResult {
				<-ctx.Done()
				ended <- context.Cause(ctx)
				return mcp.NewToolResultError("cancelled")
			})
		}()
		synctest.Wait()
		cancel()
		if got := resultText(t, <-done); got != "cancelled" {
			t.Errorf("result %q", got)
		}
		if err := <-ended; err == nil || !strings.Contains(err.Error(), "the request was cancelled") {
			t.Errorf("the call ended with %v", err)
		}
	})
}

// TestParkedCallsEndWithTheRetries ends the retries, as an HTTP server's
// shutdown does once its listener is closed: a call parked for its retry
// is cancelled at once, not at the park timeout, and a call served at the
// time is refused its next round; so is a parking made after.
func TestParkedCallsEndWithTheRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := NewCallGate(time.Minute, time.Second)
		pk := newParking(&AskOptions{ParkTimeout: time.Hour}, gate)
		parkedEnded := make(chan error, 1)
		if res := pk.start(t.Context(), "alice", "", &requestSinks{}, askingRun([][]supervisor.Question{question("one")}, parkedEnded)); !res.NeedsInput() {
			t.Fatalf("result %+v, want input_required", res)
		}
		proceed := make(chan struct{})
		servedEnded := make(chan error, 1)
		served := make(chan *mcp.CallToolResult, 1)
		go func() {
			served <- pk.start(t.Context(), "bob", "", &requestSinks{}, func(ctx context.Context, ask supervisor.Asker, onLine func(supervisor.Line), onProgress func(supervisor.ProgressEvent)) *mcp.CallToolResult {
				<-proceed
				return askingRun([][]supervisor.Question{question("two")}, servedEnded)(ctx, ask, onLine, onProgress)
			})
		}()
		synctest.Wait()
		start := time.Now()
		gate.EndRetries()
		if err := <-parkedEnded; !errors.Is(err, errNoRetries) || time.Since(start) != 0 {
			t.Errorf("the parked call ended with %v after %v, want %v at once", err, time.Since(start), errNoRetries)
		}
		close(proceed)
		if got, want := resultText(t, <-served), "failed: "+errNoRetries.Error(); got != want {
			t.Errorf("the served call's result %q, want %q", got, want)
		}
		if err := <-servedEnded; err != nil {
			t.Errorf("the served call ended with %v", err)
		}
		if n := pk.parked(); n != 0 {
			t.Errorf("%d calls still parked", n)
		}
		later := newParking(&AskOptions{ParkTimeout: time.Hour}, gate)
		if !later.ended {
			t.Error("a parking made after EndRetries takes retries")
		}
	})
}
