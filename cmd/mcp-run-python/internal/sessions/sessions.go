// Package sessions keeps the Python sessions of the front end: who made
// each one, how long it may sit idle, and how many may live at once. The
// supervisor runs a session's interpreter; this package decides who may
// reach it.
//
// A session id is a capability: 130 random bits. Each session also has an
// owner, the identity.Principal that made it: the authenticated caller's
// where callers authenticate, else the client's (over stdio the one client;
// over HTTP its MCP session). A call from anyone else gets the answer an
// unknown id gets, so an id that leaks to another client tells it nothing.
// An owner of "" means that the id alone is the capability: the stateless
// transport and clients of the 2026-07-28 protocol, which have no MCP
// session, on a server without authentication. A session also ends with
// the MCP session that made it, whoever owns it.
package sessions

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/ttlcache"
)

// Interpreter is a session's interpreter: *supervisor.Session.
type Interpreter interface {
	Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error)
	Close()
}

// losable is an Interpreter that can be lost between calls, as a
// *supervisor.Session is when its worker passes a limit or dies: Done is
// closed when it ends, and Err then says why it was lost (nil: closed).
type losable interface {
	Done() <-chan struct{}
	Err() error
}

// Starter starts an interpreter for a new session.
type Starter func(ctx context.Context) (Interpreter, error)

// Config bounds the sessions.
type Config struct {
	// Idle is how long a session may go without a call before it ends.
	Idle time.Duration
	// Max is how many sessions may live at once, all owners together:
	// each holds a worker and its memory.
	Max int
	// MaxPerPrincipal, when above 0, is how many of them one owner may hold,
	// so that one caller cannot take them all. The owner "" (callers the
	// server cannot tell apart) has only Max.
	MaxPerPrincipal int
	// OnEnd, if not nil, is called with the id of each session that ends,
	// however it ends, to free what belongs to it (its files).
	OnEnd func(id string)
}

// Errors of calls that name a session they cannot use. Each is wrapped in
// an error that names the session and says what to do.
var (
	ErrTooMany = errors.New("too many sessions")
	ErrUnknown = errors.New("unknown session")
	ErrExpired = errors.New("session expired")
	ErrClosed  = errors.New("session closed")
	ErrLost    = errors.New("session lost")
)

// Registry holds the live sessions, and for a while the ids of ended ones,
// so that their owners learn why an id no longer works.
type Registry struct {
	cfg   Config
	start Starter
	log   *zap.Logger

	mu       sync.Mutex
	live     map[string]*session
	starting int // slots taken by sessions whose interpreter is starting
	// held counts each owner's live and starting sessions.
	held   map[identity.Principal]int
	closed bool
	// ended remembers why recent sessions ended, by id. Bounded in number
	// and age: past either, an ended id is merely unknown.
	ended *ttlcache.Cache[string, ending]
}

type session struct {
	id         string
	owner      identity.Principal
	mcpSession string // the MCP session that made it, whose end ends it; "" for none
	in         Interpreter
	busy       int         // calls running
	timer      *time.Timer // ends the session when idle
}

type ending struct {
	owner identity.Principal
	why   error
}

// Bounds of the memory of ended sessions.
const (
	maxEnded = 10_000
	endedTTL = 24 * time.Hour
)

// New returns a registry that starts interpreters with start.
func New(cfg Config, start Starter, log *zap.Logger) *Registry {
	return &Registry{
		cfg:   cfg,
		start: start,
		log:   log,
		live:  map[string]*session{},
		held:  map[identity.Principal]int{},
		ended: ttlcache.New[string, ending](maxEnded, endedTTL),
	}
}

// Create starts a session for owner, made in mcpSession ("" for none),
// and returns its id.
func (r *Registry) Create(ctx context.Context, owner identity.Principal, mcpSession string) (string, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return "", errors.New("cannot create a session: the server is shutting down")
	}
	if len(r.live)+r.starting >= r.cfg.Max {
		r.mu.Unlock()
		return "", fmt.Errorf("%w: cannot create a session: the server already runs its maximum of %d (--max-sessions); close one with close_session, or wait for an idle one to expire", ErrTooMany, r.cfg.Max)
	}
	if owner != "" && r.cfg.MaxPerPrincipal > 0 && r.held[owner] >= r.cfg.MaxPerPrincipal {
		r.mu.Unlock()
		return "", fmt.Errorf("%w: cannot create a session: you already hold the maximum of %d sessions one caller may hold (--max-sessions-per-principal); close one with close_session, or wait for an idle one to expire", ErrTooMany, r.cfg.MaxPerPrincipal)
	}
	r.starting++
	r.held[owner]++
	r.mu.Unlock()

	in, err := r.start(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starting--
	if err != nil {
		r.release(owner)
		return "", fmt.Errorf("cannot create a session: %w", err)
	}
	if r.closed {
		r.release(owner)
		in.Close()
		return "", errors.New("cannot create a session: the server is shutting down")
	}
	// Lower case: a URI host (session://{id}/...) may be lowered on its way.
	s := &session{id: strings.ToLower(rand.Text()), owner: owner, mcpSession: mcpSession, in: in}
	s.timer = time.AfterFunc(r.cfg.Idle, func() { r.expire(s) })
	r.live[s.id] = s
	if l, ok := in.(losable); ok {
		go r.endWhenLost(s, l)
	}
	return s.id, nil
}

