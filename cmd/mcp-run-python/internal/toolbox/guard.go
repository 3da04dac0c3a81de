package toolbox

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"

	"github.com/dustin/go-humanize"
)

// readGuard bounds every message read from one tool server, as it is read:
// mcp-go's transports read a whole JSON-RPC message (a stdio line, an HTTP
// body, an SSE event) before the result reaches Options.ResultLimit, and a
// server that answers 200 MB would have the server hold all of it. A
// message past the bound ends the read with errMessageTooBig, which ends
// the connection (stdio, SSE) or the request (Streamable HTTP); the call
// that waited for it then says why.
type readGuard struct {
	limit int64 // bytes a message may have; 0 for no bound
	// trips counts the messages refused, so that a call that failed can
	// tell whether one of them was its answer.
	trips atomic.Int64
}

// errMessageTooBig is the read error of a message past the guard's bound.
var errMessageTooBig = errors.New("a message from the tool server is past the read limit")

// messageLimit is the largest message read from a tool server when results
// may be resultLimit bytes (0: no bound): JSON may spell a byte of text in
// six (\u0001), and the envelope and a few content blocks fit in 1 MiB.
func messageLimit(resultLimit int64) int64 {
	if resultLimit <= 0 {
		return 0
	}
	return 6*resultLimit + 1<<20
}

// tooBig says that a call failed because its answer was refused.
func (g *readGuard) tooBig(name string) error {
	return fmt.Errorf("the answer of %s was more than %s, the read limit that --tool-result-limit sets; it was not read",
		name, humanize.IBytes(uint64(g.limit)))
}

// boundary tells where a message ends in a stream of them.
type boundary int

const (
	wholeStream boundary = iota // the stream is one message: an HTTP body of JSON
	eachLine                    // a message per line: stdio
	eachEvent                   // a message per event, which an empty line ends: SSE
)

// reader returns r with each message bounded; r itself when there is no
// bound.
func (g *readGuard) reader(r io.Reader, b boundary) io.Reader {
	if g == nil || g.limit <= 0 {
		return r
	}
	return &boundedReader{r: r, g: g, boundary: b, atLineStart: true}
}

// boundedReader passes r on while each message is within the guard's
// bound, and fails for good once one is not.
type boundedReader struct {
	r        io.Reader
	g        *readGuard
	boundary boundary
	n        int64 // bytes of the current message
	// atLineStart reports that the last byte ended a line (or none was
	// read), so that a newline there ends an event; a \r is skipped.
	atLineStart bool
	err         error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	for i := range n {
		c := p[i]
		b.n++
		switch {
		case c == '\n' && (b.boundary == eachLine || b.boundary == eachEvent && b.atLineStart):
			b.n = 0
		case c == '\r' && b.boundary == eachEvent:
			continue // keeps atLineStart: \r\n ends a line as \n does
		}
		b.atLineStart = c == '\n'
		if b.n > b.g.limit {
			b.err = errMessageTooBig
			b.g.trips.Add(1)
			// What came before the message's end is passed on; the rest is
			// never seen, so the reader's ReadString fails without it.
			return i, b.err
		}
	}
	return n, err
}

// Close closes r when it can be: a response body.
func (b *boundedReader) Close() error {
	if c, ok := b.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// guardedTransport bounds the bodies of the responses of base: a JSON
// body whole, an event stream event by event.
type guardedTransport struct {
	base http.RoundTripper
	g    *readGuard
}

func (t guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	b := wholeStream
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		b = eachEvent
	}
	resp.Body = t.g.reader(resp.Body, b).(io.ReadCloser)
	return resp, nil
}

// httpClient is the client of an HTTP tool server: its responses bounded.
func (g *readGuard) httpClient() *http.Client {
	if g.limit <= 0 {
		return &http.Client{}
	}
	return &http.Client{Transport: guardedTransport{base: http.DefaultTransport, g: g}}
}
