package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// askerFunc is an Asker of a function, for the relay's unit tests.
type askerFunc func(ctx context.Context, round []Question) ([]Answer, error)

func (f askerFunc) Ask(ctx context.Context, round []Question) ([]Answer, error) { return f(ctx, round) }

// replies records the answer frames a relay sends.
type replies struct {
	mu     sync.Mutex
	frames []bridge.AnswerFrame
}

func (r *replies) reply(_ context.Context, id int64, answers []bridge.Answer, errText string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, bridge.AnswerFrame{ID: id, Answers: answers, Error: errText})
	return nil
}

func (r *replies) sent() []bridge.AnswerFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.frames)
}

// model and person are questions of the two kinds, as the worker sends them.
func model(prompt string, tokens int) bridge.Question {
	return bridge.Question{Kind: bridge.AskModel, Prompt: prompt, MaxTokens: tokens}
}

func person(message, schema string) bridge.Question {
	q := bridge.Question{Kind: bridge.AskPerson, Message: message}
	if schema != "" {
		q.Schema = json.RawMessage(schema)
	}
	return q
}

// TestAskRelayChecks: every round is checked against what the call allows
// and AskLimits before it reaches the Asker; what passes reaches it as the
// code asked, max_tokens clamped, and its answers are checked in turn.
func TestAskRelayChecks(t *testing.T) {
	limits := AskLimits{Requests: 5, Batch: 4, PromptBytes: 10, AnswerBytes: 8, MaxTokens: 100}
	both := Ask{Model: true, Person: true}
	tests := []struct {
		name    string
		ask     Ask
		rounds  [][]bridge.Question
		answers []Answer // of the Asker, for every round
		want    []bridge.AnswerFrame
		reached int          // rounds that reached the Asker
		asked   [][]Question // what reached it, when not nil
	}{
		{"a call that allows nothing", Ask{}, [][]bridge.Question{{model("x", 0)}, {person("y", "")}}, nil,
			[]bridge.AnswerFrame{
				{ID: 1, Error: "this call may not ask the model (llm_query): the server or the client does not allow it"},
				{ID: 2, Error: "this call may not ask the person (ask_user, input()): the server or the client does not allow it"},
			}, 0, nil},
		{"the model only", Ask{Model: true}, [][]bridge.Question{{model("x", 0), person("y", "")}}, nil,
			[]bridge.AnswerFrame{{ID: 1, Error: "this call may not ask the person (ask_user, input()): the server or the client does not allow it"}}, 0, nil},
		{"max_tokens clamped", both, [][]bridge.Question{{model("a", 0), model("b", 20), model("c", 9000)}}, []Answer{{Text: "1"}, {Text: "2"}, {Text: "3"}},
			[]bridge.AnswerFrame{{ID: 1, Answers: []bridge.Answer{{Text: "1"}, {Text: "2"}, {Text: "3"}}}}, 1,
			[][]Question{{{Sample: &SampleQuestion{Prompt: "a", MaxTokens: 100}}, {Sample: &SampleQuestion{Prompt: "b", MaxTokens: 20}}, {Sample: &SampleQuestion{Prompt: "c", MaxTokens: 100}}}}},
		{"past the batch", both, [][]bridge.Question{{model("a", 0), model("b", 0), model("c", 0), model("d", 0), model("e", 0)}}, nil,
			[]bridge.AnswerFrame{{ID: 1, Error: "a round of 5 questions, past the limit of 4 in one round"}}, 0, nil},
		{"past the requests", both, [][]bridge.Question{{model("a", 0), model("b", 0), model("c", 0)}, {model("d", 0), model("e", 0), model("f", 0)}, {model("g", 0), model("h", 0)}, {model("i", 0)}},
			[]Answer{{Text: "ok"}, {Text: "ok"}, {Text: "ok"}},
			[]bridge.AnswerFrame{
				{ID: 1, Answers: []bridge.Answer{{Text: "ok"}, {Text: "ok"}, {Text: "ok"}}},
				{ID: 2, Error: "this call has asked 3 questions, and may ask 5 in all (--llm-requests)"},
				{ID: 3, Answers: []bridge.Answer{{Text: "ok"}, {Text: "ok"}}},
				{ID: 4, Error: "this call has asked 5 questions, and may ask 5 in all (--llm-requests)"},
			}, 2, nil},
		{"a prompt past its size", both, [][]bridge.Question{{model("0123456789a", 0)}, {{Kind: bridge.AskModel, Prompt: "a", System: "0123456789a"}}, {person("0123456789a", "")}, {person("a", `{"title":"0123456789"}`)}}, nil,
			[]bridge.AnswerFrame{
				{ID: 1, Error: "a text of 11 bytes, past the limit of 10 bytes"},
				{ID: 2, Error: "a text of 11 bytes, past the limit of 10 bytes"},
				{ID: 3, Error: "a text of 11 bytes, past the limit of 10 bytes"},
				{ID: 4, Error: "a text of 22 bytes, past the limit of 10 bytes"},
			}, 0, nil},
		{"forged questions", both, [][]bridge.Question{{}, {{Kind: "shell"}}, {model("a", -1)}, {person("a", `[1]`)}}, nil,
			[]bridge.AnswerFrame{
				{ID: 1, Error: "a round without questions"},
				{ID: 2, Error: `a question of the unknown kind "shell"`},
				{ID: 3, Error: "max_tokens is -1: it must be positive"},
				{ID: 4, Error: "a schema that is not a JSON object"},
			}, 0, nil},
		{"answers checked", both, [][]bridge.Question{{person("a", ""), person("b", `{}`), person("c", ""), person("d", `{}`)}},
			[]Answer{{Text: "012345678"}, {Value: json.RawMessage(`{"x":1`)}, {Declined: true}, {Value: json.RawMessage(`{"x":1}`)}},
			[]bridge.AnswerFrame{{ID: 1, Answers: []bridge.Answer{
				{Error: "the answer was 9 bytes, past the limit of 8 bytes"},
				{Error: "the answer was not JSON"},
				{Declined: true, Error: "declined"},
				{Value: json.RawMessage(`{"x":1}`)},
			}}}, 1,
			[][]Question{{{Elicit: &ElicitQuestion{Message: "a"}}, {Elicit: &ElicitQuestion{Message: "b", Schema: json.RawMessage(`{}`)}}, {Elicit: &ElicitQuestion{Message: "c"}}, {Elicit: &ElicitQuestion{Message: "d", Schema: json.RawMessage(`{}`)}}}}},
		{"answers miscounted", both, [][]bridge.Question{{model("a", 0), model("b", 0)}}, []Answer{{Text: "1"}},
			[]bridge.AnswerFrame{{ID: 1, Error: "1 answers came for 2 questions"}}, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var asked [][]Question
				tt.ask.Asker = askerFunc(func(_ context.Context, round []Question) ([]Answer, error) {
					asked = append(asked, round)
					return tt.answers[:min(len(tt.answers), max(len(round), 1))], nil
				})
				cfg := Config{AskLimits: limits}
				var got replies
				r := cfg.newAskRelay(context.Background(), zap.NewNop(), tt.ask, nil, (&deadline{}).start(nil, nil, nil), got.reply)
				for i, q := range tt.rounds {
					r.handle(bridge.AskFrame{ID: int64(i + 1), Questions: q})
					synctest.Wait() // one round after the other, as the code asks them
				}
				r.close()
				if !reflect.DeepEqual(got.sent(), tt.want) {
					t.Errorf("answered\n%+v\nwant\n%+v", got.sent(), tt.want)
				}
				if tt.asked != nil && !reflect.DeepEqual(asked, tt.asked) {
					t.Errorf("asked %+v, want %+v", asked, tt.asked)
				}
				if len(asked) != tt.reached {
					t.Errorf("%d rounds reached the Asker, want %d", len(asked), tt.reached)
				}
			})
		})
	}
}

