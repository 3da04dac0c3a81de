package packages

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

// PEP 508 requirement strings and environment markers are parsed by hand:
// no maintained Go library for them is available from the module proxy here
// (the Go PEP 440 libraries stop at versions and specifiers), and the
// grammar is small. The parser follows the grammar of the PyPA "Dependency
// specifiers" specification, with the same leniencies as pip's "packaging":
// legacy dotted marker names (os.name, sys.platform, ...) are accepted, and
// "extra" comparisons normalise both sides (PEP 685).

var normalizeRE = regexp.MustCompile(`[-_.]+`)

// Normalize returns the PEP 503 normalized form of a project name:
// lower case, with every run of "-", "_" and "." replaced by a single "-".
func Normalize(name string) string {
	return strings.ToLower(normalizeRE.ReplaceAllString(name, "-"))
}

// Requirement is a parsed PEP 508 dependency specifier, e.g.
// `requests[socks]>=2.8,<3; python_version >= "3.8"`.
type Requirement struct {
	// Name is the project name as written; see [Normalize].
	Name string
	// Extras are the requested extras, normalized, in the order written.
	Extras []string
	// Specifier is the version specifier; empty means any version.
	Specifier Specifier
	// URL is set for a direct reference ("name @ url").
	URL string
	// Marker is the environment marker, or nil when there is none.
	Marker *Marker
	// Text is the requirement string as given.
	Text string
}

// ParseRequirement parses a PEP 508 requirement string.
func ParseRequirement(s string) (Requirement, error) {
	r := Requirement{Text: s}
	fail := func(format string, args ...any) (Requirement, error) {
		return Requirement{}, fmt.Errorf("invalid requirement %q: %s", s, fmt.Sprintf(format, args...))
	}
	p := &scanner{s: s}
	p.skipSpace()
	r.Name = p.identifier()
	if r.Name == "" {
		return fail("expected a package name")
	}
	p.skipSpace()
	if p.peek() == '[' {
		p.pos++
		for {
			p.skipSpace()
			if p.peek() == ']' {
				p.pos++
				break
			}
			if len(r.Extras) > 0 {
				if p.peek() != ',' {
					return fail("expected \",\" or \"]\" in extras")
				}
				p.pos++
				p.skipSpace()
			}
			e := p.identifier()
			if e == "" {
				return fail("expected an extra name")
			}
			if n := Normalize(e); !slices.Contains(r.Extras, n) {
				r.Extras = append(r.Extras, n)
			}
		}
		p.skipSpace()
	}
	rest := p.s[p.pos:]
	var markerText string
	hasMarker := false
	if strings.HasPrefix(rest, "@") {
		rest = strings.TrimLeft(rest[1:], " \t")
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		r.URL = rest[:end]
		if r.URL == "" {
			return fail("expected a URL after \"@\"")
		}
		rest = strings.TrimLeft(rest[end:], " \t")
		if rest != "" {
			if rest[0] != ';' {
				return fail("unexpected %q after the URL", rest)
			}
			markerText, hasMarker = rest[1:], true
		}
	} else {
		specText := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			specText, markerText, hasMarker = rest[:i], rest[i+1:], true
		}
		specText = strings.TrimSpace(specText)
		if strings.HasPrefix(specText, "(") {
			if !strings.HasSuffix(specText, ")") {
				return fail("unbalanced parentheses around the version specifier")
			}
			specText = strings.TrimSpace(specText[1 : len(specText)-1])
		}
		spec, err := ParseSpecifier(specText)
		if err != nil {
			return fail("%v", err)
		}
		r.Specifier = spec
	}
	if hasMarker {
		m, err := ParseMarker(markerText)
		if err != nil {
			return fail("%v", err)
		}
		r.Marker = m
	}
	return r, nil
}

// String renders the requirement as given.
func (r Requirement) String() string { return r.Text }

// scanner is a cursor over a requirement string.
type scanner struct {
	s   string
	pos int
}

func (p *scanner) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *scanner) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

