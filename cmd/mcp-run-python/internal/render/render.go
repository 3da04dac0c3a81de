// Package render turns a run's result into the text content of the tool's
// answer, byte for byte as upstream's JavaScript did (DESIGN 1.3 and 1.4).
package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// ReturnMode selects how a run's result is rendered into the tool's text
// content (DESIGN 1.3 and 1.4).
type ReturnMode string

// The return modes of --return-mode.
const (
	ReturnXML  ReturnMode = "xml"
	ReturnJSON ReturnMode = "json"
)

// File is a file a call returned, as the server keeps it; list_session_files
// sends it as JSON with these keys, JSON mode writes the same by hand.
type File struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	MIMEType string `json:"mime_type"`
	URI      string `json:"uri"`
}

// Text renders res in the given mode, as the tool's answer carries it; JSON
// mode lists files too (XML mode leaves them to the resource links after
// the text). Only JSON mode can fail, when the return value is not valid
// JSON.
func Text(mode ReturnMode, res supervisor.Result, files []File) (string, error) {
	if mode == ReturnJSON {
		return renderJSON(res, files)
	}
	return XML(res), nil
}

// XML renders res the way upstream's asXml did: lines joined with "\n",
// blocks only when they have content, and inside the output, return_value and
// error blocks that block's own tag neutralised (see escapeTag).
func XML(res supervisor.Result) string {
	lines := make([]string, 0, len(res.Output)+8)
	lines = append(lines, "<status>"+string(res.Status)+"</status>")
	if len(res.Dependencies) > 0 {
		lines = append(lines, "<dependencies>"+jsStringArray(res.Dependencies)+"</dependencies>")
	}
	if len(res.Output) > 0 {
		lines = append(lines, "<output>")
		for _, line := range res.Output {
			lines = append(lines, escapeTag(line, "output"))
		}
		lines = append(lines, "</output>")
	}
	if res.Status == supervisor.StatusSuccess {
		// Upstream tested the value for JavaScript truthiness: None gave no
		// block, and so did an empty str.
		if value := xmlReturnValue(res); value != "" {
			lines = append(lines, "<return_value>", escapeTag(value, "return_value"), "</return_value>")
		}
	} else {
		lines = append(lines, "<error>", escapeTag(res.Error, "error"), "</error>")
	}
	return strings.Join(lines, "\n")
}

// xmlReturnValue is the text of the return_value block: a Python str stands
// as itself, anything else as the indented JSON the worker produced.
func xmlReturnValue(res supervisor.Result) string {
	if len(res.ReturnValue) == 0 {
		return ""
	}
	if res.ReturnString {
		var s string
		if err := json.Unmarshal(res.ReturnValue, &s); err == nil {
			return s
		}
	}
	return string(res.ReturnValue)
}

// renderJSON renders res as upstream's asJson did with JSON.stringify: a
// compact object with the keys status, dependencies (when requested), output,
// then return_value on success or error otherwise; then files, when the
// call returned any, which upstream had none of.
func renderJSON(res supervisor.Result, files []File) (string, error) {
	var b strings.Builder
	b.WriteString(`{"status":`)
	WriteJSString(&b, string(res.Status))
	if len(res.Dependencies) > 0 {
		b.WriteString(`,"dependencies":`)
		b.WriteString(jsStringArray(res.Dependencies))
	}
	b.WriteString(`,"output":`)
	b.WriteString(jsStringArray(res.Output))
	if res.Status == supervisor.StatusSuccess {
		b.WriteString(`,"return_value":`)
		if len(res.ReturnValue) == 0 {
			b.WriteString("null")
		} else if err := writeJSReserialized(&b, res.ReturnValue); err != nil {
			return "", fmt.Errorf("render return value: %w", err)
		}
	} else {
		b.WriteString(`,"error":`)
		WriteJSString(&b, res.Error)
	}
	if len(files) > 0 {
		b.WriteString(`,"files":[`)
		for i, f := range files {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"path":`)
			WriteJSString(&b, f.Path)
			fmt.Fprintf(&b, `,"size":%d,"mime_type":`, f.Size)
			WriteJSString(&b, f.MIMEType)
			b.WriteString(`,"uri":`)
			WriteJSString(&b, f.URI)
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String(), nil
}

// jsStringArray returns JSON.stringify of an array of strings; an empty or
// nil slice gives "[]".
func jsStringArray(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, item := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		WriteJSString(&b, item)
	}
	b.WriteByte(']')
	return b.String()
}

// escapeTag reproduces upstream's escapeClosing(tag): JavaScript's
//
//	str.replace(new RegExp(`</?\\s*${tag}(?:.*?>)?`, 'gi'), m => m.replace(/</g, '&lt;').replace(/>/g, '&gt;'))
//
// A match starts at '<', takes an optional '/', any run of JavaScript
// whitespace (\s, which includes line terminators and Unicode spaces), the tag
// in any ASCII case (without the u flag JavaScript never folds a non-ASCII
// letter onto an ASCII one), and then, if the rest of the line holds a '>',
// everything up to and including the first one. '.' stops at JavaScript's line
// terminators \n, \r, U+2028 and U+2029. Every '<' and '>' inside a match is
// replaced; nothing else changes.
func escapeTag(s, tag string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	i, copied := 0, 0
	for i < len(s) {
		end, ok := matchTag(s, i, tag)
		if !ok {
			i++
			continue
		}
		b.WriteString(s[copied:i])
		for k := i; k < end; k++ { // bytewise: '<' and '>' never occur inside a UTF-8 sequence
			switch s[k] {
			case '<':
				b.WriteString("&lt;")
			case '>':
				b.WriteString("&gt;")
			default:
				b.WriteByte(s[k])
			}
		}
		i, copied = end, end
	}
	if copied == 0 {
		return s
	}
	b.WriteString(s[copied:])
	return b.String()
}

// matchTag reports whether the tag pattern matches s at byte offset i, and
// where the match ends.
func matchTag(s string, i int, tag string) (int, bool) {
	if s[i] != '<' {
		return 0, false
	}
	j := i + 1
	if j < len(s) && s[j] == '/' {
		j++
	}
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if !isJSSpace(r) {
			break
		}
		j += size
	}
	if len(s)-j < len(tag) || !strings.EqualFold(asciiOnly(s[j:j+len(tag)]), tag) {
		return 0, false
	}
	j += len(tag)
	// (?:.*?>)? — the shortest run of non-terminators ending in '>', if any.
	for k := j; k < len(s); {
		r, size := utf8.DecodeRuneInString(s[k:])
		if r == '>' {
			return k + 1, true
		}
		if isJSLineTerminator(r) {
			break
		}
		k += size
	}
	return j, true
}

// asciiOnly returns s when it is pure ASCII and "" otherwise, so that
// strings.EqualFold, which folds Unicode (ſ to s, K to k), compares ASCII
// letters only, as a non-unicode JavaScript regular expression does.
func asciiOnly(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return ""
		}
	}
	return s
}

// isJSLineTerminator reports whether r is a JavaScript LineTerminator.
func isJSLineTerminator(r rune) bool {
	return r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029'
}

// isJSSpace reports whether r matches JavaScript's \s: WhiteSpace (tab, VT,
// FF, space, NBSP, ZWNBSP and Unicode's Zs) plus LineTerminator.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', ' ', '\u00a0', '\ufeff', '\u1680', '\u202f', '\u205f', '\u3000':
		return true
	}
	if r >= '\u2000' && r <= '\u200a' {
		return true
	}
	return isJSLineTerminator(r)
}
