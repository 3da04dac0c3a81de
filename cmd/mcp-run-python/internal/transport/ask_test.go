package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/llmendpoint"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport/transporttest"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// askScript asks the model 20 times in a row (past mcp-go's client's 10
// rounds by default), then a batch of three in one round, then the person
// for text and for a form.
const askScript = "repeat 20 q\nbatch a|b|c\nperson name?\nform age?"

// askWant is what askScript returns with mcptest's scripted model and person.
func askWant() string {
	var lines []string
	for i := range 20 {
		lines = append(lines, "re: q "+strconv.Itoa(i))
	}
	lines = append(lines, "re: a", "re: b", "re: c", "Ada", `{"age":36}`)
	return "<status>success</status>\n<return_value>\n" + strings.Join(lines, "\n") + "\n</return_value>"
}

// withAsk lets code ask the model and the person.
func withAsk(o *mcpserver.Options) {
	o.Ask = &mcpserver.AskOptions{Model: true, Person: true, Concurrency: 2, ParkTimeout: mcptest.Timeout, ParkedPerPrincipal: 4}
}

// askConnect returns how to connect a client with the scripted model and
// person, on every transport whose client mcp-go has: mcp-go's SSE client
// answers no server requests, so it is tested with 2026-07-28 only.
func askConnect(t *testing.T) map[string]func(t *testing.T, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client {
	t.Helper()
	http := func(kind transport.Kind) func(t *testing.T, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client {
		return func(t *testing.T, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client {
			t.Helper()
			_, url := transporttest.HTTPWith(t, kind, mcptest.AskRunner{}, []transporttest.Option{withAsk})
			var tr clienttransport.Interface
			var err error
			if kind == transport.SSE {
				tr, err = clienttransport.NewSSE(url + kind.Path())
			} else {
				tr, err = clienttransport.NewStreamableHTTP(url + kind.Path())
			}
			if err != nil {
				t.Fatal(err)
			}
			return mcptest.NewClient(t, tr, e, opts...)
		}
	}
	return map[string]func(t *testing.T, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client{
		"stdio": func(t *testing.T, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client {
			t.Helper()
			return askStdio(t, e, opts...)
		},
		"streamable_http":           http(transport.StreamableHTTP),
		"streamable_http_stateless": http(transport.StreamableHTTPStateless),
		"sse":                       http(transport.SSE),
	}
}

// askStdio serves AskRunner over stdio, code asking the model and the
// person, and connects its one client with opts.
func askStdio(tb testing.TB, e mcptest.Era, opts ...client.ClientOption) *mcptest.Client {
	tb.Helper()
	o := transport.Options{Options: mcpserver.Options{
		Version: "1.2.3-test", Runner: mcptest.AskRunner{}, ReturnMode: render.ReturnXML, Log: zap.NewNop(),
		Calls: mcpserver.NewCallGate(mcptest.Timeout, mcptest.Timeout),
	}}
	withAsk(&o.Options)
	in, out := mcptest.StdioPipes(tb, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return transport.ServeStdio(ctx, o, 2, in, out)
	})
	return mcptest.NewClient(tb, clienttransport.NewIO(in, out, io.NopCloser(strings.NewReader(""))), e, opts...)
}

// TestAskThroughTheClient runs code that asks 23 questions of the client's
// model in 22 rounds and two of the person, on every transport: a
// 2026-07-28 client answers each round of a parked call and retries (its
// mcp-go client allowed 30 rounds), an older one answers the server's
// requests during the call, on streamable HTTP on the POST's own stream,
// which mcp-go's own RequestSampling does not use (the client opens no GET
// stream here, so the call would hang).
func TestAskThroughTheClient(t *testing.T) {
	for name, connect := range askConnect(t) {
		for _, e := range []mcptest.Era{mcptest.Legacy, mcptest.Modern} {
			if (name == "sse" || name == "streamable_http_stateless") && e == mcptest.Legacy {
				// mcp-go's SSE client answers no server request
				// (TestAskOverSSE); a stateless server forgets what a
				// client declared (TestAskWithoutTheCapability).
				continue
			}
			t.Run(name+"/"+string(e), func(t *testing.T) {
				c := connect(t, e,
					client.WithSamplingHandler(mcptest.ScriptedModel{}),
					client.WithElicitationHandler(mcptest.ScriptedPerson{}),
					client.WithMaxInputRoundTrips(30))
				text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: askScript})
				if err != nil || isError || text != askWant() {
					t.Fatalf("error %v, isError %v, result\n%s\nwant\n%s", err, isError, text, askWant())
				}
			})
		}
	}
}

// TestAskWithoutTheCapability checks that a client that declared neither
// capability gets a refusal that names what would make it work, and that
// a person who declines is told apart; and that an older client of a
// stateless server, which forgets what it declared, is told so.
func TestAskWithoutTheCapability(t *testing.T) {
	stateless := askConnect(t)["streamable_http_stateless"](t, mcptest.Legacy, client.WithSamplingHandler(mcptest.ScriptedModel{}))
	text, _, err := stateless.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "model hi"})
	if want := "error: the client cannot answer llm_query: a stateless server does not know the sampling capability of a client older than protocol 2026-07-28, and the server has no --llm-url"; err != nil || !strings.Contains(text, want) {
		t.Errorf("stateless: error %v, result\n%s\nwithout %q", err, text, want)
	}
	connect := askConnect(t)["streamable_http"]
	for _, e := range []mcptest.Era{mcptest.Legacy, mcptest.Modern} {
		t.Run(string(e), func(t *testing.T) {
			c := connect(t, e)
			text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "model hi\nperson name?"})
			if err != nil || isError {
				t.Fatalf("error %v, isError %v, %s", err, isError, text)
			}
			for _, want := range []string{"error: the client cannot answer llm_query: it did not declare the sampling capability, and the server has no --llm-url", "error: the client cannot answer ask_user or input(): it did not declare the elicitation capability"} {
				if !strings.Contains(text, want) {
					t.Errorf("result\n%s\nwithout %q", text, want)
				}
			}
			c = connect(t, e, client.WithElicitationHandler(mcptest.ScriptedPerson{Decline: true}))
			text, _, err = c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "person name?"})
			if err != nil || !strings.Contains(text, "declined: the person chose to decline") {
				t.Errorf("declined: error %v, result\n%s", err, text)
			}
		})
	}
}

