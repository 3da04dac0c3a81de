package mcpserver

// MCP logging (DESIGN 1.5): which notifications/message a call sends, and how
// each reaches the client before the call's result on every transport.
//
// mcp-go's own path, MCPServer.SendLogMessageToClient, cannot give that
// guarantee, as measured against mcp-go v1.2.1 (DESIGN 2):
//
//   - stdio: notifications go through a channel to a separate goroutine that
//     writes them, while the tool call's response is written by the worker
//     goroutine that ran it, so a response can overtake its notifications.
//   - sse: notifications go through a channel to a goroutine that moves them
//     into the session's event queue, while the response goes straight into
//     that queue: same race.
//   - streamable HTTP: the session's notification channel is drained both by
//     the POST's forwarder and by the standalone GET stream's goroutine, so a
//     client holding a GET stream gets some notifications there, after the
//     result or never. In stateless mode every request uses session "" (and a
//     GET makes that one session shared by all), so the session log level and
//     the channel are shared between clients.
//   - The session log level starts at "error", not "emergency", and
//     buildLogNotification always adds "logger":"" where upstream sent
//     {level, data} only.
//
// So the front end keeps its own levels and writes notifications itself, from
// the tool handler's goroutine, to the very stream the result will follow on,
// before the handler returns. A Notifier in the request context says how: the
// transport package installs one for each transport.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// LevelStore keeps the level each session chose with logging/setLevel. A
// transport makes one for its server, per session or, in stateless mode,
// not.
type LevelStore struct {
	// perSession is false in stateless mode, where every client shares the
	// session ID "": a level set there could only leak to other clients.
	perSession bool

	mu     sync.Mutex
	levels map[string]mcp.LoggingLevel
}

// newLevelStore returns a store; see LevelStore.perSession.
func newLevelStore(perSession bool) *LevelStore {
	return &LevelStore{perSession: perSession, levels: map[string]mcp.LoggingLevel{}}
}

// install records levels from logging/setLevel (after mcp-go validated them)
// and forgets a session's level when the session ends.
func (s *LevelStore) install(hooks *server.Hooks) {
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		if session := server.ClientSessionFromContext(ctx); session != nil {
			s.set(session.SessionID(), req.Params.Level)
		}
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		s.forget(session.SessionID())
	})
}

// set records the level of a session.
func (s *LevelStore) set(sessionID string, level mcp.LoggingLevel) {
	if !s.perSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.levels[sessionID] = level
}

// forget drops the level of a session that ended.
func (s *LevelStore) forget(sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.levels, sessionID)
}

// sessionLevel returns a session's level: emergency until it sets one, as
// upstream, so that nothing is sent by default.
func (s *LevelStore) sessionLevel(sessionID string) mcp.LoggingLevel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if level, ok := s.levels[sessionID]; ok {
		return level
	}
	return mcp.LoggingLevelEmergency
}

// callLevel returns the lowest level of notification the request in ctx
// wants, or false when it wants none.
//
// Protocol 2026-07-28 removed logging/setLevel: such a request carries its
// level in _meta, which mcp-go exposes as RequestProtocolInfo.LogLevel, and
// without one no notification may be sent. Older requests use the session's
// level; in stateless mode there is no session to keep one in, which is what
// upstream did too (it built a fresh server for every stateless request).
func (s *LevelStore) callLevel(ctx context.Context) (mcp.LoggingLevel, bool) {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel, info.LogLevel != ""
	}
	if !s.perSession {
		return "", false
	}
	session := server.ClientSessionFromContext(ctx)
	if session == nil {
		return "", false
	}
	return s.sessionLevel(session.SessionID()), true
}

// LineLevel is the level a call's line is logged at: stdout as info, stderr
// as warning, package install progress as debug and install failures as
// error. The example mode prints lines with it too.
func LineLevel(line supervisor.Line) mcp.LoggingLevel {
	switch line.Stream {
	case supervisor.Stderr:
		return mcp.LoggingLevelWarning
	case supervisor.Progress:
		return mcp.LoggingLevelDebug
	case supervisor.Failure:
		return mcp.LoggingLevelError
	}
	return mcp.LoggingLevelInfo
}

// logNotification returns the JSON-RPC notification for one log line. Its
// params are {level, data} with no logger, as upstream sent, encoded as
// JavaScript would.
func logNotification(level mcp.LoggingLevel, data string) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":`)
	render.WriteJSString(&b, string(level))
	b.WriteString(`,"data":`)
	render.WriteJSString(&b, data)
	b.WriteString(`}}`)
	return []byte(b.String())
}

// Notifier delivers a call's notifications on the stream that will carry the
// call's result; each transport has its own. Notify returns once msg is
// queued ahead of anything the transport writes for the call afterwards.
type Notifier interface {
	Notify(ctx context.Context, msg []byte) error
}

// notifierKey is the context key of the request's notifier.
type notifierKey struct{}

// WithNotifier returns ctx carrying n: a transport installs its notifier in
// the context of each request.
func WithNotifier(ctx context.Context, n Notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// notifierFrom returns the notifier in ctx, or nil.
func notifierFrom(ctx context.Context) Notifier {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	return n
}

// fallbackNotifier uses mcp-go's notification channel. It serves transports
// that install no Notifier (mcp-go's in-process client); ordering is then
// mcp-go's, without the guarantee above.
type fallbackNotifier struct{}

// Notify implements Notifier.
func (fallbackNotifier) Notify(ctx context.Context, msg []byte) error {
	mcpServer := server.ServerFromContext(ctx)
	if mcpServer == nil {
		return errors.New("no MCP server in context")
	}
	var n struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(msg, &n); err != nil {
		return fmt.Errorf("decode notification: %w", err)
	}
	if err := mcpServer.SendNotificationToClient(ctx, n.Method, n.Params); err != nil {
		return fmt.Errorf("send notification: %w", err)
	}
	return nil
}