// endWhenLost ends s once its interpreter is lost, between calls too: its
// slot and files are freed at once, and every later call naming it says
// why.
func (r *Registry) endWhenLost(s *session, l losable) {
	<-l.Done()
	if err := l.Err(); err != nil {
		r.end(s, lostError(s.id, err))
	}
}

// lostError is what the calls of session id get once its state was lost.
func lostError(id string, why error) error {
	return fmt.Errorf("%w: session %s: %w; create a new session with create_session", ErrLost, id, why)
}

// Run runs req in owner's session id. A session whose state was lost ends,
// and says so to this call and every later one.
func (r *Registry) Run(ctx context.Context, owner identity.Principal, id string, req supervisor.Request) (supervisor.Result, error) {
	s, err := r.take(owner, id)
	if err != nil {
		return supervisor.Result{}, err
	}
	res, err := s.in.Run(ctx, req)
	r.mu.Lock()
	s.busy--
	if r.live[id] == s {
		s.timer.Reset(r.cfg.Idle)
	}
	r.mu.Unlock()
	switch {
	case errors.Is(err, supervisor.ErrSessionLost):
		err = lostError(id, err)
		r.end(s, err)
	case res.SessionLost:
		r.end(s, fmt.Errorf("%w: session %s lost its state: its worker was stopped during a call; create a new session with create_session", ErrLost, id))
	}
	return res, err
}

// Check reports whether owner may use session id, with the error a call
// would get.
func (r *Registry) Check(owner identity.Principal, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.find(owner, id)
	return err
}

// take finds owner's session id and marks it busy, so that it does not
// expire under a call.
func (r *Registry) take(owner identity.Principal, id string) (*session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.find(owner, id)
	if err != nil {
		return nil, err
	}
	s.busy++
	s.timer.Stop()
	return s, nil
}

// find returns owner's live session id, or the error that explains why
// there is none. r.mu must be held.
func (r *Registry) find(owner identity.Principal, id string) (*session, error) {
	if s, ok := r.live[id]; ok && visible(s.owner, owner) {
		return s, nil
	}
	if e, ok := r.ended.Peek(id); ok && visible(e.owner, owner) {
		return nil, e.why
	}
	return nil, fmt.Errorf("%w %q: no session of yours has this id; create one with create_session", ErrUnknown, shorten(id))
}

// maxShownID is the most of an unknown id an error repeats: a real one is
// 26 characters, and a caller's megabyte of junk need not come back.
const maxShownID = 64

// shorten returns id, cut to maxShownID bytes with a mark when longer.
func shorten(id string) string {
	if len(id) <= maxShownID {
		return id
	}
	return strings.ToValidUTF8(id[:maxShownID], "") + "…"
}

// visible reports whether a session of owner may be used by caller.
func visible(owner, caller identity.Principal) bool { return owner == "" || owner == caller }

// Close ends owner's session id.
func (r *Registry) Close(owner identity.Principal, id string) error {
	r.mu.Lock()
	s, err := r.find(owner, id)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.end(s, fmt.Errorf("%w: session %s was closed with close_session; create a new one", ErrClosed, id))
	return nil
}

// CloseMCPSession ends every session made in the MCP session id, which
// ended.
func (r *Registry) CloseMCPSession(id string) {
	r.mu.Lock()
	var mine []*session
	for _, s := range r.live {
		if s.mcpSession == id && id != "" {
			mine = append(mine, s)
		}
	}
	r.mu.Unlock()
	for _, s := range mine {
		r.end(s, fmt.Errorf("%w: session %s ended with the MCP session that made it", ErrClosed, s.id))
	}
}

// expire ends s if it is still idle.
func (r *Registry) expire(s *session) {
	r.mu.Lock()
	idle := r.live[s.id] == s && s.busy == 0
	r.mu.Unlock()
	if idle {
		r.end(s, fmt.Errorf("%w: session %s expired after %s without a call; its state is gone: create a new session", ErrExpired, s.id, r.cfg.Idle))
	}
}

// end forgets s, remembering why for its owner, and stops its interpreter.
func (r *Registry) end(s *session, why error) {
	r.mu.Lock()
	if r.live[s.id] != s {
		r.mu.Unlock()
		return
	}
	delete(r.live, s.id)
	r.release(s.owner)
	s.timer.Stop()
	r.ended.Add(s.id, ending{owner: s.owner, why: why})
	r.mu.Unlock()
	// What belongs to the session goes before its interpreter, whose
	// worker can take a while to die: calls already say it ended.
	if r.cfg.OnEnd != nil {
		r.cfg.OnEnd(s.id)
	}
	s.in.Close()
	r.log.Debug("session ended", zap.String("session", s.id), zap.Error(why))
}

// release frees a session's place in its owner's count; r.mu is held.
func (r *Registry) release(owner identity.Principal) {
	if r.held[owner]--; r.held[owner] <= 0 {
		delete(r.held, owner)
	}
}

// Idle is how long a session may go without a call.
func (r *Registry) Idle() time.Duration { return r.cfg.Idle }

// Len is the number of live sessions, for a metric.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.live)
}

// Shutdown ends every session; no new one starts.
func (r *Registry) Shutdown() {
	r.mu.Lock()
	r.closed = true
	all := make([]*session, 0, len(r.live))
	for _, s := range r.live {
		all = append(all, s)
	}
	r.mu.Unlock()
	for _, s := range all {
		r.end(s, fmt.Errorf("%w: the server shut down", ErrClosed))
	}
}
