package llmendpoint_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/llmendpoint"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// standIn is an OpenAI-compatible chat completions server on 127.0.0.1: it
// answers "re: " and the user's message, records what it was sent, and
// holds each request until release is closed.
type standIn struct {
	*httptest.Server
	key     string
	arrived chan struct{}
	release chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
	requests []map[string]any
}

// newStandIn starts a stand-in that wants key.
func newStandIn(t *testing.T, key string) *standIn {
	t.Helper()
	s := &standIn{key: key, arrived: make(chan struct{}, 100), release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+s.key {
		// As a careless proxy might: the request's key in the error.
		http.Error(w, `{"error":"unauthorized: `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	s.arrived <- struct{}{}
	<-s.release
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	messages, _ := req["messages"].([]any)
	last, _ := messages[len(messages)-1].(map[string]any)
	prompt, _ := last["content"].(string)
	switch prompt {
	case "giant":
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"` + strings.Repeat("x", 1000) + `"}}]}`))
	case "nothing":
		_, _ = w.Write([]byte(`{"choices":[]}`))
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "re: " + prompt}}}})
	}
}

// questions are llm_query_batched(prompts).
func questions(prompts ...string) []supervisor.Question {
	var qs []supervisor.Question
	for _, p := range prompts {
		qs = append(qs, supervisor.Question{Sample: &supervisor.SampleQuestion{Prompt: p}})
	}
	return qs
}

// TestEndpointAnswersABatch asks six prompts, two at a time: the key and
// the model reach the stand-in, the answers come back in order, and never
// more than two requests are in flight.
func TestEndpointAnswersABatch(t *testing.T) {
	s := newStandIn(t, "sk-secret")
	c := &llmendpoint.Client{URL: s.URL + "/v1/", Model: "m1", Key: "sk-secret", Concurrency: 2}
	temp := 0.5
	round := questions("a", "b", "c", "d", "e", "f")
	round[0].Sample.System, round[0].Sample.MaxTokens, round[0].Sample.Temperature = "be brief", 7, &temp
	done := make(chan []supervisor.Answer, 1)
	go func() {
		answers, err := c.Ask(t.Context(), round)
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		done <- answers
	}()
	<-s.arrived
	<-s.arrived // two in flight: the bound is reached before any answer
	close(s.release)
	answers := <-done
	for i, p := range []string{"a", "b", "c", "d", "e", "f"} {
		if a := answers[i]; a.Text != "re: "+p || a.Err != "" || a.Declined {
			t.Errorf("answer %d: %+v", i, answers[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.most != 2 {
		t.Errorf("%d requests in flight at most, want 2", s.most)
	}
	var first map[string]any
	for _, r := range s.requests {
		if strings.Contains(mustJSON(t, r), `"content":"a"`) {
			first = r
		}
	}
	want := `{"max_tokens":7,"messages":[{"content":"be brief","role":"system"},{"content":"a","role":"user"}],"model":"m1","temperature":0.5}`
	if got := mustJSON(t, first); got != want {
		t.Errorf("request\n%s\nwant\n%s", got, want)
	}
}

// mustJSON is v as JSON, keys sorted.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEndpointRefusals checks that each question the endpoint cannot
// answer says why, and that the others are answered.
func TestEndpointRefusals(t *testing.T) {
	s := newStandIn(t, "sk-secret")
	close(s.release)
	for _, tc := range []struct {
		name   string
		client llmendpoint.Client
		prompt string
		want   string
	}{
		{"a wrong key, never shown", llmendpoint.Client{URL: s.URL + "/v1", Key: "sk-wrong"}, "a", `answered 401 Unauthorized: {"error":"unauthorized: Bearer [the key]"}`},
		{"an answer past the limit", llmendpoint.Client{URL: s.URL + "/v1", Key: "sk-secret", BodyLimit: 100}, "giant", "more than 100 bytes"},
		{"no message", llmendpoint.Client{URL: s.URL + "/v1", Key: "sk-secret"}, "nothing", "answered no message"},
		{"nobody there", llmendpoint.Client{URL: "http://127.0.0.1:1/v1"}, "a", "the model's endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			round := append(questions(tc.prompt), supervisor.Question{Elicit: &supervisor.ElicitQuestion{Message: "who?"}})
			answers, err := tc.client.Ask(t.Context(), round)
			if err != nil {
				t.Fatalf("ask: %v", err)
			}
			if !strings.Contains(answers[0].Err, tc.want) || answers[0].Text != "" {
				t.Errorf("answer %+v, want an error with %q", answers[0], tc.want)
			}
			if answers[1].Err != "the model's endpoint cannot ask the person" {
				t.Errorf("the person's question: %+v", answers[1])
			}
		})
	}
}

// TestEndpointCancelled ends a round while its request waits: Ask returns
// the cause, and the request is abandoned.
func TestEndpointCancelled(t *testing.T) {
	s := newStandIn(t, "k")
	defer close(s.release)
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := (&llmendpoint.Client{URL: s.URL + "/v1", Key: "k"}).Ask(ctx, questions("a"))
		done <- err
	}()
	<-s.arrived
	cancel(context.DeadlineExceeded)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("ask: %v, want the cause", err)
	}
}