// identifier reads a PEP 508 identifier: letters and digits, with ".", "-"
// and "_" allowed inside but not at either end. It returns "" (consuming
// nothing) when there is none.
func (p *scanner) identifier() string {
	start := p.pos
	end := p.pos
	for end < len(p.s) && isIdentChar(p.s[end]) {
		end++
	}
	for end > start && !isAlnum(p.s[end-1]) {
		end--
	}
	if end == start || !isAlnum(p.s[start]) {
		return ""
	}
	p.pos = end
	return p.s[start:end]
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isIdentChar(c byte) bool { return isAlnum(c) || c == '.' || c == '-' || c == '_' }

// Environment holds the values of the PEP 508 marker variables
// (python_version, sys_platform, ...). The key "extra" is set by the
// resolver while it evaluates a dependency's markers.
type Environment map[string]string

// PyodideEnvironment returns the marker environment of Pyodide running
// CPython pythonFull (e.g. "3.14.2") on Emscripten emscriptenVersion (e.g.
// "5.0.3"; it becomes platform_release).
func PyodideEnvironment(pythonFull, emscriptenVersion string) Environment {
	return Environment{
		"python_version":                 majorMinor(pythonFull),
		"python_full_version":            pythonFull,
		"implementation_version":         pythonFull,
		"implementation_name":            "cpython",
		"platform_python_implementation": "CPython",
		"os_name":                        "posix",
		"sys_platform":                   "emscripten",
		"platform_system":                "Emscripten",
		"platform_machine":               "wasm32",
		"platform_release":               emscriptenVersion,
		"platform_version":               "#1",
		"extra":                          "",
	}
}

// majorMinor returns "3.14" for "3.14.2".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// markerVar returns the canonical name of a marker variable, accepting
// the legacy spellings packaging still accepts; ok is false for unknown
// names.
func markerVar(name string) (canonical string, ok bool) {
	switch name {
	case "python_version", "python_full_version", "os_name", "sys_platform", "platform_release",
		"platform_system", "platform_version", "platform_machine", "platform_python_implementation",
		"implementation_name", "implementation_version", "extra":
		return name, true
	case "os.name", "sys.platform", "platform.version", "platform.machine", "platform.python_implementation":
		return strings.ReplaceAll(name, ".", "_"), true
	case "python_implementation":
		return "platform_python_implementation", true
	}
	return "", false
}

// Marker is a parsed PEP 508 environment marker such as
// `sys_platform != "emscripten" and extra == "socks"`.
type Marker struct {
	root markerNode
	text string
}

// String returns the marker as written.
func (m *Marker) String() string { return strings.TrimSpace(m.text) }

// Evaluate reports whether the marker holds in env. Variables missing from
// env count as "".
func (m *Marker) Evaluate(env Environment) bool { return m.root.eval(env) }

type markerNode interface {
	eval(env Environment) bool
}

type markerOr []markerNode

func (n markerOr) eval(env Environment) bool {
	for _, c := range n {
		if c.eval(env) {
			return true
		}
	}
	return false
}

type markerAnd []markerNode

func (n markerAnd) eval(env Environment) bool {
	for _, c := range n {
		if !c.eval(env) {
			return false
		}
	}
	return true
}

// markerValue is a variable (name set) or a string literal.
type markerValue struct {
	variable string
	literal  string
}

func (v markerValue) get(env Environment) string {
	if v.variable != "" {
		return env[v.variable]
	}
	return v.literal
}

type markerCmp struct {
	lhs, rhs markerValue
	op       string
}

func (n markerCmp) eval(env Environment) bool {
	l, r := n.lhs.get(env), n.rhs.get(env)
	if n.lhs.variable == "extra" || n.rhs.variable == "extra" {
		l, r = Normalize(l), Normalize(r)
	}
	switch n.op {
	case "in":
		return strings.Contains(r, l)
	case "not in":
		return !strings.Contains(r, l)
	}
	// As packaging does: a PEP 440 comparison when the right side makes a
	// valid specifier and the left side a valid version, else strings.
	if spec, err := ParseSpecifier(n.op + r); err == nil {
		if v, err := pep440.Parse(l); err == nil {
			return spec.allows(v, l)
		}
	}
	switch n.op {
	case "==", "===":
		return l == r
	case "!=":
		return l != r
	case "<":
		return l < r
	case "<=":
		return l <= r
	case ">":
		return l > r
	case ">=":
		return l >= r
	}
	return false // "~=" between non-versions is undefined
}

// ParseMarker parses a PEP 508 environment marker.
func ParseMarker(s string) (*Marker, error) {
	toks, err := tokenizeMarker(s)
	if err != nil {
		return nil, err
	}
	p := &markerParser{toks: toks}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("invalid marker %q: unexpected %q", s, p.toks[p.pos].text)
	}
	return &Marker{root: root, text: s}, nil
}

