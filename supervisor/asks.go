package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// askFrameHead is room, in a run's read limit, for what an ask frame holds
// besides its questions' JSON (bridge.AskSpec.FrameBytes).
const askFrameHead = 4 << 10

// maxRoundsInFlight bounds the rounds of one run that wait at once, as
// maxToolCallsInFlight bounds its tool calls: async code that gathers
// llm_query calls without end cannot make the server start goroutines
// without bound.
const maxRoundsInFlight = 64

// errWaitedTooLong ends a round whose answers took longer than
// AskLimits.Wait.
var errWaitedTooLong = errors.New("no answer in time")

// askRelay answers the rounds of questions of one run (llm_query,
// llm_query_batched, ask_user, input()): it checks each round against what
// the call's Ask allows and Config.AskLimits, asks Ask.Asker with a context
// that ends with the run (cancelled, stopped, killed, out of time) or after
// AskLimits.Wait, and charges the run's clock only the CPU time its worker
// uses while the round waits (runClock.pause). A round of a run that
// allows nothing, forged by its code, is refused without reaching an
// Asker.
type askRelay struct {
	*answering
	ask      Ask
	limits   AskLimits
	clock    *runClock
	progress *callProgress
	log      *zap.Logger
	// reply sends a round's answers (bridge.Conn.Answer).
	reply func(ctx context.Context, id int64, answers []bridge.Answer, errText string) error

	asked   int  // questions asked so far; read and written by handle only
	refused bool // a round was refused and logged; the next are logged at debug level
}

// newAskRelay returns the relay of a run whose context is ctx; progress
// (nil: none) hears whom it waits for.
func (c Config) newAskRelay(ctx context.Context, log *zap.Logger, ask Ask, progress *callProgress, clock *runClock, reply func(context.Context, int64, []bridge.Answer, string) error) *askRelay {
	return &askRelay{answering: newAnswering(ctx, maxRoundsInFlight), ask: ask, limits: c.AskLimits, clock: clock,
		progress: progress, log: log, reply: reply}
}

// spec is the run frame's Ask: what Python defines, and the limits it
// checks first; nil when the call asks nothing. readLimit is the largest
// frame the worker's connection reads otherwise.
func (r *askRelay) spec(readLimit int64) *bridge.AskSpec {
	if !r.ask.Model && !r.ask.Person {
		return nil
	}
	frame := readLimit - askFrameHead
	if r.limits.Batch > 0 && r.limits.PromptBytes > 0 {
		// Each question's two texts (a prompt and its system text, or a
		// message and its schema) at the limit, escaped as JSON.
		frame = max(frame, int64(r.limits.Batch)*(2*int64(r.limits.PromptBytes)+askFrameHead))
	}
	return &bridge.AskSpec{Model: r.ask.Model, Person: r.ask.Person, Batch: r.limits.Batch,
		PromptBytes: r.limits.PromptBytes, FrameBytes: frame}
}

// handle answers one round, in the background; see bridge.RunRequest.OnAsk.
// It is called from the goroutine that reads the run's frames, one round
// at a time.
func (r *askRelay) handle(f bridge.AskFrame) {
	round, refusal := r.check(f.Questions)
	if refusal == "" {
		r.asked += len(round)
	} else {
		r.logRefusal(f, refusal)
	}
	asked := r.asked
	r.start(func() {
		answers, errText := []bridge.Answer(nil), refusal
		if refusal == "" {
			answers, errText = r.round(round, asked)
		}
		reply(func(ctx context.Context) error { return r.reply(ctx, f.ID, answers, errText) })
	})
}

// check turns the questions of a round into the Asker's, and says why the
// round is refused, if it is: a kind the call does not allow, a round past
// AskLimits, a text past its size. Python checks the sizes and types
// first; a round that fails here was forged by the code.
func (r *askRelay) check(questions []bridge.Question) ([]Question, string) {
	l := r.limits
	switch {
	case len(questions) == 0:
		return nil, "a round without questions"
	case l.Batch > 0 && len(questions) > l.Batch:
		return nil, fmt.Sprintf("a round of %d questions, past the limit of %d in one round", len(questions), l.Batch)
	case l.Requests > 0 && r.asked+len(questions) > l.Requests:
		return nil, fmt.Sprintf("this call has asked %d questions, and may ask %d in all (--llm-requests)", r.asked, l.Requests)
	}
	round := make([]Question, len(questions))
	for i, q := range questions {
		var texts []string
		switch q.Kind {
		case bridge.AskModel:
			if !r.ask.Model {
				return nil, "this call may not ask the model (llm_query): the server or the client does not allow it"
			}
			if q.MaxTokens < 0 {
				return nil, fmt.Sprintf("max_tokens is %d: it must be positive", q.MaxTokens)
			}
			tokens := q.MaxTokens
			if l.MaxTokens > 0 && (tokens == 0 || tokens > l.MaxTokens) {
				tokens = l.MaxTokens
			}
			round[i].Sample = &SampleQuestion{Prompt: q.Prompt, System: q.System, MaxTokens: tokens, Temperature: q.Temperature, ModelHint: q.ModelHint}
			texts = []string{q.Prompt, q.System, q.ModelHint}
		case bridge.AskPerson:
			if !r.ask.Person {
				return nil, "this call may not ask the person (ask_user, input()): the server or the client does not allow it"
			}
			if q.Schema != nil && !isJSONObject(q.Schema) {
				return nil, "a schema that is not a JSON object"
			}
			round[i].Elicit = &ElicitQuestion{Message: q.Message, Schema: q.Schema}
			texts = []string{q.Message, string(q.Schema)}
		default:
			return nil, fmt.Sprintf("a question of the unknown kind %q", q.Kind)
		}
		for _, text := range texts {
			if l.PromptBytes > 0 && len(text) > l.PromptBytes {
				return nil, fmt.Sprintf("a text of %d bytes, past the limit of %d bytes", len(text), l.PromptBytes)
			}
		}
	}
	return round, ""
}

