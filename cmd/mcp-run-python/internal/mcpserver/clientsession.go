package mcpserver

import (
	"context"
	"errors"
)

// ErrSessionEnded is the cause of a call's cancellation when its client
// left, so that a runner (and a test) can tell it from other cancellations.
var ErrSessionEnded = errors.New("the client's session ended")

// sessionDoneKey is the context key of a channel closed when the call's
// session ends.
type sessionDoneKey struct{}

// WithSessionDone returns ctx carrying done, a channel closed when the MCP
// session of the request in ctx ends: a transport that runs calls on a
// context detached from the client's connection (SSE) installs it, so that
// calls end with their client.
func WithSessionDone(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, sessionDoneKey{}, done)
}

// withSessionCancel returns ctx cancelled also when the session carried in
// it ends. The SSE transport runs each call on a context detached from every
// connection, so without this a call would run on after its client left.
func withSessionCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	done, _ := ctx.Value(sessionDoneKey{}).(<-chan struct{})
	ctx, cancel := context.WithCancelCause(ctx)
	if done == nil {
		return ctx, func() { cancel(nil) }
	}
	go func() {
		select {
		case <-done:
			cancel(ErrSessionEnded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}
