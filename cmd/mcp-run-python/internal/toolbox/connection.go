package toolbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/slogzap"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/backoff"
)

// errNotStarted is why a server is down before its first attempt.
var errNotStarted = errors.New("not connected yet")

// toolServer is one configured tool server: its connection while it is up,
// and the tools it listed last.
type toolServer struct {
	cfg   ServerConfig
	log   *zap.Logger
	guard *readGuard    // bounds the messages of each of its connections
	first chan struct{} // closed once the first attempt to connect is over
	// broken and relist wake the goroutine that owns the connection: the
	// connection broke, or the tools may have changed.
	broken, relist chan struct{}

	mu      sync.Mutex
	client  *client.Client // nil while down
	err     error          // why it is down
	tools   []*tool        // the allowed tools it listed last, by name; nil before it listed any
	stopErr error          // the failure to stop it at Close
}

// tool is a tool a server listed.
type tool struct {
	spec   supervisor.ToolSpec
	schema *jsonschema.Schema // nil when the input schema did not compile: arguments go unchecked
}

// newToolServer returns the server of cfg, down, whose messages may be
// messageLimit bytes (0: no bound).
func newToolServer(cfg ServerConfig, log *zap.Logger, messageLimit int64) *toolServer {
	return &toolServer{
		cfg: cfg, log: log, err: errNotStarted, guard: &readGuard{limit: messageLimit},
		first: make(chan struct{}), broken: make(chan struct{}, 1), relist: make(chan struct{}, 1),
	}
}

// run keeps s connected until the toolbox closes: it connects, serves the
// connection until it breaks, and tries again after a wait that doubles
// from Options.RetryMin to RetryMax while the attempts fail, or the
// connections do not last.
func (t *Toolbox) run(s *toolServer) {
	retry := backoff.Backoff{Min: t.opts.RetryMin, Max: t.opts.RetryMax}
	for failures := 0; ; {
		var wait time.Duration
		c, tools, err := t.connect(s)
		if err != nil {
			failures++
			wait = retry.Next()
			s.setDown(err)
			lvl := zap.DebugLevel
			if failures%10 == 1 {
				lvl = zap.WarnLevel // not every time, for a server that stays down
			}
			s.log.Log(lvl, "cannot connect to the tool server; retrying", zap.Error(err), zap.Int("failures", failures), zap.Duration("wait", wait))
			s.firstDone()
			if c != nil {
				s.stop(c)
			}
		} else {
			failures = 0
			s.setUp(c, tools)
			s.log.Info("tool server connected", zap.Int("tools", len(tools)))
			s.firstDone()
			up := time.Now()
			if !t.serve(s, c) {
				return
			}
			if time.Since(up) > t.opts.RetryMax {
				retry.Reset() // it lasted: this is not a server that fails again at once
			}
			wait = retry.Next()
		}
		select {
		case <-t.ctx.Done():
			s.setDown(errClosed)
			return
		case <-time.After(wait):
		}
	}
}

// firstDone tells Start that the first attempt to connect to s is over.
// Only the goroutine of run calls it.
func (s *toolServer) firstDone() {
	if !closed(s.first) {
		close(s.first)
	}
}

// errClosed is why a server is down after Close.
var errClosed = errors.New("the toolbox is closed")

// connect makes one attempt to connect to s, within
// Options.ConnectTimeout: it initializes the session and lists the
// tools. On failure the client it returns, if any, must be stopped.
func (t *Toolbox) connect(s *toolServer) (*client.Client, []*tool, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.ConnectTimeout)
	defer cancel()
	c, err := t.dial(s)
	if err != nil {
		return nil, nil, err
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		// The transport's reading goroutine calls this: listing the tools
		// here would wait for itself.
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			kick(s.relist)
		}
	})
	c.OnConnectionLost(func(err error) {
		// Only SSE calls this. Its calls would wait for answers that can no
		// longer come, until their time limit: closing the client ends them.
		if errors.Is(err, errMessageTooBig) {
			s.drop(c, err)
		}
	})
	if s.cfg.Transport == Stdio {
		t.wg.Go(func() { t.watchStderr(s, c) })
	}
	// Start takes the context of the connection, which an SSE stream
	// keeps: closing the client is what bounds it.
	stopClose := context.AfterFunc(ctx, func() { _ = c.Close() })
	tools, err := t.handshake(ctx, s, c)
	if !stopClose() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil && t.ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", t.opts.ConnectTimeout, err)
		}
		return c, nil, err
	}
	return c, tools, nil
}