// isJSONObject reports whether raw is one JSON object.
func isJSONObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}

// round asks the Asker one round, the clock paused meanwhile, and returns
// its answers, checked, or why there are none. asked is the questions of
// the call so far, the round's included.
func (r *askRelay) round(round []Question, asked int) ([]bridge.Answer, string) {
	begin := time.Now()
	who := AskingModel
	if round[0].Elicit != nil {
		who = AskingPerson
	}
	resume := r.clock.pause()
	answered := r.progress.waiting(ProgressEvent{Asking: who, Questions: len(round), Asked: asked, AskLimit: r.limits.Requests})
	ctx, cancel := r.ctx, context.CancelFunc(func() {})
	if r.limits.Wait > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, r.limits.Wait, errWaitedTooLong)
	}
	answers, err := r.askUntil(ctx, round)
	ended := context.Cause(ctx) // before cancel, which ends ctx
	cancel()
	answered()
	resume()

	var out []bridge.Answer
	errText := ""
	switch {
	case errors.Is(ended, errWaitedTooLong):
		errText = fmt.Sprintf("no answer came within %s, the limit of one round's wait", r.limits.Wait)
	case ended != nil:
		errText = fmt.Sprintf("the call was stopped while it waited for %s: %v", who, ended)
	case err != nil:
		errText = err.Error()
	case len(answers) != len(round):
		errText = fmt.Sprintf("%d answers came for %d questions", len(answers), len(round))
	default:
		out = make([]bridge.Answer, len(answers))
		for i, a := range answers {
			out[i] = r.answer(a)
		}
	}
	r.logRound(round, out, errText, time.Since(begin))
	return out, errText
}

// askUntil asks the Asker and returns its answers, or ctx's end, whichever
// comes first: an Asker that overstays its context does not hold up the
// run, which goes on, or ends, without it.
func (r *askRelay) askUntil(ctx context.Context, round []Question) ([]Answer, error) {
	type reply struct {
		answers []Answer
		err     error
	}
	got := make(chan reply, 1)
	go func() {
		answers, err := r.ask.Asker.Ask(ctx, round)
		got <- reply{answers, err}
	}()
	select {
	case rep := <-got:
		return rep.answers, rep.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// answer is the worker's form of a, within AskLimits.AnswerBytes.
func (r *askRelay) answer(a Answer) bridge.Answer {
	size := len(a.Text) + len(a.Value)
	switch {
	case r.limits.AnswerBytes > 0 && size > r.limits.AnswerBytes:
		return bridge.Answer{Error: fmt.Sprintf("the answer was %d bytes, past the limit of %d bytes", size, r.limits.AnswerBytes)}
	case a.Value != nil && !json.Valid(a.Value):
		return bridge.Answer{Error: "the answer was not JSON"}
	case a.Declined && a.Err == "":
		a.Err = "declined"
	}
	return bridge.Answer{Text: a.Text, Value: a.Value, Declined: a.Declined, Error: a.Err}
}

// logRound logs one round: its sizes, how long it took and how it ended;
// the texts only at debug level, as they are the code's and the client's.
func (r *askRelay) logRound(round []Question, answers []bridge.Answer, errText string, took time.Duration) {
	asked, got := 0, 0
	for _, q := range round {
		if q.Sample != nil {
			asked += len(q.Sample.Prompt) + len(q.Sample.System)
		} else {
			asked += len(q.Elicit.Message) + len(q.Elicit.Schema)
		}
	}
	outcome, failed := "answered", 0
	for _, a := range answers {
		got += len(a.Text) + len(a.Value)
		if a.Error != "" {
			failed++
		}
	}
	switch {
	case errText != "":
		outcome = "failed: " + errText
	case failed > 0:
		outcome = fmt.Sprintf("%d of %d unanswered", failed, len(answers))
	}
	fields := []zap.Field{zap.Int("questions", len(round)), zap.Int("asked_bytes", asked), zap.Int("answer_bytes", got),
		zap.Duration("took", took), zap.String("outcome", outcome)}
	if ce := r.log.Check(zap.DebugLevel, "a round of questions"); ce != nil {
		ce.Write(append(fields, zap.Any("asked", round), zap.Any("answers", answers))...)
		return
	}
	r.log.Info("a round of questions", fields...)
}

// logRefusal logs a round refused before it was asked: the first of a run
// at info level, the rest, which code can send without end, at debug level.
func (r *askRelay) logRefusal(f bridge.AskFrame, why string) {
	level := zap.InfoLevel
	if r.refused {
		level = zap.DebugLevel
	}
	r.refused = true
	r.log.Log(level, "a round of questions refused", zap.Int("questions", len(f.Questions)), zap.String("why", why))
}