// TestAskRelayWaits: on the bubble's clock, a round that waits past
// AskLimits.Wait fails at Wait to the nanosecond, a run that ends ends its
// rounds at once, and neither waits for an Asker that overstays its
// context; the run's clock stands still while a round waits, and the call
// reports whom it waits for.
func TestAskRelayWaits(t *testing.T) {
	const wait = 10 * time.Second
	tests := []struct {
		name   string
		end    time.Duration // when the run ends; 0: not before the round
		took   time.Duration
		answer string
	}{
		{"past the wait", 0, wait, "no answer came within 10s, the limit of one round's wait"},
		{"the run ends", 3 * time.Second, 3 * time.Second, "the call was stopped while it waited for the person: the run ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				overstay := make(chan struct{})
				asker := askerFunc(func(context.Context, []Question) ([]Answer, error) {
					<-overstay // ignores its context
					return nil, errors.New("too late")
				})
				cfg := Config{Timeout: time.Second, AskLimits: AskLimits{Requests: 7, Wait: wait}}
				progress, log := newTestProgress()
				start := time.Now()
				var fired atomic.Int64 // since the start
				clock := cfg.newDeadline(start).start(progress, func() { fired.Store(int64(time.Since(start))) }, nil)
				var got replies
				r := cfg.newAskRelay(context.Background(), zap.NewNop(), Ask{Person: true, Asker: asker}, progress, clock, got.reply)
				if tt.end > 0 {
					time.AfterFunc(tt.end, r.close)
				}
				r.handle(bridge.AskFrame{ID: 1, Questions: []bridge.Question{person("?", "")}})
				synctest.Wait()
				time.Sleep(tt.took - time.Nanosecond)
				synctest.Wait()
				if sent := got.sent(); len(sent) != 0 {
					t.Fatalf("answered before %v: %+v", tt.took, sent)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if want := []bridge.AnswerFrame{{ID: 1, Error: tt.answer}}; !reflect.DeepEqual(got.sent(), want) {
					t.Errorf("answered %+v, want %+v", got.sent(), want)
				}
				if want := []ProgressEvent{{Phase: PhaseAsking, Limit: time.Minute, Asking: AskingPerson, Questions: 1, Asked: 1, AskLimit: 7}}; !reflect.DeepEqual(log.events(), want) {
					t.Errorf("progress %+v, want %+v", log.events(), want)
				}
				time.Sleep(time.Second - time.Nanosecond)
				synctest.Wait()
				if at := time.Duration(fired.Load()); at != 0 {
					t.Errorf("the run's limit passed at %v, during the wait", at)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if at := time.Duration(fired.Load()); at != tt.took+time.Second {
					t.Errorf("the run's limit passed at %v, want %v: its second and the wait", at, tt.took+time.Second)
				}
				r.close()
				clock.stop()
				close(overstay)
			})
		})
	}
}

