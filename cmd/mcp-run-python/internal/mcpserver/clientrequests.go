package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// cancelNoticeTimeout bounds the notifications/cancelled of a request
// whose call ended, so that a stalled client cannot hold the call.
const cancelNoticeTimeout = time.Second

// ClientRequests sends an older client the sampling and elicitation
// requests of its running calls on the stream that carries the call's own
// notifications and result (the call's Notifier), and hands each the
// client's response, which the transport passes to Deliver. mcp-go sends
// sampling requests on streamable HTTP only to the standalone GET stream,
// which a client need not open (it then never answers), and over SSE sends
// neither kind; the transports that install ClientRequests carry both on
// the call's own stream, as the specification advises.
//
// A request's id is random, so that no other client can answer it, and
// a string, so that it never meets mcp-go's numbered requests.
type ClientRequests struct {
	mu      sync.Mutex
	pending map[string]pendingRequest // by id
}

// pendingRequest is a request waiting for the client's response.
type pendingRequest struct {
	session string                 // the MCP session that may answer it
	done    chan<- json.RawMessage // the response, buffered
}

// NewClientRequests returns an empty ClientRequests.
func NewClientRequests() *ClientRequests {
	return &ClientRequests{pending: map[string]pendingRequest{}}
}

// clientRequestsKey is the context key of a request's clientRequester.
type clientRequestsKey struct{}

// clientRequester is how one request's call asks its client.
type clientRequester struct {
	r       *ClientRequests
	session string
}

// WithClientRequests returns ctx whose call asks its client through r, on
// its Notifier's stream, the client's MCP session being session ("" for
// none).
func WithClientRequests(ctx context.Context, r *ClientRequests, session string) context.Context {
	return context.WithValue(ctx, clientRequestsKey{}, clientRequester{r: r, session: session})
}

// clientRequestsFrom returns the requester in ctx, nil when the transport
// installed none (mcp-go's session then sends the requests).
func clientRequestsFrom(ctx context.Context) *clientRequester {
	c, ok := ctx.Value(clientRequestsKey{}).(clientRequester)
	if !ok {
		return nil
	}
	return &c
}

// Deliver hands body, a JSON-RPC response with id that the client of
// session sent, to the call waiting for it; false when none waits for it
// (the transport then hands it to mcp-go).
func (r *ClientRequests) Deliver(session string, id json.RawMessage, body []byte) bool {
	var key string
	if json.Unmarshal(id, &key) != nil {
		return false // a number: mcp-go's
	}
	r.mu.Lock()
	p, ok := r.pending[key]
	if ok && p.session == session {
		delete(r.pending, key)
	}
	r.mu.Unlock()
	if !ok || p.session != session {
		return false
	}
	p.done <- json.RawMessage(append([]byte(nil), body...))
	return true
}

// sample sends a sampling/createMessage request and waits for its result.
func (c *clientRequester) sample(ctx context.Context, params mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	if err := c.request(ctx, mcp.MethodSamplingCreateMessage, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// elicit sends an elicitation/create request and waits for its result.
func (c *clientRequester) elicit(ctx context.Context, params mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	var res mcp.ElicitationResult
	if err := c.request(ctx, mcp.MethodElicitationCreate, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// request sends one request on the call's stream and decodes its result
// into result.
func (c *clientRequester) request(ctx context.Context, method mcp.MCPMethod, params, result any) error {
	n := notifierFrom(ctx)
	if n == nil {
		return errors.New("no stream to the client")
	}
	id := "ask-" + rand.Text()
	msg, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	done := make(chan json.RawMessage, 1)
	c.r.mu.Lock()
	c.r.pending[id] = pendingRequest{session: c.session, done: done}
	c.r.mu.Unlock()
	defer func() {
		c.r.mu.Lock()
		delete(c.r.pending, id)
		c.r.mu.Unlock()
	}()
	if err := n.Notify(ctx, msg); err != nil {
		return fmt.Errorf("send %s: %w", method, err)
	}
	var body json.RawMessage
	select {
	case body = <-done:
	case <-ctx.Done():
		// The client may be showing the person a form: tell it to stop.
		cancelled, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": mcp.MethodNotificationCancelled,
			"params": map[string]any{"requestId": id, "reason": context.Cause(ctx).Error()}})
		notifyCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelNoticeTimeout)
		defer stop()
		_ = n.Notify(notifyCtx, cancelled) // best effort: the call ends either way
		return fmt.Errorf("waiting for the client's answer: %w", context.Cause(ctx))
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("the client's answer to %s: %w", method, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s (%d)", method, resp.Error.Message, resp.Error.Code)
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("the client's result of %s: %w", method, err)
	}
	return nil
}
