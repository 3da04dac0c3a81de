package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// idPrefixBytes of an oversized line are kept to find its request ID, which
// clients put before the parameters.
const idPrefixBytes = 4 << 10

// lineLimitReader passes the lines of a JSON-RPC stream through to mcp-go's
// stdio server, which reads each whole line into memory, up to limit bytes
// each (the newline not counted; 0 for no limit). A longer line is never
// held whole: what is past the limit is skipped up to the next newline, and
// the line is reported to onOversize, with its first bytes (for its request
// ID) and its size, instead of being passed on. Written by hand: mcp-go has
// no option for it, and bufio.Scanner's limit ends the stream instead of
// one line.
//
// Each whole line goes to onLine, if set, before it is passed on; mcp-go
// drops a last line that has no newline. Once the input has ended, atEnd,
// if set, is called before the end is passed on: mcp-go cancels every
// request in flight as soon as it reads the end.
type lineLimitReader struct {
	r          *bufio.Reader
	limit      int
	onOversize func(prefix []byte, size int64)
	onLine     func(line []byte)
	atEnd      func()

	line []byte // the line being passed on
	off  int    // how much of line has been read
	err  error  // the input's error, returned once line is read
}

// newLineLimitReader returns r limited to lines of limit bytes.
func newLineLimitReader(r io.Reader, limit int, onOversize func(prefix []byte, size int64)) *lineLimitReader {
	return &lineLimitReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit, onOversize: onOversize}
}

// Read implements io.Reader.
func (l *lineLimitReader) Read(p []byte) (int, error) {
	for l.off >= len(l.line) {
		if l.err != nil {
			if l.atEnd != nil {
				l.atEnd()
				l.atEnd = nil
			}
			return 0, l.err
		}
		l.next()
	}
	n := copy(p, l.line[l.off:])
	l.off += n
	return n, nil
}

// next reads the next line that fits into l.line, reporting those that do
// not, or sets l.err.
func (l *lineLimitReader) next() {
	// A buffer grown for a large line is not kept for the small ones.
	if cap(l.line) > 1<<20 {
		l.line = nil
	}
	l.line, l.off = l.line[:0], 0
	for {
		chunk, err := l.r.ReadSlice('\n')
		if content := len(l.line) + len(bytes.TrimRight(chunk, "\r\n")); l.limit > 0 && content > l.limit {
			l.skip(chunk, err)
			l.line = l.line[:0]
			if l.err != nil {
				return
			}
			continue
		}
		l.line = appendDoubling(l.line, chunk)
		switch {
		case err == nil: // a whole line
			if l.onLine != nil {
				l.onLine(l.line)
			}
			return
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default: // the end of the input: pass on what came before it
			l.err = err
			return
		}
	}
}

// appendDoubling appends b to line, doubling its capacity when it grows:
// append grows a large slice by a quarter, which would leave about five
// times a long line's size in garbage behind.
func appendDoubling(line, b []byte) []byte {
	if need := len(line) + len(b); need > cap(line) {
		grown := make([]byte, len(line), max(need, 2*cap(line), 4<<10))
		copy(grown, line)
		line = grown
	}
	return append(line, b...)
}

// skip discards the rest of a line over the limit, of which l.line and
// chunk have been read, and reports it.
func (l *lineLimitReader) skip(chunk []byte, err error) {
	prefix := make([]byte, 0, idPrefixBytes)
	prefix = append(prefix, l.line[:min(len(l.line), idPrefixBytes)]...)
	prefix = append(prefix, chunk[:min(len(chunk), idPrefixBytes-len(prefix))]...)
	size := int64(len(l.line) + len(chunk))
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = l.r.ReadSlice('\n')
		size += int64(len(chunk))
	}
	if err != nil {
		l.err = err
	}
	l.onOversize(prefix, size)
}

// leadingID returns the ID of the JSON-RPC request that prefix starts, when
// it comes before anything too long to be in prefix; else nil.
func leadingID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if key == "id" {
			if _, ok := (mcpGo{}).idKey(value); ok {
				return value
			}
			return nil
		}
	}
	return nil
}

// oversizedLineError returns the JSON-RPC error response, as a line, to a
// stdio line of size bytes over limit, starting with prefix.
func oversizedLineError(prefix []byte, size int64, limit int) []byte {
	msg := fmt.Sprintf("%s; this line had %d bytes", tooLargeMessage(int64(limit)), size)
	return append(jsonRPCError(leadingID(prefix), codeInvalidRequest, msg), '\n')
}
