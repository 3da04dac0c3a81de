package supervisor

import (
	"context"
	"encoding/json"
	"time"
)

// Ask is what one call's code may ask beyond the sandbox, and who answers.
//
// With Model, the interpreter defines llm_query and llm_query_batched;
// with Person, ask_user, and input() asks the person. Without either they
// are not defined and input() is upstream's. Asker answers; it must be set
// when Model or Person is.
type Ask struct {
	Model  bool
	Person bool
	Asker  Asker
}

// Asker answers the questions of a call's code. How (a multi round-trip
// result, a request to the client, an operator's endpoint) is the front
// end's business; the supervisor only bounds and relays.
type Asker interface {
	// Ask answers one round: one llm_query or ask_user (one question), or
	// one llm_query_batched (all of its prompts), with one Answer per
	// Question, in order. It blocks until the answers come or ctx ends;
	// ctx ends when the call is cancelled, killed, out of time or its
	// round out of AskLimits.Wait. An error fails the whole round; a
	// question that alone could not be answered says so in its Answer.
	Ask(ctx context.Context, round []Question) ([]Answer, error)
}

// Question is one thing code asks: exactly one of Sample and Elicit is set.
type Question struct {
	Sample *SampleQuestion // llm_query: a sampling/createMessage request
	Elicit *ElicitQuestion // ask_user or input(): an elicitation/create request
}

// SampleQuestion is one prompt for the model, as llm_query's arguments.
type SampleQuestion struct {
	Prompt      string
	System      string   // "" for none
	MaxTokens   int      // bounded by AskLimits.MaxTokens; 0 for the limit, or the asker's default
	Temperature *float64 // nil for the model's own
	ModelHint   string   // "" for none
}

// ElicitQuestion is one question for the person.
type ElicitQuestion struct {
	Message string
	// Schema is the JSON schema of the answer object; nil asks for text.
	Schema json.RawMessage
}

// Answer is the answer to one Question.
type Answer struct {
	// Text is the model's answer, or the person's when the question had
	// no schema.
	Text string
	// Value is the person's answer object when the question had a schema.
	Value json.RawMessage
	// Declined reports that the person declined or cancelled, or that the
	// client refused the request; Err says which.
	Declined bool
	// Err, when not "", is why the question has no answer; code sees it in
	// the exception it raises.
	Err string
}

// AskLimits bound the questions of every call; a zero field is no limit.
type AskLimits struct {
	Requests    int           // questions one call may ask in all (--llm-requests)
	Batch       int           // questions in one round (one llm_query_batched)
	PromptBytes int           // bytes of one prompt, system text, message or schema
	AnswerBytes int           // bytes of one answer
	MaxTokens   int           // tokens one sampling request may ask for
	Wait        time.Duration // time one round may wait for its answers; not charged to Timeout
}
