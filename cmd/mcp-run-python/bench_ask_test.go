package main_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// askRounds is how many llm_query rounds one call of BenchmarkAskRound
// asks, one after the other.
const askRounds = 200

// askBatches is how many 64-prompt rounds one call of BenchmarkAskRound
// asks, one after the other.
const askBatches = 11

// clockedModel answers as mcptest.ScriptedModel does, at once, and notes
// when each request reached it.
type clockedModel struct {
	mu    sync.Mutex
	times []time.Time
}

// CreateMessage implements client.SamplingHandler.
func (m *clockedModel) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	m.mu.Lock()
	m.times = append(m.times, time.Now())
	m.mu.Unlock()
	return mcptest.ScriptedModel{}.CreateMessage(ctx, req)
}

// gaps returns the time from the first request of each round of size
// requests to the first of the next, and forgets them.
func (m *clockedModel) gaps(size int) []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d []time.Duration
	for i := size; i < len(m.times); i += size {
		d = append(d, m.times[i].Sub(m.times[i-size]))
	}
	m.times = nil
	return d
}

// BenchmarkAskRound measures what one llm_query round costs through the
// real binary over stdio beyond the model's own time (the model answers at
// once): the time from one request reaching the client's model to the next,
// over 200 questions asked one after the other, for a 2026-07-28 client
// (each round a multi round-trip retry) and an older one (each a request
// during the call); and so for a round of llm_query_batched's 64 prompts,
// from its first request to the next round's.
func BenchmarkAskRound(b *testing.B) {
	s := benchSetup(b)
	for _, era := range []struct{ name, protocol string }{{"2026-07-28", modernProtocol}, {"older", e2eProtocol}} {
		b.Run(era.name, func(b *testing.B) {
			model := &clockedModel{}
			srv := startAskBench(b, s, era.protocol, model)
			srv.call(b, "1+1") // the pool is up
			var rounds, batches []time.Duration
			for range 5 {
				srv.call(b, "for i in range("+strconv.Itoa(askRounds)+"):\n    llm_query(f'q{i}')")
				rounds = append(rounds, model.gaps(1)...)
				srv.call(b, "for _ in range("+strconv.Itoa(askBatches)+"):\n    llm_query_batched([f'p{i}' for i in range(64)])")
				batches = append(batches, model.gaps(64)...)
			}
			report(b, "one llm_query round, "+era.name+", median of "+strconv.Itoa(len(rounds)), ms(percentile(rounds, 0.5)), "ms", "≤ 3 ms")
			report(b, "a 64-prompt round, "+era.name+", median of "+strconv.Itoa(len(batches)), ms(percentile(batches, 0.5)), "ms", "")
		})
	}
}

// startAskBench spawns the binary over stdio with --sampling and no limit
// on a call's questions, and initializes a client of protocol whose model
// is model.
func startAskBench(b *testing.B, s *e2eSetup, protocol string, model client.SamplingHandler) *benchServer {
	b.Helper()
	args := append(s.baseArgs(), "--sampling", "--llm-requests", "0", "--workers", "2", "stdio")
	srv, _ := startStdioAs(b, s.bin, args, protocol, client.WithSamplingHandler(model), client.WithMaxInputRoundTrips(askRounds+1))
	return srv
}
