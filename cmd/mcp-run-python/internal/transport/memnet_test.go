package transport

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"go.uber.org/zap"
)

// memAddr is the address the in-memory server listens on: a loopback
// address, so that the origin policy takes its connections for local ones,
// as those of a server on 127.0.0.1.
var memAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3001}

// memListener is a net.Listener over net.Pipe, for tests under
// testing/synctest: a blocked read on a pipe is durably blocked, and its
// deadlines follow the bubble's clock, where a socket's are neither.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// newMemListener returns a listener that Dial connects to.
func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *memListener) Addr() net.Addr { return memAddr }

// Dial opens a connection to the listener, as a client on this machine.
func (l *memListener) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- memConn{server}:
		return client, nil
	case <-l.done:
		return nil, errors.New("dial: the listener is closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// memConn is the server's end of a pipe, whose local address is memAddr.
type memConn struct{ net.Conn }

// LocalAddr implements net.Conn.
func (memConn) LocalAddr() net.Addr { return memAddr }

// memServer is a front end served on a memListener in a synctest bubble.
type memServer struct {
	ln *memListener
	// url is the base URL of the server; any host will do, since the
	// client's connections all go to ln.
	url string
	// http is a client of the server, as http.DefaultClient of a socket.
	http *http.Client
}

// serveMem serves fe through ServeHTTP on an in-memory listener, as the
// program does on a socket, until the test ends. t is a synctest bubble's.
func serveMem(t *testing.T, fe *HTTPFrontEnd) *memServer {
	t.Helper()
	ln := newMemListener()
	serveOn(t, ln, fe)
	srv := &memServer{ln: ln, url: "http://" + memAddr.String()}
	srv.http = srv.client(t)
	return srv
}

// client returns an HTTP client of s with connections of its own, which
// the test's end closes.
func (s *memServer) client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return s.ln.Dial(ctx) }}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// dial opens a raw connection to s, which the test's end closes.
func (s *memServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := s.ln.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// post sends a POST of body to path on a connection of its own, and
// returns the answer. Unlike http.Transport, which may report the error of
// a body it could not finish sending rather than the answer that the
// server sent before closing, it reads the answer however the sending
// ends, as a client does over a socket whose buffers took the rest. length
// is the declared length, -1 to send the body chunked.
func (s *memServer) post(t *testing.T, path string, body io.Reader, length int64) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	conn := s.dial(t)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		_ = req.Write(conn) // fails once the server has closed the connection
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = conn.Close()
	<-sent
	return resp, got
}

// serveOn serves fe through ServeHTTP on ln until the test ends.
func serveOn(t *testing.T, ln net.Listener, fe *HTTPFrontEnd) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP(ctx, ln, fe, zap.NewNop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}
