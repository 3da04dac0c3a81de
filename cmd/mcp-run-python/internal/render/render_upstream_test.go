package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// upstreamJS is upstream's rendering code (runCode.ts: asXml, escapeClosing,
// and asJson with the key order of DESIGN 1.4), run by node on the inputs
// given on stdin. Its one change: parse keeps an integer that a double would
// change as it is written (DESIGN 1.4), which takes JSON.parse's source text
// (node 21, or node 20 with --harmony-json-parse-with-source).
const upstreamJS = `
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'))

function parse(text) {
  return JSON.parse(text, (key, value, { source }) =>
    typeof value === 'number' && /^-?\d+$/.test(source) && !Number.isSafeInteger(value)
      ? JSON.rawJSON(source)
      : value)
}

function escapeClosing(closingTag) {
  const regex = new RegExp(` + "`" + `</?\\s*${closingTag}(?:.*?>)?` + "`" + `, 'gi')
  const onMatch = (match) => match.replace(/</g, '&lt;').replace(/>/g, '&gt;')
  return (str) => str.replace(regex, onMatch)
}

function asXml(runResult) {
  const xml = [` + "`<status>${runResult.status}</status>`" + `]
  if (runResult.dependencies?.length) {
    xml.push(` + "`<dependencies>${JSON.stringify(runResult.dependencies)}</dependencies>`" + `)
  }
  if (runResult.output.length) {
    xml.push('<output>')
    const escapeXml = escapeClosing('output')
    xml.push(...runResult.output.map(escapeXml))
    xml.push('</output>')
  }
  if (runResult.status == 'success') {
    if (runResult.returnValueJson) {
      xml.push('<return_value>')
      xml.push(escapeClosing('return_value')(runResult.returnValueJson))
      xml.push('</return_value>')
    }
  } else {
    xml.push('<error>')
    xml.push(escapeClosing('error')(runResult.error))
    xml.push('</error>')
  }
  return xml.join('\n')
}

function asJson(runResult) {
  const json = { status: runResult.status }
  if (runResult.dependencies?.length) json.dependencies = runResult.dependencies
  json.output = runResult.output
  if (runResult.status == 'success') {
    json.return_value = parse(runResult.jsonReturn || 'null')
  } else {
    json.error = runResult.error
  }
  return JSON.stringify(json)
}

process.stdout.write(JSON.stringify({
  render: input.cases.map((c) => ({ xml: asXml({ ...c, returnValueJson: c.xmlReturn }), json: asJson(c) })),
  escape: input.escape.map(([s, tag]) => escapeClosing(tag)(s)),
  strings: input.strings.map((s) => JSON.stringify(s)),
  values: input.values.map((v) => JSON.stringify(parse(v))),
}))
`

// jsCase is a supervisor.Result in the shape upstream's functions take.
type jsCase struct {
	Status       string   `json:"status"`
	Dependencies []string `json:"dependencies"`
	Output       []string `json:"output"`
	Error        string   `json:"error"`
	XMLReturn    *string  `json:"xmlReturn"`  // returnValueJson as XML mode saw it
	JSONReturn   *string  `json:"jsonReturn"` // returnValueJson as JSON mode saw it
}

// toJSCase converts res: upstream's dump_json gave the str itself in XML
// mode and JSON text in JSON mode.
func toJSCase(t *testing.T, res supervisor.Result) jsCase {
	t.Helper()
	c := jsCase{Status: string(res.Status), Dependencies: res.Dependencies, Output: res.Output, Error: res.Error}
	if c.Output == nil {
		c.Output = []string{}
	}
	if len(res.ReturnValue) > 0 {
		jsonText := string(res.ReturnValue)
		xmlText := jsonText
		if res.ReturnString {
			if err := json.Unmarshal(res.ReturnValue, &xmlText); err != nil {
				t.Fatalf("decode str return value: %v", err)
			}
		}
		c.XMLReturn, c.JSONReturn = &xmlText, &jsonText
	}
	return c
}

// jsResults is what the node script prints.
type jsResults struct {
	Render []struct {
		XML  string `json:"xml"`
		JSON string `json:"json"`
	} `json:"render"`
	Escape  []string `json:"escape"`
	Strings []string `json:"strings"`
	Values  []string `json:"values"`
}

