package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// AskRunner is a runner whose calls ask, through their Request's Asker, as
// code calling llm_query, llm_query_batched and ask_user would. The code is
// a script, one round a line:
//
//	model P          llm_query(P)
//	batch P1|P2|...  llm_query_batched([P1, P2, ...])
//	repeat N P       N llm_query calls, one after the other: "P 0", "P 1"...
//	person M         ask_user(M), for text
//	form M           ask_user(M, FormSchema)
//
// The return value is a str: each answer on a line of its own, its Text,
// or its Value, or "declined: Err" or "error: Err", or "failed: ..." for a
// round whose Ask failed.
type AskRunner struct{}

// FormSchema is the schema of AskRunner's form questions.
const FormSchema = `{"type":"object","properties":{"age":{"type":"integer"}},"required":["age"]}`

// Run runs the script of req.Code.
func (AskRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	if req.Ask.Asker == nil {
		return supervisor.Result{}, fmt.Errorf("the call may ask nothing (model %v, person %v)", req.Ask.Model, req.Ask.Person)
	}
	var out []string
	for line := range strings.Lines(req.Code) {
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		var rounds [][]supervisor.Question
		switch verb {
		case "model":
			rounds = append(rounds, []supervisor.Question{sample(arg)})
		case "batch":
			var round []supervisor.Question
			for p := range strings.SplitSeq(arg, "|") {
				round = append(round, sample(p))
			}
			rounds = append(rounds, round)
		case "repeat":
			n, p, _ := strings.Cut(arg, " ")
			count, err := strconv.Atoi(n)
			if err != nil {
				return supervisor.Result{}, fmt.Errorf("repeat: %w", err)
			}
			for i := range count {
				rounds = append(rounds, []supervisor.Question{sample(p + " " + strconv.Itoa(i))})
			}
		case "person":
			rounds = append(rounds, []supervisor.Question{{Elicit: &supervisor.ElicitQuestion{Message: arg}}})
		case "form":
			rounds = append(rounds, []supervisor.Question{{Elicit: &supervisor.ElicitQuestion{Message: arg, Schema: json.RawMessage(FormSchema)}}})
		default:
			return supervisor.Result{}, fmt.Errorf("unknown step %q", verb)
		}
		for _, round := range rounds {
			answers, err := req.Ask.Asker.Ask(ctx, round)
			if err != nil {
				if ctx.Err() != nil {
					return supervisor.Result{}, fmt.Errorf("asking: %w", err)
				}
				out = append(out, "failed: "+err.Error())
				continue
			}
			for _, a := range answers {
				out = append(out, answerLine(a))
			}
		}
	}
	value, err := json.Marshal(strings.Join(out, "\n"))
	if err != nil {
		return supervisor.Result{}, fmt.Errorf("encode the return value: %w", err)
	}
	return supervisor.Result{Status: supervisor.StatusSuccess, ReturnValue: value, ReturnString: true}, nil
}

// PythonVersion implements the runner's interface.
func (AskRunner) PythonVersion() string { return "3.14" }

// sample is the question of llm_query(prompt).
func sample(prompt string) supervisor.Question {
	return supervisor.Question{Sample: &supervisor.SampleQuestion{Prompt: prompt, MaxTokens: 100}}
}

// answerLine is how AskRunner shows an answer.
func answerLine(a supervisor.Answer) string {
	switch {
	case a.Declined:
		return "declined: " + a.Err
	case a.Err != "":
		return "error: " + a.Err
	case a.Value != nil:
		return string(a.Value)
	}
	return a.Text
}

// ScriptedModel answers every sampling request with "re: " and its prompt,
// as a client's model would, deterministically.
type ScriptedModel struct{}

// CreateMessage implements client.SamplingHandler.
func (ScriptedModel) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var prompt string
	if len(req.Messages) > 0 {
		switch c := req.Messages[0].Content.(type) {
		case mcp.TextContent:
			prompt = c.Text
		case map[string]any:
			prompt, _ = c["text"].(string)
		}
	}
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("re: " + prompt)},
		Model:           "scripted",
	}, nil
}

// ScriptedPerson answers every elicitation: text "Ada", or age 36 for a
// form of FormSchema; Decline declines instead.
type ScriptedPerson struct{ Decline bool }

// Elicit implements client.ElicitationHandler.
func (p ScriptedPerson) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if p.Decline {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	schema, _ := json.Marshal(req.Params.RequestedSchema)
	content := map[string]any{"answer": "Ada"}
	if strings.Contains(string(schema), `"age"`) {
		content = map[string]any{"age": 36}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}
