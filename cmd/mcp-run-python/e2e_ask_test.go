package main_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// rlmCode reads a 2 MB text in 64 chunks asked about in one round, no
// prompt of which may hold it all (--llm-prompt-limit 64KiB), combines the
// answers, and then asks 100 questions one after the other; its value is
// the number of checks that failed.
const rlmCode = `text = "".join(f"line {i}: {'x' * (i % 7)}\n" for i in range(150_000))
assert len(text) > 2_000_000
size = len(text) // 64 + 1
chunks = [text[i:i + size] for i in range(0, len(text), size)]
counts = llm_query_batched(["count the x: " + c for c in chunks], system="Answer with a number.")
failed = int(sum(int(n) for n in counts) != text.count("x")) + int(len(counts) != 64)
for i in range(100):
    failed += llm_query(f"echo {i}") != f"re: echo {i}"
name = ask_user("Your name?")
age = ask_user("Your age?", {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]})
failed += (name, age) != ("Ada", {"age": 36})
failed`

// countingModel answers a prompt that starts with "count the x: " with
// how many x follow, and any other with "re: " and the prompt, as
// mcptest.ScriptedModel does.
type countingModel struct{ mcptest.ScriptedModel }

// CreateMessage implements client.SamplingHandler.
func (m countingModel) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	res, err := m.ScriptedModel.CreateMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	if text := res.Content.(mcp.TextContent).Text; strings.HasPrefix(text, "re: count the x: ") {
		res.Content = mcp.NewTextContent(strconv.Itoa(strings.Count(strings.TrimPrefix(text, "re: count the x: "), "x")))
	}
	return res, nil
}

// TestE2EAskRLM runs the RLM-style code above through the real binary on
// each path to a client: a 2026-07-28 client's multi round-trip over stdio
// and Streamable HTTP, and an older client's requests during the call over
// both. A 2026-07-28 client holds no GET stream and no MCP session, so
// over HTTP it meets the stateless server.
func TestE2EAskRLM(t *testing.T) {
	s := setup(t)
	for _, tc := range []struct{ name, mode, protocol string }{
		{"stdio/2026-07-28", modeStdio, modernProtocol},
		{"stdio/older", modeStdio, e2eProtocol},
		{"streamable_http/2026-07-28", modeStateless, modernProtocol},
		{"streamable_http/older", modeStateful, e2eProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startTarget(t, s, tc.mode, "--sampling", "--elicitation", "--llm-requests", "200", "--llm-prompt-limit", "64KiB")
			c := tg.connectProtocol(t, tc.protocol,
				client.WithSamplingHandler(countingModel{}),
				client.WithElicitationHandler(mcptest.ScriptedPerson{}),
				client.WithMaxInputRoundTrips(200))
			c.expectRun(t, rlmCode, "<status>success</status>\n<return_value>\n0\n</return_value>")
		})
	}
}
