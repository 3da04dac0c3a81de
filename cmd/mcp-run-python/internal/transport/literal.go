package transport

// The wire as upstream writes it. encoding/json, which mcp-go and the front
// end marshal every message with, escapes <, >, & (as \u003c, \u003e,
// \u0026) and U+2028, U+2029 (as \u2028, \u2029), with no option to stop it
// short of an Encoder that mcp-go does not use. Upstream writes all five as
// they are: the JSR release with JSON.stringify, the PyPI release with
// pydantic's model_dump_json. So every stream that carries messages goes
// through appendLiteral, which turns those escapes back into the
// characters: the same JSON values, upstream's bytes (a result's
// "<status>success</status>" can be grepped for).

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"
)

// literalEscape returns the character of the escape that b starts after
// its backslash ("u003c"...), when it is one that encoding/json writes and
// upstream does not.
func literalEscape(b []byte) (rune, bool) {
	if len(b) < 5 || b[0] != 'u' {
		return 0, false
	}
	switch string(b[1:5]) {
	case "003c":
		return '<', true
	case "003e":
		return '>', true
	case "0026":
		return '&', true
	case "2028":
		return '\u2028', true
	case "2029":
		return '\u2029', true
	}
	return 0, false
}

// appendLiteral appends src, JSON text or a piece of it, to dst with the
// escapes of literalEscape written as their characters. Only a backslash
// that starts an escape counts: in `\\u003c` (a backslash, then "u003c")
// the second one is escaped, and the text stays. escaped reports whether
// src begins just after a backslash that starts an escape (one that ended
// the piece before); the result reports the same for what follows src. An
// escape split between two pieces stays as it is, which is still the same
// JSON value.
func appendLiteral(dst, src []byte, escaped bool) ([]byte, bool) {
	if len(src) == 0 {
		return dst, escaped
	}
	if escaped {
		dst = append(dst, src[0])
		src = src[1:]
	}
	for len(src) > 0 {
		i := bytes.IndexByte(src, '\\')
		if i < 0 {
			return append(dst, src...), false
		}
		dst = append(dst, src[:i]...)
		src = src[i:]
		if r, ok := literalEscape(src[1:]); ok {
			dst = utf8.AppendRune(dst, r)
			src = src[6:]
			continue
		}
		if len(src) == 1 {
			return append(dst, '\\'), true
		}
		dst = append(dst, src[:2]...) // the backslash and what it escapes
		src = src[2:]
	}
	return dst, false
}

// literalWriter passes JSON text on to w through appendLiteral. It is not
// safe for concurrent use: on stdio, syncWriter serialises its writes.
type literalWriter struct {
	w       io.Writer
	escaped bool
	buf     []byte
}

// Write implements io.Writer. It reports all of p written once the text it
// became is.
func (l *literalWriter) Write(p []byte) (int, error) {
	if !l.escaped && bytes.IndexByte(p, '\\') < 0 {
		return l.w.Write(p)
	}
	l.buf, l.escaped = appendLiteral(l.buf[:0], p, l.escaped)
	if _, err := l.w.Write(l.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// literalJSON serves h with its JSON and event-stream bodies written as
// upstream writes them (see appendLiteral); other bodies pass unchanged.
func literalJSON(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&literalResponse{ResponseWriter: w}, r)
	})
}

// literalResponse is the ResponseWriter of literalJSON. The Content-Type
// the handler set when it starts the response decides whether the body is
// rewritten; a rewritten body loses its Content-Length, which no longer
// holds, and gets X-Content-Type-Options: nosniff: with <, > and & as they
// are, no browser may take it for HTML.
type literalResponse struct {
	http.ResponseWriter
	started bool
	body    *literalWriter // nil: passed on unchanged
}

// start decides, once, how the body is written.
func (l *literalResponse) start() {
	if l.started {
		return
	}
	l.started = true
	media, _, _ := mime.ParseMediaType(l.Header().Get("Content-Type"))
	if media == "application/json" || media == "text/event-stream" {
		l.Header().Del("Content-Length")
		l.Header().Set("X-Content-Type-Options", "nosniff")
		l.body = &literalWriter{w: l.ResponseWriter}
	}
}

// WriteHeader implements http.ResponseWriter.
func (l *literalResponse) WriteHeader(status int) {
	if status >= 200 { // 1xx responses leave the headers to the final one
		l.start()
	}
	l.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (l *literalResponse) Write(p []byte) (int, error) {
	l.start()
	if l.body == nil {
		return l.ResponseWriter.Write(p)
	}
	return l.body.Write(p)
}

// Flush implements http.Flusher, which mcp-go's streams require.
func (l *literalResponse) Flush() {
	_ = http.NewResponseController(l.ResponseWriter).Flush()
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (l *literalResponse) Unwrap() http.ResponseWriter { return l.ResponseWriter }
