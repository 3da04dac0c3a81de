package transport

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// sessionIDPrefix starts the session IDs, as mcp-go's own.
const sessionIDPrefix = "mcp-session-"

// sessionIDs is the session ID manager of Streamable HTTP with sessions
// (server.SessionIdManager): it knows the live sessions, which caps them,
// and mcp-go answers 404 to a request for any other. It replaces mcp-go's
// InsecureStatefulSessionIdManager (WithStateful), which keeps every
// terminated ID for ever; here a terminated ID is forgotten and gets the
// same 404 as an unknown one. As mcp-go's SessionIdManagerResolver it hands
// each initialize request admitted under the cap a manager that turns the
// request's reservation into its session.
type sessionIDs struct {
	max          int // 0: no cap
	perPrincipal int // 0: no cap per principal

	mu sync.Mutex
	// live maps each live session to the principal that started it ("" for
	// none: no authentication).
	live map[string]identity.Principal
	// reserved counts the initialize requests admitted whose session has
	// not started yet; each may add one.
	reserved int
	// held counts each principal's live and reserved sessions.
	held principalCounts
}

// reservation is the room an admitted initialize request holds for its
// session; done (guarded by sessionIDs.mu) once the session has started or
// the request has ended without one.
type reservation struct {
	done      bool
	principal identity.Principal // who asked: the session's owner
}

// reservationKey is the context key of a request's *reservation.
type reservationKey struct{}

// newSessionIDs returns a manager with the caps of l.
func newSessionIDs(l Limits) *sessionIDs {
	return &sessionIDs{max: l.MaxMCPSessions, perPrincipal: l.MaxMCPSessionsPerPrincipal, live: map[string]identity.Principal{}, held: principalCounts{}}
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager of r, which is nil outside requests (the idle sweeper).
func (s *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if res, ok := r.Context().Value(reservationKey{}).(*reservation); ok {
			return reservedIDs{sessionIDs: s, res: res}
		}
	}
	return s
}

// reservedIDs is the manager of an initialize request admitted under the
// cap.
type reservedIDs struct {
	*sessionIDs
	res *reservation
}

// Generate implements server.SessionIdManager: the session takes the
// request's reservation.
func (m reservedIDs) Generate() string { return m.generate(m.res) }

// Generate implements server.SessionIdManager: a new live session.
func (s *sessionIDs) Generate() string { return s.generate(nil) }

// generate starts a session, in place of res when not nil.
func (s *sessionIDs) generate(res *reservation) string {
	id := sessionIDPrefix + rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	var principal identity.Principal
	if res != nil {
		principal = res.principal
	}
	s.end(res)
	s.live[id] = principal
	s.held.add(principal)
	return id
}

// end ends a reservation, once; s.mu is held.
func (s *sessionIDs) end(res *reservation) {
	if res != nil && !res.done {
		res.done = true
		s.reserved--
		s.held.remove(res.principal)
	}
}

// Validate implements server.SessionIdManager: live sessions are valid.
func (s *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if !s.isLive(id) {
		return false, fmt.Errorf("no live session %q", id)
	}
	return false, nil
}

// Terminate implements server.SessionIdManager: the session ends, whether
// its client, the idle timeout or the shutdown ends it.
func (s *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if principal, ok := s.live[id]; ok {
		delete(s.live, id)
		s.held.remove(principal)
	}
	return false, nil
}

// isLive reports whether id names a live session.
func (s *sessionIDs) isLive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[id]
	return ok
}

// ownedBy reports whether id names a live session that principal started.
func (s *sessionIDs) ownedBy(id string, principal identity.Principal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.live[id]
	return ok && owner == principal
}

// count returns the number of live sessions.
func (s *sessionIDs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// reserve admits an initialize request if a session may still start, and
// returns r carrying its reservation; the caller calls unreserve once the
// request is done. Counting the reserved ones keeps concurrent initialize
// requests from passing the caps together. Its error, past a cap, is the
// message that names it.
func (s *sessionIDs) reserve(r *http.Request) (*http.Request, *reservation, error) {
	principal := principalOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && len(s.live)+s.reserved >= s.max {
		return r, nil, fmt.Errorf("too many MCP sessions: the server holds its limit of %d (--max-mcp-sessions); try again later, or end unused sessions with DELETE", s.max)
	}
	if err := s.held.check(principal, s.perPrincipal); err != nil {
		return r, nil, err
	}
	s.reserved++
	s.held.add(principal)
	res := &reservation{principal: principal}
	return r.WithContext(context.WithValue(r.Context(), reservationKey{}, res)), res, nil
}

// principalCounts counts the MCP sessions of each principal, for the cap
// per principal; "" (no authentication) is not counted.
type principalCounts map[identity.Principal]int

// check returns the error of a new session of principal past max (0: no
// cap), which names the cap.
func (c principalCounts) check(principal identity.Principal, max int) error {
	if principal == "" || max <= 0 || c[principal] < max {
		return nil
	}
	return fmt.Errorf("too many MCP sessions: you hold the %d one caller may hold (--max-mcp-sessions-per-principal); end unused ones (DELETE, or close the stream), or wait for idle ones to end", max)
}

func (c principalCounts) add(principal identity.Principal) {
	if principal != "" {
		c[principal]++
	}
}

func (c principalCounts) remove(principal identity.Principal) {
	if principal == "" {
		return
	}
	if c[principal]--; c[principal] <= 0 {
		delete(c, principal)
	}
}

// unreserve ends a reservation of reserve that started no session.
func (s *sessionIDs) unreserve(res *reservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end(res)
}

// listenStreams holds the standalone GET streams of Streamable HTTP with
// sessions: one per session, as the MCP TypeScript SDK allows (a second
// gets 409), so that streams are capped with the sessions. A stream is
// closed when its session ends; mcp-go would keep it open after a DELETE or
// the idle timeout.
type listenStreams struct {
	mu   sync.Mutex
	open map[string]*listenStream
}

// listenStream is one open GET stream.
type listenStream struct{ cancel context.CancelFunc }

// newListenStreams returns an empty set.
func newListenStreams() *listenStreams {
	return &listenStreams{open: map[string]*listenStream{}}
}

// start records the stream of session id, which cancel closes; false when
// the session has one already.
func (s *listenStreams) start(id string, cancel context.CancelFunc) (*listenStream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[id]; ok {
		return nil, false
	}
	st := &listenStream{cancel: cancel}
	s.open[id] = st
	return st, true
}

// stop forgets a stream that has ended.
func (s *listenStreams) stop(id string, st *listenStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id] == st {
		delete(s.open, id)
	}
}

