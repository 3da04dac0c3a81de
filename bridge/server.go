package bridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
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
// who it is, so that stray or hostile clients cannot hold sockets open.
const helloTimeout = 10 * time.Second

// Server is the websocket endpoint that workers dial. It listens on the
// loopback interface only and hands each connection to whoever expects its
// secret; a connection with an unknown or already used secret is refused.
type Server struct {
	log       *zap.Logger
	readLimit int64
	ln        net.Listener
	http      *http.Server

	mu       sync.Mutex
	expected map[[sha256.Size]byte]chan *Conn // by the secret's hash, so lookups leak no timing about it
}

// Listen starts a Server on 127.0.0.1 at a free port. readLimit is the
// largest frame accepted from a worker; it must hold the memory snapshot and
// the longest output line a call may print.
func Listen(log *zap.Logger, readLimit int64) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bridge: listen: %w", err)
	}
	s := &Server{
		log:       log,
		readLimit: readLimit,
		ln:        ln,
		expected:  make(map[[sha256.Size]byte]chan *Conn),
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: helloTimeout, ErrorLog: zap.NewStdLog(log)}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

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
	ws.SetReadLimit(s.readLimit)

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
	c := newConn(ws)
	ch <- c
	// The connection belongs to its new owner; the handler only keeps the
	// request alive until the owner is done with it.
	<-c.done
}

// goneBeforeHello reports whether err, from reading the hello, means the
// peer closed its connection, rather than sent a bad frame or kept silent.
func goneBeforeHello(err error) bool {
	return errors.Is(err, io.EOF) || websocket.CloseStatus(err) != -1
}

func readHello(ctx context.Context, ws *websocket.Conn) (string, error) {
	typ, data, err := ws.Read(ctx)
	if err != nil {
		return "", err
	}
	if typ != websocket.MessageText {
		return "", errors.New("binary frame before hello")
	}
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("malformed hello: %w", err)
	}
	if m.Type != TypeHello || m.Secret == "" {
		return "", fmt.Errorf("first frame is %q, not hello", m.Type)
	}
	return m.Secret, nil
}