// dial makes the client of s; a stdio server's process starts here.
func (t *Toolbox) dial(s *toolServer) (*client.Client, error) {
	cfg := s.cfg
	logger := slogzap.New(s.log)
	var c *client.Client
	var err error
	// Every transport reads through s.guard: a message past its bound is
	// never held whole.
	switch cfg.Transport {
	case Stdio:
		var p *stdioProcess
		if p, err = startStdio(cfg, s.guard, logger); err == nil {
			if err = p.Start(context.Background()); err != nil {
				_ = p.Close()
			}
			c = client.NewClient(p)
		}
	case SSE:
		c, err = client.NewSSEMCPClient(cfg.URL, transport.WithHeaders(cfg.Headers), transport.WithSSELogger(logger),
			transport.WithHTTPClient(s.guard.httpClient()))
	default:
		c, err = client.NewStreamableHttpClient(cfg.URL, transport.WithHTTPHeaders(cfg.Headers), transport.WithHTTPLogger(logger),
			transport.WithHTTPBasicClient(s.guard.httpClient()))
	}
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return c, nil
}

// handshake starts c, initializes the session and lists the tools.
func (t *Toolbox) handshake(ctx context.Context, s *toolServer, c *client.Client) ([]*tool, error) {
	if err := c.Start(t.ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcp-run-python", Version: t.opts.ClientVersion}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return t.listTools(ctx, s, c)
}

// listTools lists the tools of s that code may call, following the pages.
// Of tools with the same Python name, the first by name is kept.
func (t *Toolbox) listTools(ctx context.Context, s *toolServer, c *client.Client) ([]*tool, error) {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list the tools: %w", err)
	}
	listed := slices.SortedFunc(slices.Values(res.Tools), func(a, b mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	tools := make([]*tool, 0, len(listed))
	ids := make(map[string]string) // Identifier(name) -> name
	for _, mt := range listed {
		if mt.Name == "" || !t.allow.Allows(s.cfg.Name, mt.Name) {
			continue
		}
		id := Identifier(mt.Name)
		if other, ok := ids[id]; ok {
			s.log.Warn("tool left out: its Python name is another tool's", zap.String("tool", mt.Name), zap.String("other", other))
			continue
		}
		ids[id] = mt.Name
		tools = append(tools, s.newTool(mt))
	}
	return tools, nil
}

// newTool makes the tool of a listed definition.
func (s *toolServer) newTool(mt mcp.Tool) *tool {
	is := mt.InputSchema
	if is.Type == "" {
		is.Type = "object" // a server that gave none takes anything
	}
	schema, err := json.Marshal(is)
	if err != nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	tl := &tool{spec: supervisor.ToolSpec{Server: s.cfg.Name, Name: mt.Name, Description: mt.Description, InputSchema: schema}}
	if tl.schema, err = compileSchema(s.cfg.Name, mt.Name, schema); err != nil {
		// Refusing the tool for it would be worse: the server checks
		// its arguments too.
		s.log.Warn("the tool's input schema does not compile; its arguments go unchecked", zap.String("tool", mt.Name), zap.Error(err))
	}
	return tl
}

// serve waits while c is s's connection: it lists the tools again when
// they may have changed, and returns when c broke (true) or the toolbox
// closed (false), having stopped c.
func (t *Toolbox) serve(s *toolServer, c *client.Client) bool {
	defer s.stop(c)
	for {
		select {
		case <-t.ctx.Done():
			s.setDown(errClosed)
			return false
		case <-s.broken:
			if s.current() != c {
				return true
			}
		case <-s.relist:
			ctx, cancel := context.WithTimeout(t.ctx, t.opts.ConnectTimeout)
			tools, err := t.listTools(ctx, s, c)
			cancel()
			var terr *transport.Error
			switch {
			case err == nil:
				s.setTools(tools)
				s.log.Info("tool server tools listed again", zap.Int("tools", len(tools)))
			case t.ctx.Err() != nil:
				// Closing: the next select returns.
			case errors.As(err, &terr):
				s.drop(c, err)
				return true
			default:
				s.log.Warn("cannot list the tool server's tools again", zap.Error(err))
			}
		}
	}
}

// watchStderr logs what the process of a stdio server writes on stderr.
// Its end means, most likely, that the process exited, which nothing else
// reports: listing the tools finds out.
func (t *Toolbox) watchStderr(s *toolServer, c *client.Client) {
	r, ok := client.GetStderr(c)
	if !ok {
		return
	}
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if text := strings.TrimSpace(string(line)); text != "" {
			s.log.Info("tool server stderr", zap.String("line", text))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the rest of a long line comes next
		}
		if err != nil {
			break
		}
	}
	if s.current() == c {
		kick(s.relist)
	}
}

// stop closes c, keeping the error when the toolbox is closing.
func (s *toolServer) stop(c *client.Client) {
	err := c.Close()
	if err == nil {
		return
	}
	s.log.Debug("tool server stopped with an error", zap.Error(err))
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(s.err, errClosed) {
		s.stopErr = err
	}
}

// setUp makes c the connection of s, which listed tools.
func (s *toolServer) setUp(c *client.Client, tools []*tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.client, s.err, s.tools = c, nil, tools
}

// setDown records that s is down because of err.
func (s *toolServer) setDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.client, s.err = nil, err
}

