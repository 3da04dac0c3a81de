package mcpserver

// Multi round-trip requests (protocol 2026-07-28, SEP-2322) for a call
// whose code asks: the call runs on in the background, on a context of its
// own, while the tools/call that started it returns input_required with
// the round's questions and a signed requestState (state.go). The client
// answers them and retries the tools/call with its inputResponses and the
// state; the retry hands the answers to the code, still blocked in its
// question, and serves the call until its next round or its result. A
// parked call holds its worker, so it is bounded: --park-timeout for the
// retry to come, after which the call is cancelled (its worker killed),
// and --max-parked-calls-per-principal.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// errParkTimeout is the cause of a parked call's cancellation when its
// client's retry did not come in time.
var errParkTimeout = errors.New("the client did not send its answers within --park-timeout")

// errNoRetries is the cause of a parked call's cancellation, and the
// refusal of a question, once no retry can reach the server.
var errNoRetries = fmt.Errorf("%w: it takes no more requests, so the client's answers cannot come", ErrShuttingDown)

// parking holds the calls that asked a 2026-07-28 client and still run.
type parking struct {
	timeout      time.Duration
	perPrincipal int // 0 for no limit
	maxTokens    int // of a sampling request whose code names none
	signer       stateSigner

	mu     sync.Mutex
	calls  map[string]*parkedCall // by id
	counts map[identity.Principal]int
	ended  bool // no retry can come any more: CallGate.EndRetries
}

// newParking returns the parking of o, whose calls end when gate's
// retries do (nil for never).
func newParking(o *AskOptions, gate *CallGate) *parking {
	pk := &parking{
		timeout: o.ParkTimeout, perPrincipal: o.ParkedPerPrincipal, maxTokens: o.maxTokens(), signer: newStateSigner(),
		calls: map[string]*parkedCall{}, counts: map[identity.Principal]int{},
	}
	if gate != nil {
		gate.whenRetriesEnd(pk.endRetries)
	}
	return pk
}

// endRetries ends the calls that wait for a retry, and refuses the rounds
// asked after: no retry can come any more.
func (pk *parking) endRetries() {
	pk.mu.Lock()
	pk.ended = true
	calls := slices.Collect(maps.Values(pk.calls))
	pk.mu.Unlock()
	for _, p := range calls {
		p.end(errNoRetries)
	}
}

// parkedCall is one call of a 2026-07-28 client whose code may ask it. It
// is its code's supervisor.Asker.
type parkedCall struct {
	pk        *parking
	id        string
	principal identity.Principal
	session   string
	rounds    chan *parkedRound        // from Ask to the request serving the call
	result    chan *mcp.CallToolResult // the call's result, buffered
	cancel    context.CancelCauseFunc  // cancels the call's run

	mu      sync.Mutex
	round   int           // of the latest state given out
	waiting *parkedRound  // asked and not yet answered by a retry
	timer   *time.Timer   // cancels the call when the retry does not come
	sinks   *requestSinks // of the request serving the call; nil while parked
}

// parkedRound is one round of questions, and where its answers go.
type parkedRound struct {
	questions []supervisor.Question
	reply     chan roundReply // buffered
}

// roundReply is the answers to a round, or why it has none.
type roundReply struct {
	answers []supervisor.Answer
	err     error
}

// requestSinks are where the notifications of the request serving a call
// go: its log lines and its progress.
type requestSinks struct {
	onLine   func(supervisor.Line) // nil for none
	progress *progressSender       // nil for none
}

// start runs a call with run on a context detached from ctx's request and
// serves it from that request: it returns the call's result, or its first
// round of questions. run gets the call's Asker and the call's sinks.
func (pk *parking) start(ctx context.Context, principal identity.Principal, session string, sinks *requestSinks,
	run func(ctx context.Context, park supervisor.Asker, onLine func(supervisor.Line), onProgress func(supervisor.ProgressEvent)) *mcp.CallToolResult,
) *mcp.CallToolResult {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	p := &parkedCall{
		pk: pk, id: rand.Text(), principal: principal, session: session,
		rounds: make(chan *parkedRound), result: make(chan *mcp.CallToolResult, 1), cancel: cancel,
	}
	go func() {
		defer cancel(nil)
		p.result <- run(runCtx, p, p.onLine, p.onProgress)
	}()
	return p.serve(ctx, sinks)
}

// resume serves the retry req of a parked call: it checks its state, hands
// its answers to the call's code and serves the call from ctx's request. A
// state that is forged, another caller's, expired or used gives a tool
// error that says so, and leaves every call as it was.
func (pk *parking) resume(ctx context.Context, req mcp.CallToolRequest, principal identity.Principal, session string, sinks *requestSinks) *mcp.CallToolResult {
	claims, err := pk.signer.open(req.Params.RequestState, principal, session, time.Now())
	if err != nil {
		sinks.progress.close()
		return mcp.NewToolResultError(err.Error())
	}
	pk.mu.Lock()
	p := pk.calls[claims.Call]
	pk.mu.Unlock()
	if p == nil {
		sinks.progress.close()
		return mcp.NewToolResultError(errStateGone.Error())
	}
	r, err := p.take(claims.Round)
	if err != nil {
		sinks.progress.close()
		return mcp.NewToolResultError(err.Error())
	}
	r.reply <- roundReply{answers: answersOf(r.questions, req.Params.InputResponses)}
	return p.serve(ctx, sinks)
}

