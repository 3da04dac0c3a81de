// Package llmendpoint answers the model's questions of code (llm_query,
// llm_query_batched) through an OpenAI-compatible chat completions
// endpoint that the operator sets (--llm-url, --llm-model, the key from
// --llm-key-file or MCP_RUN_PYTHON_LLM_KEY), for calls whose client cannot
// sample. The server makes the requests, on the trusted side: code never
// sees the key, and its own network policy is unchanged.
package llmendpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// maxErrorBody bounds what an error response's body shows of itself.
const maxErrorBody = 512

// Client is an OpenAI-compatible endpoint; it is a supervisor.Asker.
type Client struct {
	// URL is the endpoint's base URL, such as https://api.openai.com/v1:
	// requests go to URL + "/chat/completions".
	URL   string
	Model string
	// Key is sent as a bearer token; "" sends none (a local server).
	Key string
	// Concurrency bounds the requests of one round at once; 0 for no limit.
	Concurrency int
	// BodyLimit bounds a response's body in bytes; 0 for no limit.
	BodyLimit int64
	// HTTP makes the requests; nil for http.DefaultClient.
	HTTP *http.Client
}

// Ask implements supervisor.Asker: each question is one chat completion,
// up to Concurrency at once. A question the endpoint could not answer says
// why in its Answer; the round fails only when ctx ends.
func (c *Client) Ask(ctx context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	answers := make([]supervisor.Answer, len(round))
	var g errgroup.Group
	if c.Concurrency > 0 {
		g.SetLimit(c.Concurrency)
	}
	for i, q := range round {
		g.Go(func() error {
			answers[i] = c.answer(ctx, q)
			return nil
		})
	}
	_ = g.Wait() // each answer holds its own error
	if ctx.Err() != nil {
		return nil, fmt.Errorf("asking %s: %w", c.URL, context.Cause(ctx))
	}
	return answers, nil
}

// message is one message of a chat completion request.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// request is a chat completion request.
type request struct {
	Model       string    `json:"model"`
	Messages    []message `json:"messages"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
}

// response is what the server reads of a chat completion.
type response struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// answer asks q, a question for the model.
func (c *Client) answer(ctx context.Context, q supervisor.Question) supervisor.Answer {
	if q.Sample == nil {
		return supervisor.Answer{Err: "the model's endpoint cannot ask the person"}
	}
	text, err := c.complete(ctx, q.Sample)
	if err != nil {
		msg := err.Error()
		if c.Key != "" {
			// An endpoint, or a proxy before it, may echo the request.
			msg = strings.ReplaceAll(msg, c.Key, "[the key]")
		}
		return supervisor.Answer{Err: msg}
	}
	return supervisor.Answer{Text: text}
}

// complete makes the chat completion of q and returns its text.
func (c *Client) complete(ctx context.Context, q *supervisor.SampleQuestion) (string, error) {
	req := request{Model: c.Model, MaxTokens: q.MaxTokens, Temperature: q.Temperature}
	if q.System != "" {
		req.Messages = append(req.Messages, message{Role: "system", Content: q.System})
	}
	req.Messages = append(req.Messages, message{Role: "user", Content: q.Prompt})
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encode the request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("the model's endpoint: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return "", fmt.Errorf("the model's endpoint: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var r io.Reader = resp.Body
	if c.BodyLimit > 0 {
		r = io.LimitReader(resp.Body, c.BodyLimit+1)
	}
	data, err := io.ReadAll(r)
	switch {
	case err != nil:
		return "", fmt.Errorf("the model's endpoint: read its answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("the model's endpoint answered %s: %s", resp.Status, cut(data))
	case c.BodyLimit > 0 && int64(len(data)) > c.BodyLimit:
		return "", fmt.Errorf("the model's endpoint answered more than %d bytes", c.BodyLimit)
	}
	var out response
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("the model's endpoint answered what is not a chat completion: %w", err)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
		return "", fmt.Errorf("the model's endpoint answered no message: %s", cut(data))
	}
	return *out.Choices[0].Message.Content, nil
}

// cut is the start of an error body, for a message.
func cut(b []byte) string {
	if len(b) > maxErrorBody {
		return string(b[:maxErrorBody]) + "..."
	}
	return string(b)
}
