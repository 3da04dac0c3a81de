package bridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// helloTimeout bounds how long a connection may stay silent before proving
// who it is. A worker sends its hello as soon as its socket opens, so a
// connection that has not within this time is a stray or hostile one.
const helloTimeout = 2 * time.Second

// helloLimit is the largest first frame read: a hello is a few dozen bytes,
// and a connection that has not proved itself gets no more.
const helloLimit = 4 << 10

// maxPending bounds the connections that have not said hello yet. Past it,
// the oldest of them is dropped: a worker says hello at once, so the oldest
// is the likeliest to be a flood's; and the server never holds more than
// this many file descriptors for strangers.
const maxPending = 16

// SocketHost is the host in the URL of a bridge that listens on a Unix
// socket. The worker's WebSocket needs a URL to dial, and deno checks it
// against its permissions, but the connection goes over the socket: the
// address is from TEST-NET-1 (RFC 5737), which leads nowhere if anything
// ever dials it.
const SocketHost = "192.0.2.1:80"

// Server is the websocket endpoint that workers dial, on a Unix socket or on
// the loopback interface. It hands each connection to whoever expects its
// secret; a connection with an unknown or already used secret is refused.
type Server struct {
	log       *zap.Logger
	readLimit int64
	ln        *pendingListener
	socket    string
	http      *http.Server

	mu       sync.Mutex
	expected map[[sha256.Size]byte]chan *Conn // by the secret's hash, so lookups leak no timing about it
}

// Listen starts a Server on the Unix socket at path socket, or, when socket
// is "", on 127.0.0.1 at a free port. A Unix socket keeps the bridge out of
// reach of any code that may not open that path: workers' Python code never
// can, whatever network it is allowed. readLimit is the largest frame
// accepted from a worker that said hello; it must hold the memory snapshot
// and the longest output line a call may print.
func Listen(log *zap.Logger, readLimit int64, socket string) (*Server, error) {
	network, address := "tcp", "127.0.0.1:0"
	if socket != "" {
		network, address = "unix", socket
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("bridge: listen: %w", err)
	}
	s := &Server{
		log:       log,
		readLimit: readLimit,
		ln:        newPendingListener(ln, maxPending),
		socket:    socket,
		expected:  make(map[[sha256.Size]byte]chan *Conn),
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: helloTimeout,
		ErrorLog:          zap.NewStdLog(log),
		ConnContext:       withPending,
	}
	go func() { _ = s.http.Serve(s.ln) }()
	return s, nil
}

// Socket returns the path of the Unix socket the server listens on, or ""
// when it listens on TCP.
func (s *Server) Socket() string { return s.socket }

// Addr returns the host:port in the URL workers dial: the TCP address the
// server listens on, or SocketHost for a Unix socket.
func (s *Server) Addr() string {
	if s.socket != "" {
		return SocketHost
	}
	return s.ln.Addr().String()
}

// URL returns the websocket URL workers dial.
func (s *Server) URL() string { return "ws://" + s.Addr() + "/" }

// Close stops accepting connections. Connections already handed out stay
// open until their owners close them.
func (s *Server) Close() error { return s.http.Close() }

// NewSecret returns a fresh 256-bit secret for one worker.
func NewSecret() string {
	return rand.Text() + rand.Text()
}

// Expect registers secret for one connection and returns the channel it will
// be delivered on, and a function that withdraws the secret if it has not
// been used yet. A secret is good for one connection only.
func (s *Server) Expect(secret string) (<-chan *Conn, func()) {
	key := sha256.Sum256([]byte(secret))
	ch := make(chan *Conn, 1)
	s.mu.Lock()
	s.expected[key] = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.expected[key] == ch {
			delete(s.expected, key)
		}
	}
}

// claim removes and returns the channel waiting for secret.
func (s *Server) claim(secret string) (chan *Conn, bool) {
	key := sha256.Sum256([]byte(secret))
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.expected[key]
	delete(s.expected, key)
	return ch, ok
}

// ServeHTTP accepts a worker's websocket and waits for its hello.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.log.Warn("bridge: refused a connection that is not a websocket", zap.String("remote", r.RemoteAddr), zap.Error(err))
		return
	}
	ws.SetReadLimit(helloLimit)
	ctx, cancel := context.WithTimeout(r.Context(), helloTimeout)
	secret, err := readHello(ctx, ws)
	cancel()
	if err != nil && goneBeforeHello(err) {
		// A starting worker killed (by its start timeout, or at shutdown)
		// leaves such a connection: nothing was said, so nothing to warn of.
		s.log.Debug("bridge: a connection ended before its hello", zap.String("remote", r.RemoteAddr), zap.Error(err))
		ws.CloseNow()
		return
	}
	if err != nil {
		s.log.Warn("bridge: refused a connection without a valid hello", zap.String("remote", r.RemoteAddr), zap.Error(err))
		ws.Close(websocket.StatusPolicyViolation, "hello expected")
		return
	}
	ch, ok := s.claim(secret)
	if !ok {
		s.log.Warn("bridge: refused a connection with an unknown or used secret", zap.String("remote", r.RemoteAddr))
		ws.Close(websocket.StatusPolicyViolation, "unknown secret")
		return
	}
	markProved(r.Context())
	ws.SetReadLimit(s.readLimit)
	c := newConn(ws)
	ch <- c
	// The connection belongs to its new owner; the handler only keeps the
	// request alive until the owner is done with it.
	<-c.done
}

// goneBeforeHello reports whether err, from reading the hello, means the
// peer closed its connection, rather than sent a bad frame or kept silent.
// A peer that drops the connection at once can also end the request's
// context before the read sees EOF: that is context.Canceled, while a silent
// peer runs into the hello's deadline.
func goneBeforeHello(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || websocket.CloseStatus(err) != -1
}

func readHello(ctx context.Context, ws *websocket.Conn) (string, error) {
	typ, data, err := ws.Read(ctx)
	if err != nil {
		return "", err
	}
	if typ != websocket.MessageText {
		return "", errors.New("binary frame before hello")
	}
	f, err := Decode(data)
	if err != nil {
		return "", fmt.Errorf("malformed hello: %w", err)
	}
	hello, ok := f.(HelloFrame)
	if !ok || hello.Secret == "" {
		return "", fmt.Errorf("first frame is %q, not hello", f.Type())
	}
	return hello.Secret, nil
}
