package transport

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connCount counts the open HTTP connections, for the metrics.
type connCount struct{ n atomic.Int64 }

// open returns the number of open connections.
func (c *connCount) open() int64 { return c.n.Load() }

// connKey is the context key of a request's *limitedConn.
type connKey struct{}

// withConn is the http.Server's ConnContext: it gives each request its
// connection, for guard to mark it serving.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connLimiter is a net.Listener that keeps at most max connections open
// (any number when max is 0). Past the cap it makes room by closing the connection
// that has waited longest without serving a request: idle between requests,
// or still sending a request's headers or body. Only when every connection
// is serving a request (a call, a stream) is the new one refused, with a
// 503. It is written by hand because x/net/netutil.LimitListener blocks in
// Accept at the cap instead: a new client, and the probes, would wait in the
// kernel's backlog behind every slow or idle connection until its timeout
// ended it, while here thousands of slow connections cost a new client
// nothing.
type connLimiter struct {
	net.Listener
	max     int
	front   *frontEnd
	refusal []byte // the whole HTTP response to a refused connection
	// refusing bounds the refused connections being answered at once;
	// those past it are closed without an answer.
	refusing chan struct{}

	mu sync.Mutex
	// waiting holds the *limitedConn not serving a request, the one waiting
	// longest first.
	waiting list.List
}

// newConnLimiter returns ln with the connection cap of f's limits.
func newConnLimiter(ln net.Listener, f *frontEnd) *connLimiter {
	body := jsonRPCError(nil, codeRefused, fmt.Sprintf(
		"too many connections: the server holds its limit of %d, all serving requests (--max-connections); try again later",
		f.limits.MaxConnections))
	refusal := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", retryAfter, len(body), body)
	return &connLimiter{Listener: ln, max: f.limits.MaxConnections, front: f, refusal: refusal,
		refusing: make(chan struct{}, maxRefusing)}
}

// Accept implements net.Listener.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err // unwrapped: http.Server inspects it (net.Error)
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit returns c counted, making room for it, or nil when it had to be
// refused.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l}
	var victim *limitedConn
	l.mu.Lock()
	if l.max > 0 && l.front.conns.open() >= int64(l.max) {
		oldest := l.waiting.Front()
		if oldest == nil {
			l.mu.Unlock()
			l.refuse(c)
			return nil
		}
		victim = l.waiting.Remove(oldest).(*limitedConn)
		victim.elem = nil
	}
	l.front.conns.n.Add(1)
	lc.elem = l.waiting.PushBack(lc)
	l.mu.Unlock()
	if victim != nil {
		l.front.reject("connection_evicted")
		_ = victim.Close()
	}
	return lc
}

// Bounds on the answers to refused connections.
const (
	// maxRefusing connections are answered at once, each taking a goroutine
	// and its socket for up to refusalTime.
	maxRefusing = 32
	refusalTime = time.Second
	// refusalHead is as much of the request as is read before answering.
	refusalHead = 4 << 10
)

// refuse answers a connection that finds no room with a 503 and closes it.
// The answer waits for the request's head, as a client takes an answer
// that comes before its request for a broken connection, and the socket is
// half-closed and drained before it closes, so that the unread rest of the
// request does not reset the connection under the answer. Only maxRefusing
// connections are answered at once: under a flood the rest are just closed.
func (l *connLimiter) refuse(c net.Conn) {
	l.front.reject("connection_refused")
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalTime))
		head := make([]byte, 0, refusalHead)
		for len(head) < cap(head) && !bytes.Contains(head, []byte("\r\n\r\n")) {
			n, err := c.Read(head[len(head):cap(head)])
			head = head[:len(head)+n]
			if err != nil {
				break
			}
		}
		if _, err := c.Write(l.refusal); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, c)
	}()
}

// connState is the http.Server's ConnState: it follows each connection
// between waiting and serving.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		lc.waitingAgain()
	case http.StateHijacked:
		lc.serving()
	case http.StateClosed:
		lc.release()
	}
}

// limitedConn is a connection of a connLimiter.
type limitedConn struct {
	net.Conn
	l *connLimiter

	// Guarded by l.mu.
	elem   *list.Element // in l.waiting while not serving a request
	closed bool
}

// Close implements net.Conn.
func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// serving marks the connection as serving a request: its request is in, and
// only its end (or the client) closes it now.
func (c *limitedConn) serving() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.waiting.Remove(c.elem)
		c.elem = nil
	}
}

// waitingAgain marks the connection as waiting for its next request, the
// most recent to wait.
func (c *limitedConn) waitingAgain() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.closed {
		return
	}
	if c.elem != nil {
		c.l.waiting.MoveToBack(c.elem)
	} else {
		c.elem = c.l.waiting.PushBack(c)
	}
}

// release stops counting the connection; only its first call counts.
func (c *limitedConn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.elem != nil {
		c.l.waiting.Remove(c.elem)
		c.elem = nil
	}
	c.l.front.conns.n.Add(-1)
}

var _ net.Listener = (*connLimiter)(nil)
