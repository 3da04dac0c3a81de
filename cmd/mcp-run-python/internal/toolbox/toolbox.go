package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// Defaults of Options.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultRetryMin       = 500 * time.Millisecond
	DefaultRetryMax       = 30 * time.Second
)

// Options tune a Toolbox; the zero value takes the defaults.
type Options struct {
	// ConnectTimeout bounds each attempt to connect to a server, and so
	// Start.
	ConnectTimeout time.Duration
	// RetryMin and RetryMax bound the wait between attempts to reach a
	// server that is down, which doubles from one to the other.
	RetryMin, RetryMax time.Duration
	// ResultLimit is the largest tool result, in bytes, that Call returns
	// (structured content and text together); 0 for no limit. It bounds
	// what is read from a server too: no message longer than
	// messageLimit(ResultLimit) is read whole.
	ResultLimit int64
	// ClientVersion is the version in the clientInfo the servers get; ""
	// for "dev".
	ClientVersion string
}

// withDefaults fills in the zero fields of o.
func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	return o
}

// Toolbox is the tools of the configured MCP servers, as supervisor.Tools:
// it is the MCP client of each server, and keeps reconnecting to those
// that are down. It is safe for concurrent use.
type Toolbox struct {
	opts    Options
	allow   Allow
	log     *zap.Logger
	servers []*toolServer          // by name
	byName  map[string]*toolServer // by their configured name

	ctx    context.Context // ends with Close; bounds the background work
	cancel context.CancelFunc
	start  sync.Once
	wg     sync.WaitGroup // the goroutines of Start
}

var _ supervisor.Tools = (*Toolbox)(nil)

// New returns the toolbox of cfg's servers, whose tools code may call when
// allow allows them. It connects to nothing before Start. Its background
// work ends with ctx, or with Close, which must be called either way.
func New(ctx context.Context, cfg Config, allow Allow, log *zap.Logger, opts Options) *Toolbox {
	if log == nil {
		log = zap.NewNop()
	}
	t := &Toolbox{opts: opts.withDefaults(), allow: allow, log: log, byName: make(map[string]*toolServer)}
	t.ctx, t.cancel = context.WithCancel(ctx)
	for _, sc := range cfg.Servers {
		s := newToolServer(sc, log.With(zap.String("tool_server", sc.Name)), messageLimit(t.opts.ResultLimit))
		t.servers = append(t.servers, s)
		t.byName[sc.Name] = s
	}
	if unknown := allow.unknown(cfg); len(unknown) > 0 {
		log.Warn("--tools-allow names servers that the tools configuration does not", zap.Strings("entries", unknown))
	}
	return t
}

// Start connects to every server, each in its own goroutine, and returns
// once each has connected or failed its first attempt, or after
// Options.ConnectTimeout, so that List knows the tools of the servers that
// are up. A server that is down is not an error: it is retried in the
// background. Start fails only when ctx ends first, or after Close.
func (t *Toolbox) Start(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return errors.New("start the toolbox: it is closed")
	}
	t.start.Do(func() {
		for _, s := range t.servers {
			t.wg.Go(func() { t.run(s) })
		}
	})
	timer := time.NewTimer(t.opts.ConnectTimeout)
	defer timer.Stop()
	for _, s := range t.servers {
		select {
		case <-s.first:
		case <-timer.C:
			var waiting []string
			for _, s := range t.servers {
				if !closed(s.first) {
					waiting = append(waiting, s.cfg.Name)
				}
			}
			t.log.Warn("tool servers still connecting; their tools are left out until they answer",
				zap.Strings("servers", waiting), zap.Duration("timeout", t.opts.ConnectTimeout))
			return nil
		case <-ctx.Done():
			return fmt.Errorf("connect to the tool servers: %w", ctx.Err())
		}
	}
	return nil
}

// Close disconnects from the servers, stopping those it started, and
// waits for that. The error is the servers' failures to stop.
func (t *Toolbox) Close() error {
	t.cancel()
	t.wg.Wait()
	var errs []error
	for _, s := range t.servers {
		if err := s.closeErr(); err != nil {
			errs = append(errs, fmt.Errorf("tool server %s: %w", s.cfg.Name, err))
		}
	}
	return errors.Join(errs...)
}

