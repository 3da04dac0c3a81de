package mcpserver

// What a call's code asks beyond the sandbox (issue 39): the model, through
// llm_query and llm_query_batched (--sampling), and the person at the
// client, through ask_user and input() (--elicitation). The supervisor
// bounds and relays the questions (supervisor.AskLimits); the front end
// chooses, per call, who answers them (DESIGN 1.7):
//
//   - a client of protocol 2026-07-28 that declared the capability: a
//     multi round-trip result, the call parked until the retry (park.go);
//   - an older client that declared it: requests to the client while the
//     call runs (clientAsker), on streamable HTTP on the call's own POST
//     stream (see ClientRequests);
//   - otherwise, for the model, the operator's OpenAI-compatible endpoint
//     (--llm-url, package llmendpoint), and failing that a refusal that
//     says what would make it work.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// AskOptions is what code may ask beyond the sandbox, and who answers when
// the client cannot.
type AskOptions struct {
	Model  bool // --sampling: llm_query and llm_query_batched
	Person bool // --elicitation: ask_user, and input()
	// Endpoint answers the model's questions of calls whose client cannot
	// sample (--llm-url); nil for none.
	Endpoint supervisor.Asker
	// Concurrency bounds the requests of one round sent to an older client
	// at once; 0 for no limit.
	Concurrency int
	// ParkTimeout is how long a call parked for a 2026-07-28 client's answers
	// waits for its retry before it is cancelled (--park-timeout); above 0.
	ParkTimeout time.Duration
	// ParkedPerPrincipal bounds the parked calls of one principal
	// (--max-parked-calls-per-principal); 0 for no limit.
	ParkedPerPrincipal int
	// MaxTokens is what a sampling request asks for when code names no
	// max_tokens (--llm-max-tokens); 0 for fallbackMaxTokens.
	MaxTokens int
}

// fallbackMaxTokens is a sampling request's maxTokens, which MCP requires,
// when neither code nor the operator names one.
const fallbackMaxTokens = 4096

// maxTokens is the maxTokens of a sampling request for code that names
// none.
func (o *AskOptions) maxTokens() int {
	if o.MaxTokens > 0 {
		return o.MaxTokens
	}
	return fallbackMaxTokens
}

// The kinds of question, as the log names them.
const (
	kindModel  = "model"
	kindPerson = "person"
)

// askDescription is what run_python_code's description says, after
// upstream's, of what code can ask: only with --sampling or --elicitation,
// so that without them tools/list stays upstream's.
func askDescription(o *AskOptions) string {
	if o == nil || (!o.Model && !o.Person) {
		return ""
	}
	d := "\nThe code can ask beyond the sandbox; each function blocks until the answer comes, in sync and async code alike, and raises an exception for a refusal, a decline or a limit:\n"
	if o.Model {
		d += `- llm_query(prompt, *, system=None, max_tokens=None, temperature=None, model_hint=None) -> str asks the client's model and returns its answer.
- llm_query_batched(prompts, **same) -> list[str] asks about every prompt at once, in one round, and returns the answers in order: use it to read input larger than one prompt can hold, in chunks.
`
	}
	if o.Person {
		d += `- ask_user(message, schema=None) asks the person at the client: with a JSON schema of an object it returns their answer as a dict, without one as a str; input(prompt) asks them too.
`
	}
	return d
}