// end closes the stream of a session that has ended.
func (s *listenStreams) end(id string) {
	s.mu.Lock()
	st, ok := s.open[id]
	delete(s.open, id)
	s.mu.Unlock()
	if ok {
		st.cancel()
	}
}

// sseStreams caps the SSE streams (each is an MCP session) and closes those
// idle for too long, and those whose client sends no message within the
// read timeout: a client sends initialize as soon as the stream tells it
// where to. mcp-go's SSE server does neither: an idle stream lives as long
// as its client keeps the connection.
type sseStreams struct {
	max          int           // 0: no cap
	perPrincipal int           // 0: no cap per principal
	idle         time.Duration // 0: never
	firstMessage time.Duration // 0: no limit
	pending      *pendingResponses

	mu   sync.Mutex
	n    int
	held principalCounts
	byID map[string]*sseStream
}

// newSSEStreams returns an empty set with the limits l.
func newSSEStreams(l Limits, pending *pendingResponses) *sseStreams {
	return &sseStreams{max: l.MaxMCPSessions, perPrincipal: l.MaxMCPSessionsPerPrincipal, idle: l.MCPSessionIdle, firstMessage: l.ReadTimeout,
		pending: pending, held: principalCounts{}, byID: map[string]*sseStream{}}
}

// acquire admits a new stream of principal; past a cap its error is the
// message that names it. release ends it.
func (s *sseStreams) acquire(principal identity.Principal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.n >= s.max {
		return fmt.Errorf("too many MCP sessions: the server holds its limit of %d SSE streams (--max-mcp-sessions); try again later", s.max)
	}
	if err := s.held.check(principal, s.perPrincipal); err != nil {
		return err
	}
	s.n++
	s.held.add(principal)
	return nil
}

// release ends a stream of acquire.
func (s *sseStreams) release(principal identity.Principal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	s.held.remove(principal)
}

// count returns the number of open streams.
func (s *sseStreams) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// register records the stream of a session, once mcp-go has named it.
func (s *sseStreams) register(id string, st *sseStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[id] = st
}

// unregister forgets the stream of a session.
func (s *sseStreams) unregister(id string, st *sseStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[id] == st {
		delete(s.byID, id)
	}
}

// ownedBy reports whether id names the stream of a session that principal
// started.
func (s *sseStreams) ownedBy(id string, principal identity.Principal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	return ok && st.principal == principal
}

// message records a message from the client of session id.
func (s *sseStreams) message(id string) {
	s.mu.Lock()
	st := s.byID[id]
	s.mu.Unlock()
	if st != nil {
		st.touch(true)
	}
}

// watchIdle arranges for st, which cancel closes, to be closed when its
// client sends no message within s.firstMessage, or after s.idle without
// activity, unless a response of its session is pending. The timer is
// lazy: activity only records its time, and the timer, when it fires,
// sleeps again for what is left.
func (s *sseStreams) watchIdle(st *sseStream, cancel context.CancelFunc) {
	first := s.firstMessage
	if s.idle > 0 && (first <= 0 || s.idle < first) {
		first = s.idle
	}
	if first <= 0 {
		return
	}
	st.watched = true
	// Armed only once assigned, so that the function sees st.idleTimer.
	st.idleTimer = time.AfterFunc(time.Hour, func() {
		if id := st.sessionID(); id != "" && s.pending.has(id) {
			st.idleTimer.Reset(max(s.idle, first)) // a call is running: not idle
			return
		}
		if st.greeted.Load() {
			if s.idle <= 0 {
				return // idle streams are kept
			}
			if rest := s.idle - time.Since(time.Unix(0, st.lastActive.Load())); rest > 0 {
				st.idleTimer.Reset(rest)
				return
			}
		}
		cancel()
	})
	st.idleTimer.Reset(first)
}
