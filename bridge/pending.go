package bridge

import (
	"context"
	"net"
	"sync"
)

// pendingListener accepts connections and keeps count of those that have
// not proved themselves yet. Past its limit it closes the oldest of them,
// so strangers never hold more than limit descriptors however many connect;
// connections that said hello do not count. (netutil.LimitListener counts
// every open connection, and makes new ones wait for old ones to close:
// workers, which stay connected for their whole life, would fill it.)
type pendingListener struct {
	net.Listener
	limit int

	mu      sync.Mutex
	pending []*pendingConn // oldest first
}

func newPendingListener(ln net.Listener, limit int) *pendingListener {
	return &pendingListener{Listener: ln, limit: limit}
}

// Accept returns the next connection, dropping the oldest unproved one if
// there are too many.
func (l *pendingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := &pendingConn{Conn: c, l: l}
	l.mu.Lock()
	var evict *pendingConn
	if len(l.pending) >= l.limit {
		evict = l.pending[0]
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, pc)
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close()
	}
	return pc, nil
}

// forget stops counting c.
func (l *pendingListener) forget(c *pendingConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.pending {
		if p == c {
			l.pending = append(l.pending[:i], l.pending[i+1:]...)
			return
		}
	}
}

// pendingConn is a connection counted until it proves itself or closes.
type pendingConn struct {
	net.Conn
	l    *pendingListener
	once sync.Once
}

// proved stops counting the connection: it said a valid hello.
func (c *pendingConn) proved() { c.once.Do(func() { c.l.forget(c) }) }

// Close closes the connection and stops counting it.
func (c *pendingConn) Close() error {
	c.proved()
	return c.Conn.Close()
}

type pendingKey struct{}

// withPending keeps c in its requests' context (http.Server.ConnContext),
// so that the handler can mark it proved.
func withPending(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, pendingKey{}, c)
}

// markProved stops counting the connection of a request's context.
func markProved(ctx context.Context) {
	if c, ok := ctx.Value(pendingKey{}).(*pendingConn); ok {
		c.proved()
	}
}