// askFor returns what the call of req may ask and who answers, as its
// supervisor.Request.Ask; the zero Ask without o. park, when not nil, is
// how a 2026-07-28 client answers: the call is parked (see park.go).
// stateless says that the server keeps no MCP session, and so forgets
// what an older client declared when it initialized.
func askFor(ctx context.Context, o *AskOptions, req mcp.CallToolRequest, park supervisor.Asker, stateless bool, log *zap.Logger) supervisor.Ask {
	if o == nil || (!o.Model && !o.Person) {
		return supervisor.Ask{}
	}
	sampling, elicitation := clientCapabilities(ctx, req)
	// A task's tools/call has been answered: its stream is closed, and
	// only mcp-go's session (stdio, the GET stream) reaches the client.
	direct := clientAsker{ctx: ctx, concurrency: o.Concurrency, maxTokens: o.maxTokens(), viaSession: req.Params.Task != nil}
	var model, person supervisor.Asker
	modern := mcp.IsModernProtocol(server.RequestProtocolVersion(ctx))
	undeclared := "it did not declare the %s capability"
	if stateless && !modern {
		undeclared = "a stateless server does not know the %s capability of a client older than protocol 2026-07-28"
	}
	switch {
	case !o.Model:
	case sampling && modern && park != nil:
		model = loggedAsker{park, "client (multi round-trip)", log}
	case sampling && !modern:
		model = loggedAsker{direct, "client", log}
	case o.Endpoint != nil:
		model = loggedAsker{o.Endpoint, "endpoint", log}
	case sampling:
		model = refusal("this call of a 2026-07-28 client runs as a task, whose result cannot ask the client: call without a task, or the operator may set --llm-url")
	default:
		model = refusal("the client cannot answer llm_query: " + fmt.Sprintf(undeclared, "sampling") + ", and the server has no --llm-url to ask instead")
	}
	switch {
	case !o.Person:
	case elicitation && modern && park != nil:
		person = loggedAsker{park, "client (multi round-trip)", log}
	case elicitation && !modern:
		person = loggedAsker{direct, "client", log}
	case elicitation:
		person = refusal("this call of a 2026-07-28 client runs as a task, whose result cannot ask the client: call without a task")
	default:
		person = refusal("the client cannot answer ask_user or input(): " + fmt.Sprintf(undeclared, "elicitation"))
	}
	return supervisor.Ask{Model: o.Model, Person: o.Person, Asker: splitAsker{model: model, person: person}}
}

// clientCapabilities reports whether the client of the request can sample
// and elicit: as a 2026-07-28 request's _meta declares, or as the client
// declared when it initialized its session.
func clientCapabilities(ctx context.Context, req mcp.CallToolRequest) (sampling, elicitation bool) {
	var caps *mcp.ClientCapabilities
	if req.Params.Meta != nil {
		caps = req.Params.Meta.ClientCapabilities()
	}
	if caps == nil {
		if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
			c := s.GetClientCapabilities()
			caps = &c
		}
	}
	if caps == nil {
		return false, false
	}
	return caps.Sampling != nil, caps.Elicitation != nil
}

// splitAsker asks the model's questions of model and the person's of
// person, a round at a time: a round is one llm_query_batched or one
// ask_user, of one kind, but a round of both kinds is split and joined.
type splitAsker struct {
	model, person supervisor.Asker
}

// Ask implements supervisor.Asker.
func (s splitAsker) Ask(ctx context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	var models, persons []int
	for i, q := range round {
		if q.Sample != nil {
			models = append(models, i)
		} else {
			persons = append(persons, i)
		}
	}
	answers := make([]supervisor.Answer, len(round))
	for _, part := range []struct {
		asker supervisor.Asker
		which []int
	}{{s.model, models}, {s.person, persons}} {
		if len(part.which) == 0 {
			continue
		}
		if part.asker == nil {
			// Code cannot ask what its Ask did not define; the supervisor
			// should not relay it.
			return nil, errors.New("a question of a kind this call may not ask")
		}
		if len(part.which) == len(round) {
			return part.asker.Ask(ctx, round)
		}
		sub := make([]supervisor.Question, len(part.which))
		for j, i := range part.which {
			sub[j] = round[i]
		}
		got, err := part.asker.Ask(ctx, sub)
		if err != nil {
			return nil, err
		}
		for j, i := range part.which {
			answers[i] = got[j]
		}
	}
	return answers, nil
}

// refusal answers every question with its text, which code raises.
type refusal string

// Ask implements supervisor.Asker.
func (r refusal) Ask(_ context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	answers := make([]supervisor.Answer, len(round))
	for i := range answers {
		answers[i] = supervisor.Answer{Err: string(r)}
	}
	return answers, nil
}