// admit counts p against its principal's parked calls the first time it
// parks; an error when that is one too many.
func (pk *parking) admit(p *parkedCall) error {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if pk.ended {
		return errNoRetries
	}
	if pk.calls[p.id] != nil {
		return nil
	}
	if pk.perPrincipal > 0 && p.principal != "" && pk.counts[p.principal] >= pk.perPrincipal {
		return fmt.Errorf("%d calls of this caller already wait for the client's answers, the most --max-parked-calls-per-principal allows", pk.perPrincipal)
	}
	pk.calls[p.id] = p
	pk.counts[p.principal]++
	return nil
}

// remove forgets p, once its call has ended or been cancelled.
func (pk *parking) remove(p *parkedCall) {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if pk.calls[p.id] == nil {
		return
	}
	delete(pk.calls, p.id)
	if pk.counts[p.principal]--; pk.counts[p.principal] == 0 {
		delete(pk.counts, p.principal)
	}
}

// parked returns how many calls wait for their clients' answers, or run
// between two rounds.
func (pk *parking) parked() int {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return len(pk.calls)
}

// Ask implements supervisor.Asker: the round goes to the request serving
// the call (now, or the client's next retry), and its answers come with
// the retry after.
func (p *parkedCall) Ask(ctx context.Context, round []supervisor.Question) ([]supervisor.Answer, error) {
	r := &parkedRound{questions: round, reply: make(chan roundReply, 1)}
	select {
	case p.rounds <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("asking the client: %w", context.Cause(ctx))
	}
	select {
	case rep := <-r.reply:
		return rep.answers, rep.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the client's answers: %w", context.Cause(ctx))
	}
}

// serve serves the call from the request of ctx until the call asks (the
// input_required result), ends (its result) or the request ends (the call
// is cancelled, and its result returned).
func (p *parkedCall) serve(ctx context.Context, sinks *requestSinks) *mcp.CallToolResult {
	defer sinks.progress.close()
	p.setSinks(sinks)
	defer p.setSinks(nil)
	for {
		select {
		case r := <-p.rounds:
			if err := p.pk.admit(p); err != nil {
				r.reply <- roundReply{err: err}
				continue
			}
			return p.park(r)
		case res := <-p.result:
			p.pk.remove(p)
			return res
		case <-ctx.Done():
			p.cancel(fmt.Errorf("the request was cancelled: %w", context.Cause(ctx)))
			res := <-p.result
			p.pk.remove(p)
			return res
		}
	}
}

// park gives out round r with a new state, and starts the wait for the
// retry that answers it.
func (p *parkedCall) park(r *parkedRound) *mcp.CallToolResult {
	p.mu.Lock()
	p.round++
	p.waiting = r
	p.timer = time.AfterFunc(p.pk.timeout, p.expire)
	claims := stateClaims{
		Call: p.id, Round: p.round, Principal: p.principal, Session: p.session,
		Expires: time.Now().Add(p.pk.timeout).UnixMilli(),
	}
	p.mu.Unlock()
	// endRetries may have run since admit, and missed this call's wait.
	p.pk.mu.Lock()
	ended := p.pk.ended
	p.pk.mu.Unlock()
	if ended {
		p.end(errNoRetries)
	}
	b := server.NewInputRequestBuilder(p.pk.signer.seal(claims))
	for i, q := range r.questions {
		if q.Sample != nil {
			b.Sample(inputID(i), samplingParams(q.Sample, p.pk.maxTokens))
		} else {
			b.Elicit(inputID(i), elicitationParams(q.Elicit))
		}
	}
	return b.ToolResult()
}

// take returns the round that the state of round answers, once: a second
// retry with the same state, or one with an older state, is refused.
func (p *parkedCall) take(round int) (*parkedRound, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if round != p.round || p.waiting == nil {
		return nil, errStateUsed
	}
	if !p.timer.Stop() {
		return nil, errStateGone // expire runs, or ran
	}
	r := p.waiting
	p.waiting = nil
	return r, nil
}

// expire cancels the call when its retry did not come in time.
func (p *parkedCall) expire() { p.end(errParkTimeout) }

// end cancels the call with cause if it waits for a retry.
func (p *parkedCall) end(cause error) {
	p.mu.Lock()
	waiting := p.waiting != nil
	p.waiting = nil
	p.mu.Unlock()
	if waiting {
		p.cancel(cause)
		p.pk.remove(p)
	}
}

// setSinks makes s the sinks of the call's notifications; nil drops them
// (no request serves the call).
func (p *parkedCall) setSinks(s *requestSinks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sinks = s
}

// currentSinks returns the sinks of the request serving the call, or nil.
func (p *parkedCall) currentSinks() *requestSinks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sinks
}

// onLine sends line to the request serving the call.
func (p *parkedCall) onLine(line supervisor.Line) {
	if s := p.currentSinks(); s != nil && s.onLine != nil {
		s.onLine(line)
	}
}

// onProgress sends ev to the request serving the call.
func (p *parkedCall) onProgress(ev supervisor.ProgressEvent) {
	if s := p.currentSinks(); s != nil && s.progress != nil {
		s.progress.event(ev)
	}
}

// answersOf returns the answers that responses give to questions, asked
// under their inputID.
func answersOf(questions []supervisor.Question, responses mcp.InputResponses) []supervisor.Answer {
	answers := make([]supervisor.Answer, len(questions))
	for i, q := range questions {
		id := inputID(i)
		if q.Sample != nil {
			if res := server.SamplingResponse(responses, id); res != nil {
				answers[i] = sampledAnswer(res)
				continue
			}
		} else if res := server.ElicitationResponse(responses, id); res != nil {
			answers[i] = elicitedAnswer(q.Elicit, res)
			continue
		}
		answers[i] = supervisor.Answer{Err: "the client sent no answer to this question"}
	}
	return answers
}
