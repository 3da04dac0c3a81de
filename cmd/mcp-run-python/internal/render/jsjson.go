package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reproduces JavaScript's JSON.stringify byte for byte where the
// upstream server used it. Go's encoding/json differs: it escapes <, >, &,
// U+2028 and U+2029, sorts map keys, and formats numbers its own way.

// WriteJSString writes s as JSON.stringify writes a string, so that the log
// notifications of mcpserver match upstream's bytes too: only '"', '\\'
// and the control characters below U+0020 are escaped (\b \t \n \f \r short,
// the others as \u00xx); everything else, including U+2028, U+2029 and
// non-ASCII text, is written as is. Bytes that are not valid UTF-8 become
// U+FFFD, as they would when decoded into a JavaScript string.
func WriteJSString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// writeJSReserialized writes JSON.stringify(JSON.parse(raw)), which is what
// upstream's JSON mode did with the worker's JSON text: the value compacted,
// numbers re-formatted as JavaScript numbers (1.0 becomes 1, 1e21 stays 1e+21),
// and object keys that are array indices moved first in ascending order, the
// rest kept in their order; a repeated key keeps its first position and its
// last value. Unlike upstream, an integer keeps all its digits (see jsNumber).
func writeJSReserialized(b *strings.Builder, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseJSValue(dec)
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: data after the value")
	}
	return writeJSValue(b, v)
}

// jsObject is a JSON object that remembers the order its keys came in.
type jsObject struct {
	keys   []string
	values map[string]any
}

// set adds or replaces key as a JavaScript object's property assignment does.
func (o *jsObject) set(key string, value any) {
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = value
}

// ownKeys returns the keys in JavaScript's property order: array indices in
// ascending numeric order, then the other keys in insertion order.
func (o *jsObject) ownKeys() []string {
	type index struct {
		key string
		n   uint64
	}
	var indices []index
	var others []string
	for _, key := range o.keys {
		if n, ok := arrayIndex(key); ok {
			indices = append(indices, index{key, n})
		} else {
			others = append(others, key)
		}
	}
	slices.SortFunc(indices, func(a, b index) int {
		switch {
		case a.n < b.n:
			return -1
		case a.n > b.n:
			return 1
		}
		return 0
	})
	keys := make([]string, 0, len(o.keys))
	for _, idx := range indices {
		keys = append(keys, idx.key)
	}
	return append(keys, others...)
}

// arrayIndex reports whether key is a JavaScript array index: the canonical
// decimal form of an integer below 2^32-1.
func arrayIndex(key string) (uint64, bool) {
	n, err := strconv.ParseUint(key, 10, 64)
	if err != nil || n >= math.MaxUint32 || strconv.FormatUint(n, 10) != key {
		return 0, false
	}
	return n, true
}

// parseJSValue reads one JSON value from dec: *jsObject, []any, string,
// json.Number, bool or nil.
func parseJSValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &jsObject{values: map[string]any{}}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := keyTok.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", keyTok)
				}
				value, err := parseJSValue(dec)
				if err != nil {
					return nil, err
				}
				obj.set(key, value)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				value, err := parseJSValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, value)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return tok, nil
	}
}

// writeJSValue writes a value made by parseJSValue as JSON.stringify would.
func writeJSValue(b *strings.Builder, v any) error {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		WriteJSString(b, t)
	case json.Number:
		s, err := jsNumber(t)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case []any:
		b.WriteByte('[')
		for i, item := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSValue(b, item); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *jsObject:
		b.WriteByte('{')
		for i, key := range t.ownKeys() {
			if i > 0 {
				b.WriteByte(',')
			}
			WriteJSString(b, key)
			b.WriteByte(':')
			if err := writeJSValue(b, t.values[key]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value of type %T", v)
	}
	return nil
}

// jsNumber formats a JSON number literal as JSON.stringify(JSON.parse(n)):
// the nearest double, printed by ECMAScript's Number::toString, with
// infinities (from literals too large for a double) as null and -0 as 0.
// encoding/json prints a float64 by the same rule (the shortest digits that
// round-trip, exponent form below 1e-6 and from 1e21); it only differs on
// -0, which it keeps, and on NaN and infinities, which it refuses.
//
// An integer literal (no fraction, no exponent) is the exception: the worker
// writes only Python ints so, and a double would change one past 2^53 and
// make one past 1.8e308 null, where XML mode and pydantic_core's to_json keep
// every digit. It is written as it came, which for one JavaScript holds
// exactly is what JavaScript writes too.
func jsNumber(n json.Number) (string, error) {
	if digits := strings.TrimPrefix(string(n), "-"); digits != "" && strings.Trim(digits, "0123456789") == "" {
		if strings.Trim(digits, "0") == "" {
			return "0", nil // -0
		}
		return string(n), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "", fmt.Errorf("number %q: %w", string(n), err)
	}
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return "null", nil
	case f == 0:
		return "0", nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("number %q: %w", string(n), err)
	}
	return string(b), nil
}