// loggedAsker logs one line per question that inner answers: its kind, who
// answered, sizes, the round's duration and the outcome; the text only at
// debug level.
type loggedAsker struct {
	inner supervisor.Asker
	path  string
	log   *zap.Logger
}

// Ask implements supervisor.Asker.
func (l loggedAsker) Ask(ctx context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	start := time.Now()
	answers, err := l.inner.Ask(ctx, round)
	took := time.Since(start)
	for i, q := range round {
		var a supervisor.Answer
		if err == nil && i < len(answers) {
			a = answers[i]
		}
		kind, prompt := kindModel, ""
		if q.Sample != nil {
			prompt = q.Sample.Prompt
		} else {
			kind, prompt = kindPerson, q.Elicit.Message
		}
		outcome := "answered"
		switch {
		case err != nil:
			outcome = "failed: " + err.Error()
		case a.Declined:
			outcome = "declined: " + a.Err
		case a.Err != "":
			outcome = "refused: " + a.Err
		}
		fields := []zap.Field{
			zap.String("kind", kind), zap.String("by", l.path), zap.Int("round", len(round)),
			zap.Int("prompt_bytes", len(prompt)), zap.Int("answer_bytes", len(a.Text)+len(a.Value)),
			zap.Duration("took", took), zap.String("outcome", outcome),
		}
		if ce := l.log.Check(zap.DebugLevel, "asked"); ce != nil {
			ce.Write(append(fields, zap.String("prompt", prompt), zap.String("answer", a.Text), zap.ByteString("value", a.Value))...)
			continue
		}
		l.log.Info("asked", fields...)
	}
	return answers, err
}

// textAnswerField is the one field of the form that asks the person for
// text: elicitation asks for an object of primitive fields, never a bare
// string.
const textAnswerField = "answer"

// textAnswerSchema is the form of a question without a schema of its own.
var textAnswerSchema = json.RawMessage(`{"type":"object","properties":{"` + textAnswerField + `":{"type":"string"}},"required":["` + textAnswerField + `"]}`)

// samplingParams is the sampling/createMessage request of q, asking for
// maxTokens when q names none.
func samplingParams(q *supervisor.SampleQuestion, maxTokens int) mcp.CreateMessageParams {
	p := mcp.CreateMessageParams{
		Messages:     []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(q.Prompt)}},
		SystemPrompt: q.System,
		MaxTokens:    q.MaxTokens,
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens = maxTokens
	}
	if q.Temperature != nil {
		p.Temperature = *q.Temperature
	}
	if q.ModelHint != "" {
		p.ModelPreferences = &mcp.ModelPreferences{Hints: []mcp.ModelHint{{Name: q.ModelHint}}}
	}
	return p
}

// elicitationParams is the elicitation/create request of q.
func elicitationParams(q *supervisor.ElicitQuestion) mcp.ElicitationParams {
	schema := q.Schema
	if schema == nil {
		schema = textAnswerSchema
	}
	return mcp.ElicitationParams{Message: q.Message, RequestedSchema: schema}
}

// sampledAnswer is the Answer of a sampling result: its text.
func sampledAnswer(res *mcp.CreateMessageResult) supervisor.Answer {
	if res == nil {
		return supervisor.Answer{Err: "the client sent no answer"}
	}
	content, err := mcp.ParseSamplingContent(res.Content)
	if err != nil {
		return supervisor.Answer{Err: "the client's answer is not content: " + err.Error()}
	}
	blocks, ok := content.([]mcp.Content)
	if !ok {
		blocks = []mcp.Content{nil}
		if c, ok := content.(mcp.Content); ok {
			blocks[0] = c
		}
	}
	var text string
	for _, b := range blocks {
		switch b := b.(type) {
		case mcp.TextContent:
			text += b.Text
		case *mcp.TextContent:
			text += b.Text
		case nil:
			return supervisor.Answer{Err: "the model's answer has no content"}
		default:
			return supervisor.Answer{Err: fmt.Sprintf("the model answered with %T, not text", b)}
		}
	}
	return supervisor.Answer{Text: text}
}