// scriptedAsker answers every question at once and deterministically: the
// model with "re: " and the prompt (and its system text, tokens and hint),
// the person with the message reversed, or with a value naming it when
// there is a schema. A message or prompt of "decline" is declined, one of
// "fail" fails alone, and one of "block" blocks the round until its
// context ends, which it counts.
type scriptedAsker struct {
	mu        sync.Mutex
	rounds    [][]Question
	cancelled int
	delay     time.Duration // before every answer
}

func (a *scriptedAsker) Ask(ctx context.Context, round []Question) ([]Answer, error) {
	a.mu.Lock()
	a.rounds = append(a.rounds, round)
	a.mu.Unlock()
	answers := make([]Answer, len(round))
	for i, q := range round {
		text := ""
		if q.Sample != nil {
			text = q.Sample.Prompt
			answers[i].Text = fmt.Sprintf("re: %s|%s|%d|%s", q.Sample.Prompt, q.Sample.System, q.Sample.MaxTokens, q.Sample.ModelHint)
		} else {
			text = q.Elicit.Message
			runes := []rune(text)
			for l, r := 0, len(runes)-1; l < r; l, r = l+1, r-1 {
				runes[l], runes[r] = runes[r], runes[l]
			}
			answers[i].Text = string(runes)
			if q.Elicit.Schema != nil {
				answers[i] = Answer{Value: json.RawMessage(fmt.Sprintf(`{"asked":%q}`, text))}
			}
		}
		switch text {
		case "decline":
			answers[i] = Answer{Declined: true, Err: "the person declined"}
		case "fail":
			answers[i] = Answer{Err: "the client refused this one"}
		case "block":
			<-ctx.Done()
			a.mu.Lock()
			a.cancelled++
			a.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	select {
	case <-time.After(a.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return answers, nil
}

// asked returns the rounds asked so far, and how many were cancelled.
func (a *scriptedAsker) asked() ([][]Question, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]Question(nil), a.rounds...), a.cancelled
}

// waitCancelled waits for n of a's rounds to have seen their context end:
// the relay answers the code at once, without waiting for the Asker.
func (a *scriptedAsker) waitCancelled(t *testing.T, n int) {
	t.Helper()
	for range 500 {
		if _, cancelled := a.asked(); cancelled == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, cancelled := a.asked()
	t.Errorf("%d rounds saw their context end, want %d", cancelled, n)
}

// runAsking runs code in s (or in ss, when not nil) with ask, and returns
// its result, which must be a success, as JSON.
func runAsking(t *testing.T, s *Supervisor, ss *Session, ask Ask, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := Request{Code: code, Ask: ask}
	var res Result
	var err error
	if ss != nil {
		res, err = ss.Run(ctx, req)
	} else {
		res, err = s.Run(ctx, req)
	}
	if err != nil || res.Status != StatusSuccess {
		t.Fatalf("Run(%q) = %+v, %v (%s)", code, res, err, res.Error)
	}
	var v any
	if err := json.Unmarshal(res.ReturnValue, &v); err != nil {
		t.Fatalf("return value %s: %v", res.ReturnValue, err)
	}
	compact, _ := json.Marshal(v)
	return string(compact)
}

// The Python API end to end, with real workers and a scripted Asker: what
// code gets back, what it is refused, and what reaches the Asker.
func TestAsk(t *testing.T) {
	limits := AskLimits{Requests: 100, Batch: 64, PromptBytes: 1 << 20, AnswerBytes: 1 << 20, MaxTokens: 500, Wait: 5 * time.Second}
	s := start(t, Config{Workers: 1, AskLimits: limits, Grace: 5 * time.Second})
	tests := []struct {
		name     string
		model    bool
		person   bool
		code     string
		want     string
		rounds   int // that reach the Asker
		question int // questions of the last round
	}{
		{"llm_query", true, false, `llm_query("hi", system="be brief", max_tokens=9000, model_hint="small")`,
			`"re: hi|be brief|500|small"`, 1, 1},
		{"100 sequential queries", true, false, "[llm_query(str(i)) for i in range(100)][-1]", `"re: 99||500|"`, 100, 1},
		{"a batch of 64 is one round", true, false, "r = llm_query_batched([f'chunk {i}' for i in range(64)], max_tokens=20)\n[len(r), r[0], r[63]]",
			`[64,"re: chunk 0||20|","re: chunk 63||20|"]`, 1, 64},
		{"an empty batch asks nothing", true, false, "llm_query_batched([])", `[]`, 0, 0},
		{"past the batch limit", true, false, "try:\n    llm_query_batched(['x'] * 65)\nexcept ValueError as e:\n    r = str(e)\nr",
			`"llm_query_batched(): 65 prompts, past the limit of 64 in one round: send them in rounds of 64"`, 0, 0},
		{"a flood past --llm-requests", true, false, "n = e = 0\nfor i in range(150):\n    try:\n        llm_query('x'); n += 1\n    except LLMQueryError as x:\n        e += 1; m = str(x)\n[n, e, m]",
			`[100,50,"this call has asked 100 questions, and may ask 100 in all (--llm-requests)"]`, 100, 1},
		{"a giant prompt", true, false, "try:\n    llm_query('x' * (2 << 20))\nexcept ValueError as e:\n    r = str(e)\nr",
			`"llm_query() argument prompt is 2097152 bytes, past the limit of 1048576 bytes: send a shorter text, or slices of it"`, 0, 0},
		{"a prompt that is no str", true, false, "try:\n    llm_query(5)\nexcept TypeError as e:\n    r = str(e)\nr", `"llm_query() argument prompt must be str, not int"`, 0, 0},
		{"one prompt of a batch fails", true, false, "try:\n    llm_query_batched(['a', 'fail', 'b'])\nexcept LLMQueryError as e:\n    r = [str(e), e.answers[0], str(e.answers[1])]\nr",
			`["llm_query_batched(): 1 of 3 got no answer; the first, prompt 1: the client refused this one","re: a||500|","prompt 1: the client refused this one"]`, 1, 3},
		{"async code", true, false, "import asyncio\nasync def f(i):\n    await asyncio.sleep(0)\n    return llm_query(str(i))\nawait asyncio.gather(*[f(i) for i in range(3)])",
			`["re: 0||500|","re: 1||500|","re: 2||500|"]`, 3, 1},
		{"ask_user", false, true, "ask_user('olleh')", `"hello"`, 1, 1},
		{"ask_user with a schema", false, true, "ask_user('pick', {'type': 'object', 'properties': {'n': {'type': 'integer'}}})", `{"asked":"pick"}`, 1, 1},
		{"input asks the person", false, true, "input('?eman ruoy')", `"your name?"`, 1, 1},
		{"a person who declines", false, true, "try:\n    ask_user('decline')\nexcept UserDeclinedError as e:\n    r = [str(e), isinstance(e, AskUserError), isinstance(e, EOFError)]\nr",
			`["the person declined",true,true]`, 1, 1},
		{"the model is not the person's", false, true, "import builtins\n[hasattr(builtins, n) for n in ('llm_query', 'ask_user', 'AskError')]", `[false,true,true]`, 0, 0},
		{"the exceptions", true, true, "[c.__mro__[1].__name__ for c in (AskError, LLMQueryError, AskUserError)] + [str(UserDeclinedError('no'))]",
			`["RuntimeError","AskError","AskError","no"]`, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asker := &scriptedAsker{}
			got := runAsking(t, s, nil, Ask{Model: tt.model, Person: tt.person, Asker: asker}, tt.code)
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			rounds, _ := asker.asked()
			if len(rounds) != tt.rounds {
				t.Fatalf("%d rounds reached the Asker, want %d", len(rounds), tt.rounds)
			}
			if tt.rounds > 0 && len(rounds[len(rounds)-1]) != tt.question {
				t.Errorf("the last round had %d questions, want %d", len(rounds[len(rounds)-1]), tt.question)
			}
		})
	}
}

// Without Ask the interpreter is upstream's: no new names, input() its
// own; and code that forges an ask frame is answered with a refusal.
func TestAskNothing(t *testing.T) {
	s := start(t, Config{Workers: 1, AskLimits: AskLimits{Requests: 100}})
	got := runAsking(t, s, nil, Ask{}, "import builtins, sys\n"+
		"[[n for n in ('llm_query', 'llm_query_batched', 'ask_user', 'AskError') if hasattr(builtins, n)], 'mcp_ask' in sys.modules, input.__module__, input.__qualname__]")
	if got != `[[],false,"builtins","input"]` {
		t.Errorf("got %s", got)
	}
	forged := "import json\nfrom _mcp_ask_bridge import ask\nfrom pyodide.ffi import run_sync\n" +
		`json.loads(run_sync(ask('[{"kind":"model","prompt":"x"},{"kind":"person","message":"y"}]')))['error']`
	if got := runAsking(t, s, nil, Ask{}, forged); got != `"this call may not ask the model (llm_query): the server or the client does not allow it"` {
		t.Errorf("a forged round: got %s", got)
	}
}

// A session's runs each get what their own Ask allows, and nothing of an
// earlier run's: a name it kept asks nothing.
func TestAskSession(t *testing.T) {
	s := start(t, Config{Workers: 1})
	ss, err := s.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	asker := &scriptedAsker{}
	if got := runAsking(t, s, ss, Ask{Model: true, Person: true, Asker: asker}, "kept = llm_query\nkept_input = input\nllm_query('a')"); got != `"re: a||0|"` {
		t.Errorf("first run: %s", got)
	}
	got := runAsking(t, s, ss, Ask{}, "import builtins\ntry:\n    kept('b')\nexcept RuntimeError as e:\n    r = str(e)\n[r, hasattr(builtins, 'llm_query'), input is kept_input]")
	if got != `["llm_query() cannot ask: this call may not ask anything (the server needs --sampling or --elicitation)",false,false]` {
		t.Errorf("second run: %s", got)
	}
	if got := runAsking(t, s, ss, Ask{Person: true, Asker: asker}, "input('c')"); got != `"c"` {
		t.Errorf("third run: %s", got)
	}
	if rounds, _ := asker.asked(); len(rounds) != 2 {
		t.Errorf("%d rounds reached the Asker, want 2", len(rounds))
	}
	// A call cancelled while its round waits keeps the session: the round
	// is answered at once, and the interrupt reaches the code.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for rounds, _ := asker.asked(); len(rounds) < 3; rounds, _ = asker.asked() {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := ss.Run(ctx, Request{Code: "llm_query('block')", Ask: Ask{Model: true, Asker: asker}}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run: %v", err)
	}
	if got := runAsking(t, s, ss, Ask{}, "import builtins\n[kept_input is input, hasattr(builtins, 'llm_query')]"); got != `[false,false]` {
		t.Errorf("after the cancelled run: %s", got)
	}
}

// The time a run waits for its answers is not charged to its time limit;
// a round that waits past AskLimits.Wait fails, and a call cancelled while
// a round waits ends at once, the round's context with it.
func TestAskWaits(t *testing.T) {
	s := start(t, Config{Workers: 1, Timeout: 2 * time.Second, Grace: 5 * time.Second, AskLimits: AskLimits{Wait: 2 * time.Second}})
	t.Run("not charged to the timeout", func(t *testing.T) {
		asker := &scriptedAsker{delay: 1200 * time.Millisecond} // together longer than the limit
		var phases []ProgressEvent
		var mu sync.Mutex
		req := Request{Code: "[llm_query('a'), llm_query('b')]", Ask: Ask{Model: true, Asker: asker}, OnProgress: func(ev ProgressEvent) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Phase == PhaseAsking {
				phases = append(phases, ev)
			}
		}}
		res, err := s.Run(context.Background(), req)
		if err != nil || res.Status != StatusSuccess {
			t.Fatalf("%+v, %v (%s)", res, err, res.Error)
		}
		mu.Lock()
		defer mu.Unlock()
		var asked []int
		for _, ev := range phases {
			if ev.Asking != AskingModel || ev.Questions != 1 || ev.Spent >= 2*time.Second {
				t.Errorf("progress while asking: %+v", ev)
			}
			if len(asked) == 0 || asked[len(asked)-1] != ev.Asked {
				asked = append(asked, ev.Asked)
			}
		}
		if !slices.Equal(asked, []int{1, 2}) {
			t.Errorf("progress while asking said %v questions asked, want 1, then 2", asked)
		}
	})
	t.Run("past the wait", func(t *testing.T) {
		asker := &scriptedAsker{}
		got := runAsking(t, s, nil, Ask{Model: true, Asker: asker}, "try:\n    llm_query('block')\nexcept LLMQueryError as e:\n    r = str(e)\nr")
		if got != `"no answer came within 2s, the limit of one round's wait"` {
			t.Errorf("got %s", got)
		}
		asker.waitCancelled(t, 1)
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		asker := &scriptedAsker{}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for {
				if rounds, _ := asker.asked(); len(rounds) > 0 {
					cancel()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		begin := time.Now()
		_, err := s.Run(ctx, Request{Code: "llm_query('block')", Ask: Ask{Model: true, Asker: asker}})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "call cancelled") {
			t.Errorf("Run = %v, want the call cancelled", err)
		}
		if took := time.Since(begin); took > 2500*time.Millisecond {
			t.Errorf("the cancelled call took %v: the code should have stopped well within the grace (5 s)", took)
		}
		asker.waitCancelled(t, 1)
	})
}

// A request that may ask needs someone to answer: the front end's mistake
// is an error at once, not a run whose questions go nowhere.
func TestAskWithoutAsker(t *testing.T) {
	for _, ask := range []Ask{{Model: true}, {Person: true}} {
		p := &pipeline{s: &Supervisor{}, req: Request{Code: "1", Ask: ask}}
		if p.resolve(context.Background()) || p.err == nil || p.err.Error() != "supervisor: the request's Ask has no Asker" {
			t.Errorf("%+v: resolve = %v", ask, p.err)
		}
	}
}

// A round at its limits gets through the bridge's read limit, which a run
// that may ask raises for it; one that JSON makes larger than that is
// refused in Python, before it is sent, rather than ending the connection.
func TestAskReadLimit(t *testing.T) {
	s := start(t, Config{Workers: 1, OutputLimit: 64 << 10, CodeLimit: 64 << 10, AskLimits: AskLimits{Batch: 4, PromptBytes: 1 << 20}})
	if limit := s.workers.ServingReadLimit(); limit > 2<<20 {
		t.Fatalf("the serving read limit is %d: a round of 4 MiB would not pass it anyway", limit)
	}
	ask := Ask{Model: true, Asker: &scriptedAsker{}}
	if got := runAsking(t, s, nil, ask, "r = llm_query_batched(['x' * (1 << 20)] * 4, system='y' * (1 << 20))\n[len(r), len(r[3])]"); got != `[4,2097160]` {
		t.Errorf("a round at its limits: %s", got)
	}
	got := runAsking(t, s, nil, ask, "try:\n    llm_query_batched(['\\x01' * (1 << 20)] * 4)\nexcept ValueError as e:\n    r = str(e)\nr")
	if want := `"llm_query_batched(): this round is 25165941 bytes as JSON, past the limit of 8404992: send fewer or shorter texts"`; got != want {
		t.Errorf("a round JSON makes too large: %s, want %s", got, want)
	}
}

// Async code that computes while another task's round waits is charged
// for it, and stopped at its time limit during the wait, however long the
// wait may be: the worker's CPU time counts while a round waits.
func TestAskChargesComputing(t *testing.T) {
	s := start(t, Config{Workers: 1, Timeout: time.Second, Grace: 5 * time.Second, AskLimits: AskLimits{Wait: time.Minute}})
	asker := &scriptedAsker{}
	code := "import asyncio\nasync def ask():\n    llm_query('block')\nasync def spin():\n    await asyncio.sleep(0.05)\n    while True:\n        pass\n" +
		"await asyncio.gather(ask(), spin())"
	begin := time.Now()
	res, err := s.Run(context.Background(), Request{Code: code, Ask: Ask{Model: true, Asker: asker}})
	took := time.Since(begin)
	if err != nil || !strings.Contains(res.Error, "TimeoutError: the code did not finish within 1s and was interrupted") {
		t.Fatalf("%+v, %v (%s)", res, err, res.Error)
	}
	// Uncharged, the loop would run through the round's wait (a minute) and then its second.
	if took > 30*time.Second {
		t.Errorf("the call took %v: the loop ran on while the round waited", took)
	}
	asker.waitCancelled(t, 1)
}