// TestAskParkedCallTimesOut leaves a 2026-07-28 client's call parked: its
// client gives up on the call while it fulfils a round, and never retries.
// The call is cancelled once --park-timeout has passed, and its run ends.
func TestAskParkedCallTimesOut(t *testing.T) {
	err := cancelWhileAsked(t, mcptest.Modern, func(o *mcpserver.Options) {
		withAsk(o)
		o.Ask.ParkTimeout = 100 * time.Millisecond
	})
	if err == nil || !strings.Contains(err.Error(), "--park-timeout") {
		t.Errorf("the run ended with %v, want the park timeout", err)
	}
}

// TestAskCancelledWhileTheClientAnswers cancels an older client's call
// while its client fulfils the server's request: the call, and its wait
// for the answer, end at once.
func TestAskCancelledWhileTheClientAnswers(t *testing.T) {
	if err := cancelWhileAsked(t, mcptest.Legacy, withAsk); !errors.Is(err, context.Canceled) {
		t.Errorf("the run ended with %v, want it cancelled", err)
	}
}

// cancelWhileAsked serves AskRunner over Streamable HTTP with opts, calls
// it from a client of era e whose model never answers, cancels the call
// once the model is asked, and returns how the run ended.
func cancelWhileAsked(t *testing.T, e mcptest.Era, opts ...transporttest.Option) error {
	t.Helper()
	r := &endedRunner{ended: make(chan error, 1)}
	_, url := transporttest.HTTPWith(t, transport.StreamableHTTP, r, opts)
	tr, err := clienttransport.NewStreamableHTTP(url + transport.StreamableHTTP.Path())
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	c := mcptest.NewClient(t, tr, e, client.WithSamplingHandler(blockingModel{asked: asked}))
	ctx, cancel := context.WithCancel(mcptest.Context(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Call(ctx, map[string]any{mcptest.CodeArgument: "model hi"})
		done <- err
	}()
	select {
	case <-asked:
	case <-time.After(mcptest.Timeout):
		t.Fatal("the client was never asked")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	select {
	case err := <-r.ended:
		return err
	case <-time.After(mcptest.Timeout):
		t.Fatal("the call still runs")
		return nil
	}
}

// endedRunner is an AskRunner that reports how each run ended.
type endedRunner struct {
	mcptest.AskRunner
	ended chan error
}

// Run implements mcpserver.Runner.
func (r *endedRunner) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	res, err := r.AskRunner.Run(ctx, req)
	if err != nil {
		err = fmt.Errorf("%w (cause: %w)", err, context.Cause(ctx))
	}
	r.ended <- err
	return res, err
}

// blockingModel signals that it was asked and answers only when its
// request is cancelled.
type blockingModel struct{ asked chan struct{} }

// CreateMessage implements client.SamplingHandler.
func (m blockingModel) CreateMessage(ctx context.Context, _ mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	close(m.asked)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAskTheEndpoint serves a client that cannot sample with an
// OpenAI-compatible endpoint behind: llm_query is answered there, with the
// operator's key, which the result never shows.
func TestAskTheEndpoint(t *testing.T) {
	const key = "sk-operator"
	var gotKey atomic.Value
	standIn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("Authorization"))
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": "endpoint: " + req.Messages[0].Content}}}})
	}))
	t.Cleanup(standIn.Close)
	_, url := transporttest.HTTPWith(t, transport.StreamableHTTP, mcptest.AskRunner{}, []transporttest.Option{func(o *mcpserver.Options) {
		withAsk(o)
		o.Ask.Endpoint = &llmendpoint.Client{URL: standIn.URL, Model: "m", Key: key}
	}})
	for _, e := range []mcptest.Era{mcptest.Legacy, mcptest.Modern} {
		t.Run(string(e), func(t *testing.T) {
			tr, err := clienttransport.NewStreamableHTTP(url + transport.StreamableHTTP.Path())
			if err != nil {
				t.Fatal(err)
			}
			c := mcptest.NewClient(t, tr, e, client.WithElicitationHandler(mcptest.ScriptedPerson{}))
			text, isError, err := c.Call(mcptest.Context(t), map[string]any{mcptest.CodeArgument: "batch hi|ho\nperson name?"})
			want := "<status>success</status>\n<return_value>\nendpoint: hi\nendpoint: ho\nAda\n</return_value>"
			if err != nil || isError || text != want {
				t.Fatalf("error %v, isError %v, result\n%s\nwant\n%s", err, isError, text, want)
			}
			if got := gotKey.Load(); got != "Bearer "+key {
				t.Errorf("the endpoint got Authorization %q", got)
			}
		})
	}
}

// BenchmarkAskRound measures what one llm_query round costs the front end
// over stdio beyond the model's own time (the scripted model answers at
// once): b.N questions asked one after the other in one call, by a
// 2026-07-28 client (a multi round-trip retry each) and by an older one (a
// request during the call each).
func BenchmarkAskRound(b *testing.B) {
	for _, e := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		b.Run(string(e), func(b *testing.B) {
			c := askStdio(b, e, client.WithSamplingHandler(mcptest.ScriptedModel{}), client.WithMaxInputRoundTrips(b.N+1))
			b.ResetTimer()
			text, isError, err := c.Call(context.Background(), map[string]any{mcptest.CodeArgument: "repeat " + strconv.Itoa(b.N) + " q"})
			if err != nil || isError || !strings.Contains(text, "re: q "+strconv.Itoa(b.N-1)) {
				b.Fatalf("error %v, isError %v, %.200s", err, isError, text)
			}
		})
	}
}