// elicitedAnswer is the Answer of an elicitation result to q.
func elicitedAnswer(q *supervisor.ElicitQuestion, res *mcp.ElicitationResult) supervisor.Answer {
	if res == nil {
		return supervisor.Answer{Err: "the client sent no answer"}
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return supervisor.Answer{Declined: true, Err: "the person chose to " + string(res.Action)}
	}
	value, err := json.Marshal(res.Content)
	if err != nil {
		return supervisor.Answer{Err: "the person's answer is not JSON: " + err.Error()}
	}
	if q.Schema != nil {
		return supervisor.Answer{Value: value}
	}
	var form map[string]any
	if json.Unmarshal(value, &form) != nil {
		return supervisor.Answer{Err: "the person's answer is not the form asked for"}
	}
	text, ok := form[textAnswerField].(string)
	if !ok {
		return supervisor.Answer{Err: "the person's answer has no text"}
	}
	return supervisor.Answer{Text: text}
}

// inputID is the id of a round's question i in a multi round-trip result.
func inputID(i int) string { return "q" + strconv.Itoa(i) }

// clientAsker asks an older client, which takes requests while the call
// runs: through the transport's ClientRequests where it installed them (on
// streamable HTTP, the POST's own stream), else through mcp-go's session
// (stdio). ctx is the call's request's: it carries the client's session.
type clientAsker struct {
	ctx         context.Context
	concurrency int  // requests at once; 0 for no limit
	maxTokens   int  // of a sampling request whose code names none
	viaSession  bool // through mcp-go's session even where the transport installed ClientRequests
}

// Ask implements supervisor.Asker: each question is one request, up to
// concurrency at once; the round ends when ctx does.
func (c clientAsker) Ask(ctx context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	// The request's values (its session, its stream), ended with ctx.
	reqCtx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	answers := make([]supervisor.Answer, len(round))
	var g errgroup.Group
	if c.concurrency > 0 {
		g.SetLimit(c.concurrency)
	}
	for i, q := range round {
		g.Go(func() error {
			answers[i] = c.askOne(reqCtx, q)
			return nil
		})
	}
	_ = g.Wait() // each answer holds its own error
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("asking the client: %w", context.Cause(ctx))
	}
	return answers, nil
}

// askOne asks the client of ctx one question.
func (c clientAsker) askOne(ctx context.Context, q supervisor.Question) supervisor.Answer {
	if q.Sample != nil {
		p := samplingParams(q.Sample, c.maxTokens)
		res, err := viaClient(ctx, c.viaSession,
			func(r *clientRequester) (*mcp.CreateMessageResult, error) { return r.sample(ctx, p) },
			func(s *server.MCPServer) (*mcp.CreateMessageResult, error) {
				// Deprecated from protocol 2026-07-28 only, which older clients do not speak.
				return s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: p})
			})
		if err != nil {
			return supervisor.Answer{Declined: true, Err: "the client refused: " + err.Error()}
		}
		return sampledAnswer(res)
	}
	p := elicitationParams(q.Elicit)
	res, err := viaClient(ctx, c.viaSession,
		func(r *clientRequester) (*mcp.ElicitationResult, error) { return r.elicit(ctx, p) },
		func(s *server.MCPServer) (*mcp.ElicitationResult, error) {
			return s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: p})
		})
	if err != nil {
		return supervisor.Answer{Declined: true, Err: "the client refused: " + err.Error()}
	}
	return elicitedAnswer(q.Elicit, res)
}

// viaClient sends one request to the client of ctx: through the
// transport's ClientRequests where it installed them, unless viaSession,
// else through mcp-go's session.
func viaClient[R any](ctx context.Context, viaSession bool, own func(*clientRequester) (*R, error), mcpGo func(*server.MCPServer) (*R, error)) (*R, error) {
	if c := clientRequestsFrom(ctx); c != nil && !viaSession {
		return own(c)
	}
	if s := server.ServerFromContext(ctx); s != nil {
		return mcpGo(s)
	}
	return nil, errors.New("no MCP server in context")
}