// List returns the allowed tools of the servers, sorted by server and
// name. A server that went down keeps the tools it listed last, so that
// the description of run_python_code does not change with its ups and
// downs; calling them fails until it is back. A server that has listed no
// tools yet has an entry with Down set instead.
func (t *Toolbox) List() []supervisor.ToolSpec {
	out := []supervisor.ToolSpec{} // not nil: it goes to Python as a JSON array
	for _, s := range t.servers {
		out = append(out, s.specs()...)
	}
	return out
}

// Call calls tool on server with args, which must be a JSON object that
// the tool's input schema accepts; see supervisor.Tools.
func (t *Toolbox) Call(ctx context.Context, server, tool string, args json.RawMessage) (supervisor.ToolResult, error) {
	name := server + "." + tool
	s := t.byName[server]
	switch {
	case s == nil:
		return supervisor.ToolResult{}, fmt.Errorf("no tool server is named %q", server)
	case !t.allow.Allows(server, tool):
		return supervisor.ToolResult{}, fmt.Errorf("the tool %s is not allowed (--tools-allow)", name)
	}
	c, tl, err := s.lookup(tool)
	if err != nil {
		return supervisor.ToolResult{}, err
	}
	obj, err := checkArguments(name, tl.schema, args)
	if err != nil {
		return supervisor.ToolResult{}, err
	}
	if c == nil {
		return supervisor.ToolResult{}, s.downError()
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = obj
	req.Params.RawArguments = args // as sent, so that no number loses precision
	if len(bytes.TrimSpace(args)) == 0 {
		req.Params.RawArguments = nil
	}
	trips := s.guard.trips.Load()
	res, err := c.CallTool(ctx, req)
	var terr *transport.Error
	switch {
	case err == nil:
		return t.result(name, res)
	case s.guard.trips.Load() != trips:
		// A message refused while the call waited. On stdio and SSE it
		// broke the connection, which every call waiting on it shares; over
		// Streamable HTTP it was one response, and the session goes on.
		if s.cfg.Transport != StreamableHTTP && errors.As(err, &terr) && t.ctx.Err() == nil {
			s.drop(c, err)
		}
		return supervisor.ToolResult{}, s.guard.tooBig(name)
	case ctx.Err() != nil:
		return supervisor.ToolResult{}, fmt.Errorf("call %s: %w", name, ctx.Err())
	case errors.As(err, &terr) && t.ctx.Err() == nil:
		// The connection broke (the server went away, or its process
		// died): have it made anew.
		s.drop(c, err)
		return supervisor.ToolResult{}, s.downError()
	default:
		return supervisor.ToolResult{}, fmt.Errorf("call %s: %w", name, err)
	}
}

// result converts what the tool named name returned, within
// Options.ResultLimit.
func (t *Toolbox) result(name string, res *mcp.CallToolResult) (supervisor.ToolResult, error) {
	out := supervisor.ToolResult{IsError: res.IsError}
	switch {
	case len(res.RawStructuredContent) > 0:
		out.Structured = bytes.Clone(res.RawStructuredContent)
	case res.StructuredContent != nil:
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return supervisor.ToolResult{}, fmt.Errorf("the result of %s: encode its structured content: %w", name, err)
		}
		out.Structured = b
	}
	if string(bytes.TrimSpace(out.Structured)) == "null" {
		out.Structured = nil
	}
	texts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		texts = append(texts, contentText(c))
	}
	out.Text = strings.Join(texts, "\n")
	if size := int64(len(out.Structured) + len(out.Text)); t.opts.ResultLimit > 0 && size > t.opts.ResultLimit {
		return supervisor.ToolResult{}, fmt.Errorf("the result of %s is %s, more than the tool result limit of %s (--tool-result-limit)",
			name, humanize.IBytes(uint64(size)), humanize.IBytes(uint64(t.opts.ResultLimit)))
	}
	return out, nil
}

// contentText is a content block as text: a placeholder for what is not
// text, which Python code could not use anyway.
func contentText(c mcp.Content) string {
	switch c := c.(type) {
	case mcp.TextContent:
		return c.Text
	case mcp.ImageContent:
		return "[" + c.MIMEType + " content]"
	case mcp.AudioContent:
		return "[" + c.MIMEType + " content]"
	case mcp.ResourceLink:
		return "[resource link " + c.URI + "]"
	case mcp.EmbeddedResource:
		switch r := c.Resource.(type) {
		case mcp.TextResourceContents:
			return "[resource " + r.URI + "]"
		case mcp.BlobResourceContents:
			return "[resource " + r.URI + "]"
		}
		return "[resource]"
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