// setTools replaces the tools of s.
func (s *toolServer) setTools(tools []*tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools = tools
}

// drop records that connection c of s broke with err, and wakes the
// goroutine that owns it, unless s has another connection already.
func (s *toolServer) drop(c *client.Client, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != c {
		return
	}
	s.client, s.err = nil, err
	s.log.Warn("tool server connection lost; reconnecting", zap.Error(err))
	kick(s.broken)
}

// current returns the connection of s, nil while down.
func (s *toolServer) current() *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// closeErr returns the failure to stop s at Close.
func (s *toolServer) closeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopErr
}

// specs returns the tools s listed last; while s has listed none (it is down
// since the start), an entry that says why.
func (s *toolServer) specs() []supervisor.ToolSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools == nil && s.client == nil {
		return []supervisor.ToolSpec{{Server: s.cfg.Name, Down: s.downErrorLocked().Error()}}
	}
	out := make([]supervisor.ToolSpec, len(s.tools))
	for i, tl := range s.tools {
		out[i] = tl.spec
	}
	return out
}

// lookup returns the connection of s (nil while down) and its tool named
// name, or why there is no such tool.
func (s *toolServer) lookup(name string) (*client.Client, *tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearchFunc(s.tools, name, func(tl *tool, name string) int { return strings.Compare(tl.spec.Name, name) })
	switch {
	case found:
		return s.client, s.tools[i], nil
	case s.tools == nil:
		return nil, nil, s.downErrorLocked()
	default:
		return nil, nil, fmt.Errorf("the tool server %s has no tool %s", s.cfg.Name, name)
	}
}

// downError says that s is down, and why.
func (s *toolServer) downError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downErrorLocked()
}

// downErrorLocked is downError with s.mu held.
func (s *toolServer) downErrorLocked() error {
	if errors.Is(s.err, errClosed) {
		return fmt.Errorf("tool server %s is not connected: %w", s.cfg.Name, s.err)
	}
	return fmt.Errorf("tool server %s is not connected: %w; retrying", s.cfg.Name, s.err)
}

// kick wakes whoever waits on ch, a channel of capacity 1, without
// blocking: one pending wake-up is enough.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