type tokenKind int

const (
	tokString tokenKind = iota + 1
	tokName
	tokOp
	tokLParen
	tokRParen
)

type markerToken struct {
	kind tokenKind
	text string
}

func tokenizeMarker(s string) ([]markerToken, error) {
	var toks []markerToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(':
			toks = append(toks, markerToken{tokLParen, "("})
			i++
		case c == ')':
			toks = append(toks, markerToken{tokRParen, ")"})
			i++
		case c == '"' || c == '\'':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("invalid marker %q: unterminated string", s)
			}
			toks = append(toks, markerToken{tokString, s[i+1 : i+1+end]})
			i += end + 2
		case isAlnum(c) || c == '_':
			j := i
			for j < len(s) && (isAlnum(s[j]) || s[j] == '_' || s[j] == '.') {
				j++
			}
			toks = append(toks, markerToken{tokName, s[i:j]})
			i = j
		default:
			op := ""
			for _, o := range [...]string{"===", "==", "!=", "<=", ">=", "~=", "<", ">"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("invalid marker %q: unexpected %q", s, string(c))
			}
			toks = append(toks, markerToken{tokOp, op})
			i += len(op)
		}
	}
	return toks, nil
}

type markerParser struct {
	toks []markerToken
	pos  int
}

func (p *markerParser) next() (markerToken, bool) {
	if p.pos >= len(p.toks) {
		return markerToken{}, false
	}
	t := p.toks[p.pos]
	p.pos++
	return t, true
}

func (p *markerParser) keyword(word string) bool {
	if p.pos < len(p.toks) && p.toks[p.pos].kind == tokName && p.toks[p.pos].text == word {
		p.pos++
		return true
	}
	return false
}

func (p *markerParser) or() (markerNode, error) {
	var alts markerOr
	for {
		n, err := p.and()
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
		if !p.keyword("or") {
			break
		}
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alts, nil
}

func (p *markerParser) and() (markerNode, error) {
	var all markerAnd
	for {
		n, err := p.atom()
		if err != nil {
			return nil, err
		}
		all = append(all, n)
		if !p.keyword("and") {
			break
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return all, nil
}

func (p *markerParser) atom() (markerNode, error) {
	if p.pos < len(p.toks) && p.toks[p.pos].kind == tokLParen {
		p.pos++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if t, ok := p.next(); !ok || t.kind != tokRParen {
			return nil, fmt.Errorf("invalid marker: expected \")\"")
		}
		return n, nil
	}
	lhs, err := p.value()
	if err != nil {
		return nil, err
	}
	var op string
	switch {
	case p.keyword("in"):
		op = "in"
	case p.keyword("not"):
		if !p.keyword("in") {
			return nil, fmt.Errorf("invalid marker: expected \"in\" after \"not\"")
		}
		op = "not in"
	default:
		t, ok := p.next()
		if !ok || t.kind != tokOp {
			return nil, fmt.Errorf("invalid marker: expected a comparison operator after %q", lhs.variable+lhs.literal)
		}
		op = t.text
	}
	rhs, err := p.value()
	if err != nil {
		return nil, err
	}
	return markerCmp{lhs: lhs, op: op, rhs: rhs}, nil
}

func (p *markerParser) value() (markerValue, error) {
	t, ok := p.next()
	if !ok {
		return markerValue{}, fmt.Errorf("invalid marker: unexpected end")
	}
	switch t.kind {
	case tokString:
		return markerValue{literal: t.text}, nil
	case tokName:
		if canon, ok := markerVar(t.text); ok {
			return markerValue{variable: canon}, nil
		}
		return markerValue{}, fmt.Errorf("invalid marker: unknown variable %q", t.text)
	}
	return markerValue{}, fmt.Errorf("invalid marker: unexpected %q", t.text)
}
