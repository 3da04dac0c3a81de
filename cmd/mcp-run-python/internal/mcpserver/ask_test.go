package mcpserver

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// answering answers each question with its own text backwards, or fails
// the round with err.
type answering struct{ err error }

// Ask implements supervisor.Asker.
func (a answering) Ask(_ context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	if a.err != nil {
		return nil, a.err
	}
	answers := make([]supervisor.Answer, len(round))
	for i, q := range round {
		if q.Elicit != nil {
			answers[i] = supervisor.Answer{Declined: true, Err: "no"}
			continue
		}
		answers[i] = supervisor.Answer{Text: "secret answer"}
	}
	return answers, nil
}

// TestLoggedAsker checks that each question gets one log line with its
// kind, sizes and outcome, and that the texts show only at debug level.
func TestLoggedAsker(t *testing.T) {
	round := []supervisor.Question{
		{Sample: &supervisor.SampleQuestion{Prompt: "secret prompt"}},
		{Elicit: &supervisor.ElicitQuestion{Message: "secret question"}},
	}
	for _, tc := range []struct {
		name     string
		level    zapcore.Level
		err      error
		outcomes []string
		texts    bool
	}{
		{"info", zapcore.InfoLevel, nil, []string{"answered", "declined: no"}, false},
		{"debug", zapcore.DebugLevel, nil, []string{"answered", "declined: no"}, true},
		{"a failed round", zapcore.InfoLevel, errors.New("gone"), []string{"failed: gone", "failed: gone"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(tc.level)
			_, err := loggedAsker{answering{tc.err}, "test", zap.New(core)}.Ask(t.Context(), round)
			if !errors.Is(err, tc.err) {
				t.Fatalf("ask: %v", err)
			}
			entries := logs.All()
			if len(entries) != len(round) {
				t.Fatalf("%d log lines, want %d", len(entries), len(round))
			}
			for i, e := range entries {
				fields := e.ContextMap()
				if fields["outcome"] != tc.outcomes[i] || fields["by"] != "test" || fields["kind"] != []string{kindModel, kindPerson}[i] {
					t.Errorf("line %d: %v", i, fields)
				}
				if fields["prompt_bytes"] != int64(len("secret prompt")) && i == 0 {
					t.Errorf("line %d: prompt_bytes %v", i, fields["prompt_bytes"])
				}
				_, hasPrompt := fields["prompt"]
				if hasPrompt != tc.texts {
					t.Errorf("line %d shows the text: %v, want %v", i, hasPrompt, tc.texts)
				}
			}
		})
	}
}

// TestSamplingParams checks the sampling request of llm_query's arguments:
// a max_tokens code does not name is the operator's (MCP requires one),
// or 4096.
func TestSamplingParams(t *testing.T) {
	temp := 0.2
	for _, tc := range []struct {
		name      string
		q         supervisor.SampleQuestion
		operators int
		want      mcp.CreateMessageParams
	}{
		{"bare", supervisor.SampleQuestion{Prompt: "p"}, 0, mcp.CreateMessageParams{MaxTokens: 4096}},
		{"the operator's tokens", supervisor.SampleQuestion{Prompt: "p"}, 100, mcp.CreateMessageParams{MaxTokens: 100}},
		{"every argument", supervisor.SampleQuestion{Prompt: "p", System: "s", MaxTokens: 7, Temperature: &temp, ModelHint: "haiku"}, 100,
			mcp.CreateMessageParams{SystemPrompt: "s", MaxTokens: 7, Temperature: 0.2, ModelPreferences: &mcp.ModelPreferences{Hints: []mcp.ModelHint{{Name: "haiku"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("p")}}
			got := samplingParams(&tc.q, (&AskOptions{MaxTokens: tc.operators}).maxTokens())
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("params %+v, want %+v", got, tc.want)
			}
		})
	}
}