// TestRenderMatchesUpstreamJavaScript runs upstream's rendering code under
// node on the golden cases and on generated inputs, and compares it with
// ours and with the golden files. It needs node (not deno).
func TestRenderMatchesUpstreamJavaScript(t *testing.T) {
	nodePath, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH")
	}
	rng := rand.New(rand.NewPCG(1, 2))

	cases := renderCases()
	var input struct {
		Cases   []jsCase    `json:"cases"`
		Escape  [][2]string `json:"escape"`
		Strings []string    `json:"strings"`
		Values  []string    `json:"values"`
	}
	for _, tc := range cases {
		input.Cases = append(input.Cases, toJSCase(t, tc.res))
	}
	tags := []string{"output", "error", "return_value"}
	for range 3000 {
		input.Escape = append(input.Escape, [2]string{randomMarkup(rng), tags[rng.IntN(len(tags))]})
	}
	for range 1000 {
		input.Strings = append(input.Strings, randomText(rng))
	}
	for range 300 {
		input.Values = append(input.Values, randomJSON(rng, 3))
	}

	stdin, err := json.Marshal(input)
	if err != nil {
		t.Fatalf("encode input: %v", err)
	}
	out, err := runNode(nodePath, stdin, "--harmony-json-parse-with-source")
	if err != nil {
		out, err = runNode(nodePath, stdin) // a node that dropped the flag, which it no longer needs
	}
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var js jsResults
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatalf("decode node output: %v", err)
	}

	for i, tc := range cases {
		for mode, want := range map[ReturnMode]string{ReturnXML: js.Render[i].XML, ReturnJSON: js.Render[i].JSON} {
			if golden := readGolden(t, tc.name+"."+string(mode)); golden != want {
				t.Errorf("%s.%s: golden file differs from upstream\ngolden:   %q\nupstream: %q", tc.name, mode, golden, want)
			}
			got, err := Text(mode, tc.res, nil)
			if err != nil {
				t.Fatalf("%s: render %s: %v", tc.name, mode, err)
			}
			if got != want {
				t.Errorf("%s.%s: ours differs from upstream\nours:     %q\nupstream: %q", tc.name, mode, got, want)
			}
		}
	}
	for i, in := range input.Escape {
		if got := escapeTag(in[0], in[1]); got != js.Escape[i] {
			t.Errorf("escapeTag(%q, %q) = %q, upstream %q", in[0], in[1], got, js.Escape[i])
		}
	}
	for i, s := range input.Strings {
		var b strings.Builder
		WriteJSString(&b, s)
		if b.String() != js.Strings[i] {
			t.Errorf("WriteJSString(%q) = %s, JSON.stringify %s", s, b.String(), js.Strings[i])
		}
	}
	for i, v := range input.Values {
		var b strings.Builder
		if err := writeJSReserialized(&b, []byte(v)); err != nil {
			t.Errorf("writeJSReserialized(%s): %v", v, err)
			continue
		}
		if b.String() != js.Values[i] {
			t.Errorf("writeJSReserialized(%s) = %s, JSON.stringify(JSON.parse()) %s", v, b.String(), js.Values[i])
		}
	}
}

// randomMarkup returns text built from the pieces that matter to escapeTag.
func randomMarkup(rng *rand.Rand) string {
	pieces := []string{
		"<", "<", "</", ">", ">", "/", " ", "\t", "\v", "\f", "\n", "\r", "\u00a0", "\u1680", "\u2000", "\u200a",
		"\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u180e", "\u200b", "\u0085",
		"output", "OUTPUT", "OutPut", "outp", "error", "ERROR", "Error", "return_value", "RETURN_VALUE", "return",
		"x", "=", `"`, "é", "🐍", "ſ", "\u212a", "ı",
	}
	var b strings.Builder
	for n := rng.IntN(14); n > 0; n-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// randomText returns text with control characters, quotes, backslashes,
// separators and non-ASCII characters.
func randomText(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.IntN(12); n > 0; n-- {
		switch rng.IntN(6) {
		case 0:
			b.WriteRune(rune(rng.IntN(0x21)))
		case 1:
			b.WriteString([]string{`"`, `\`, "\u2028", "\u2029", "\x7f", "<", ">", "&", "'"}[rng.IntN(9)])
		case 2:
			b.WriteRune(rune(0x80 + rng.IntN(0x700)))
		case 3:
			b.WriteRune(rune(0x10000 + rng.IntN(0x10000)))
		default:
			b.WriteRune(rune(0x20 + rng.IntN(0x5f)))
		}
	}
	return b.String()
}

// runNode runs upstreamJS under node with flags, stdin as its input.
func runNode(nodePath string, stdin []byte, flags ...string) ([]byte, error) {
	cmd := exec.Command(nodePath, append(flags, "-e", upstreamJS)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return out, nil
}

// randomJSON returns JSON text with numbers in many spellings and objects
// with index-like and repeated keys, indented at random.
func randomJSON(rng *rand.Rand, depth int) string {
	switch k := rng.IntN(8); {
	case depth > 0 && k == 0:
		var parts []string
		for n := rng.IntN(5); n > 0; n-- {
			parts = append(parts, randomJSON(rng, depth-1))
		}
		return "[\n  " + strings.Join(parts, ",\n  ") + "\n]"
	case depth > 0 && k == 1:
		keys := []string{"0", "1", "2", "10", "01", "-1", "4294967294", "4294967295", "a", "b", "__proto__", "é", "1.5", ""}
		var parts []string
		for n := rng.IntN(6); n > 0; n-- {
			key, _ := json.Marshal(keys[rng.IntN(len(keys))])
			parts = append(parts, string(key)+": "+randomJSON(rng, depth-1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case k == 2:
		s, _ := json.Marshal(randomText(rng))
		return string(s)
	case k == 3:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	default:
		return randomNumber(rng)
	}
}

// randomNumber returns a JSON number literal, often at the edges of
// JavaScript's formatting rules.
func randomNumber(rng *rand.Rand) string {
	f := math.Float64frombits(rng.Uint64())
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 1.5
	}
	exp := rng.IntN(50) - 25
	g := (rng.Float64()*2 - 1) * math.Pow(10, float64(exp))
	switch rng.IntN(7) {
	case 0:
		return strconv.FormatFloat(f, 'g', -1, 64)
	case 1:
		return strconv.FormatFloat(g, 'e', rng.IntN(20), 64)
	case 2:
		return strconv.FormatFloat(g, 'f', rng.IntN(12), 64)
	case 3:
		return strconv.FormatFloat(g, 'g', -1, 64)
	case 4:
		return strconv.FormatInt(rng.Int64()>>uint(rng.IntN(63)), 10)
	case 5:
		return "1" + strings.Repeat("0", rng.IntN(30)) + []string{"", ".0", ".5", "e-40", "e400", "E+2"}[rng.IntN(6)]
	default:
		return []string{"0", "-0", "0.0", "-0.0", "1e21", "1e-7", "1e-6", "999999999999999999999", "0.1e1"}[rng.IntN(9)]
	}
}
