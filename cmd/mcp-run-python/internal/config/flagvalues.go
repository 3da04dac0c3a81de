package config

// Flag values that check themselves. Each type's Set refuses a wrong value
// with the reason alone; flagSources.usageError adds the value and where it
// came from, the flag or the environment variable standing in for it. The
// constructors assign defaults without Set, so that a default may mean "not
// set" (0 for --warm and --queue).
//
// Type returns what pflag's help shows after the flag (int, duration,
// string, or the form of --mount); a "string" default is shown quoted.

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap/zapcore"
)

// intFlag is an integer from min to max, written as Go writes it (0x10 too).
type intFlag struct {
	p        *int
	min, max int
}

// newIntFlag returns an intFlag from min to max for *p, which it sets to def;
// def may be outside the range to mean "not set".
func newIntFlag(p *int, def, minimum, maximum int) *intFlag {
	*p = def
	return &intFlag{p: p, min: minimum, max: maximum}
}

func (f *intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	switch {
	case errors.Is(err, strconv.ErrSyntax):
		return errors.New("not a whole number")
	case err != nil && n > 0 && f.max == math.MaxInt:
		return fmt.Errorf("too large, at most %d", f.max)
	case err != nil, n < int64(f.min), n > int64(f.max):
		return f.rangeError()
	}
	*f.p = int(n)
	return nil
}

// rangeError says which values the flag takes.
func (f *intFlag) rangeError() error {
	switch {
	case f.max != math.MaxInt:
		return fmt.Errorf("need %d to %d", f.min, f.max)
	case f.min == 0:
		return errors.New("must not be negative")
	}
	return fmt.Errorf("need at least %d", f.min)
}

func (f *intFlag) String() string { return strconv.Itoa(*f.p) }
func (f *intFlag) Type() string   { return "int" }

// portFlag is a TCP port, 0 to 65535, that also reads a number as Python's
// int() did for the PyPI release's --port: 08080 is decimal, not octal, and
// spaces around it are ignored.
type portFlag struct{ intFlag }

// newPortFlag returns a portFlag for *p, set to def.
func newPortFlag(p *int, def int) *portFlag {
	return &portFlag{*newIntFlag(p, def, 0, math.MaxUint16)}
}

func (f *portFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	sign := ""
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		sign, s = s[:1], s[1:]
	}
	for len(s) > 1 && s[0] == '0' && '0' <= s[1] && s[1] <= '9' {
		s = s[1:] // a leading zero would make strconv read octal
	}
	return f.intFlag.Set(sign + s)
}

// coresFlag is a share of CPU cores, such as 0.1 or 2: a number of 0 or
// more.
type coresFlag struct{ p *float64 }

// newCoresFlag returns a coresFlag for *p, set to def.
func newCoresFlag(p *float64, def float64) *coresFlag {
	*p = def
	return &coresFlag{p: p}
}

func (f *coresFlag) Set(s string) error {
	n, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrSyntax):
		return errors.New("not a number of cores such as 0.1")
	case err != nil, math.IsNaN(n), math.IsInf(n, 0):
		return errors.New("not a finite number")
	case n < 0:
		return errors.New("must not be negative")
	}
	*f.p = n
	return nil
}

func (f *coresFlag) String() string { return strconv.FormatFloat(*f.p, 'g', -1, 64) }
func (f *coresFlag) Type() string   { return "cores" }

// durationFlag is a Go duration such as 30s or 1m30s, positive, or also 0
// when zeroOK.
type durationFlag struct {
	p      *time.Duration
	zeroOK bool
}

// positiveDuration returns a durationFlag above 0 for *p, set to def.
func positiveDuration(p *time.Duration, def time.Duration) *durationFlag {
	*p = def
	return &durationFlag{p: p}
}

// nonNegativeDuration returns a durationFlag of 0 or more for *p, set to def.
func nonNegativeDuration(p *time.Duration, def time.Duration) *durationFlag {
	*p = def
	return &durationFlag{p: p, zeroOK: true}
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New("not a duration such as 30s or 1m30s")
	case d < 0 && f.zeroOK:
		return errors.New("must not be negative")
	case d <= 0 && !f.zeroOK:
		return errors.New("must be positive")
	}
	*f.p = d
	return nil
}

func (f *durationFlag) String() string { return f.p.String() }
func (f *durationFlag) Type() string   { return "duration" }

// byteSize is a size in bytes such as 512MiB, 1GB or 1048576, at most max;
// 0 is a size too (callers take it as "no limit") unless positive. Units
// follow go-humanize: KiB/MiB/GiB are powers of 1024, kB/MB/GB (and k/M/G)
// powers of 1000.
type byteSize struct {
	p        *int64
	max      uint64
	positive bool   // 0 refused
	text     string // as given, for String
	// set, when not nil, makes the flag optional: "" is accepted and sets
	// *set to false (the caller works out the default); a size sets it true.
	set *bool
}

// newByteSize returns a byteSize up to maximum for *p, set to def.
func newByteSize(p *int64, def string, maximum uint64) *byteSize {
	return (&byteSize{p: p, max: maximum}).withDefault(def)
}

// withDefault sets b to def, which must be one of its values.
func (b *byteSize) withDefault(def string) *byteSize {
	if err := b.Set(def); err != nil {
		panic(fmt.Sprintf("default size %q: %v", def, err))
	}
	return b
}

// positiveByteSize returns a byteSize from 1 byte to maximum for *p, set to
// def, for the limits that have no "no limit".
func positiveByteSize(p *int64, def string, maximum uint64) *byteSize {
	return (&byteSize{p: p, max: maximum, positive: true}).withDefault(def)
}

// optionalByteSize returns a byteSize up to maximum for *p that is not set
// (*set false) until a size is given.
func optionalByteSize(p *int64, set *bool, maximum uint64) *byteSize {
	*p, *set = 0, false
	return &byteSize{p: p, max: maximum, set: set}
}

func (b *byteSize) Set(s string) error {
	if s == "" && b.set != nil {
		*b.p, *b.set, b.text = 0, false, ""
		return nil
	}
	n, err := humanize.ParseBytes(s)
	var numErr *strconv.NumError
	switch {
	case strings.HasPrefix(s, "-"):
		return errors.New("must not be negative")
	case n > b.max, err != nil && strings.HasPrefix(err.Error(), "too large"): // beyond uint64
		return fmt.Errorf("too large, at most %d bytes", b.max)
	case errors.As(err, &numErr): // no number: strconv's message says nothing more
		return errors.New("not a size such as 512MiB")
	case err != nil: // an unknown unit, named
		return fmt.Errorf("not a size such as 512MiB: %w", err)
	case n == 0 && b.positive:
		return errors.New("must be positive")
	}
	*b.p, b.text = int64(n), s
	if b.set != nil {
		*b.set = true
	}
	return nil
}

func (b *byteSize) String() string { return b.text }
func (b *byteSize) Type() string   { return "string" }

// choice is one of a few words, in any case; it keeps the lower-case word.
type choice[T ~string] struct {
	p       *T
	choices []T
}

// newChoice returns a choice among choices (in lower case) for *p, set to def.
func newChoice[T ~string](p *T, def T, choices ...T) *choice[T] {
	*p = def
	return &choice[T]{p: p, choices: choices}
}

func (c *choice[T]) Set(s string) error {
	if word := T(strings.ToLower(s)); slices.Contains(c.choices, word) {
		*c.p = word
		return nil
	}
	words := make([]string, len(c.choices))
	for i, w := range c.choices {
		words[i] = string(w)
	}
	last := len(words) - 1
	if last == 0 {
		return fmt.Errorf("want %s", words[0])
	}
	return fmt.Errorf("want %s or %s", strings.Join(words[:last], ", "), words[last])
}

func (c *choice[T]) String() string { return string(*c.p) }
func (c *choice[T]) Type() string   { return "string" }

// levelFlag is a log level as zap parses them: debug, info, warn, error (and
// dpanic, panic, fatal), in either case; "" is info.
type levelFlag struct{ p *zapcore.Level }

// newLevelFlag returns a levelFlag for *p, set to def.
func newLevelFlag(p *zapcore.Level, def zapcore.Level) *levelFlag {
	*p = def
	return &levelFlag{p: p}
}

func (f *levelFlag) Set(s string) error { return f.p.Set(s) }

func (f *levelFlag) String() string { return f.p.String() }
func (f *levelFlag) Type() string   { return "string" }

// textFlag is a string, or a string type, that parse checks and converts.
type textFlag[T ~string] struct {
	p     *T
	parse func(string) (T, error)
}

// newTextFlag returns a textFlag for *p, set to def.
func newTextFlag[T ~string](p *T, def T, parse func(string) (T, error)) *textFlag[T] {
	*p = def
	return &textFlag[T]{p: p, parse: parse}
}

// newCheckedString returns a textFlag for *p, set to def, that takes the
// strings check accepts as they are.
func newCheckedString(p *string, def string, check func(string) error) *textFlag[string] {
	return newTextFlag(p, def, func(s string) (string, error) { return s, check(s) })
}

func (f *textFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

func (f *textFlag[T]) String() string { return string(*f.p) }
func (f *textFlag[T]) Type() string   { return "string" }

// checkHost refuses an empty --host; the listener reports the rest.
func checkHost(s string) error {
	if s == "" {
		return errors.New("empty host")
	}
	return nil
}

// checkOptionalHTTPURL accepts "" or an absolute http(s) URL.
func checkOptionalHTTPURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("not an http(s) URL such as https://auth.example.com")
	}
	return nil
}

// parseScopes checks OAuth scope names (RFC 6749 §3.3: printable ASCII
// without space, quote or backslash).
func parseScopes(s string) ([]string, error) {
	var out []string
	for scope := range strings.SplitSeq(s, ",") {
		scope = strings.TrimSpace(scope)
		if scope == "" {
			continue
		}
		for _, c := range scope {
			if c <= ' ' || c > '~' || c == '"' || c == '\\' {
				return nil, fmt.Errorf("%q is not a scope name", scope)
			}
		}
		out = append(out, scope)
	}
	return out, nil
}

// checkedByMain accepts every value of a flag whose rules are a program
// package's: package main checks them (Config.Check).
func checkedByMain(string) error { return nil }

// listFlag is a comma-separated list that parse splits and checks.
type listFlag struct {
	p     *[]string
	parse func(string) ([]string, error)
}

func (f *listFlag) Set(s string) error {
	list, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.p = list
	return nil
}

func (f *listFlag) String() string { return strings.Join(*f.p, ",") }
func (f *listFlag) Type() string   { return "string" }

// mountForm is how --mount is written, which the help shows.
const mountForm = "HOST:SANDBOX[:ro|rw]"

// mountFlag is --mount, repeatable: each value adds its mounts, one a line,
// so that the one environment variable can hold several; blank lines are
// skipped and a line may end in CRLF. No separator but the newline is safe:
// a HOST may hold ':' (C:\data), ';', ',' or spaces. Package main parses
// the lines and resolves their host folders (Config.Check), so that a
// mistake shows at start.
type mountFlag struct{ p *[]string }

func (f *mountFlag) Set(s string) error {
	*f.p = append(*f.p, SplitLines(s)...)
	return nil
}

// SplitLines returns the lines of a value that holds one entry a line, such
// as --mount's, skipping blank ones; a line may end in CRLF.
func SplitLines(s string) []string {
	var lines []string
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// String gives the mounts one a line, as Set takes them back.
func (f *mountFlag) String() string { return strings.Join(*f.p, "\n") }

func (f *mountFlag) Type() string { return mountForm }

// SplitList returns the entries of a comma-separated list, such as --deps or
// --allow-net, skipping blank ones, as they are: untrimmed.
func SplitList(s string) []string {
	var entries []string
	for entry := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(entry) != "" {
			entries = append(entries, entry)
		}
	}
	return entries
}

// parseDeps splits --deps at commas, as upstream did, dropping empty
// entries; package main checks each requirement (Config.Check).
func parseDeps(s string) ([]string, error) {
	var deps []string
	for _, dep := range SplitList(s) {
		deps = append(deps, strings.TrimSpace(dep))
	}
	return deps, nil
}

// parseAllowNet splits --allow-net at commas; nil for "", the flag not set.
// A list that names no host is an error: it would mean either everything or
// nothing. Package main checks each host and drops repeats (Config.Check).
func parseAllowNet(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	hosts := SplitList(s)
	if len(hosts) == 0 {
		return nil, errors.New("no host given; use --disable-networking for no network at all")
	}
	return hosts, nil
}

// parseAllowOrigin splits --allow-origin at commas into its entries,
// trimmed; package main turns them into origins as browsers send them
// (Config.Check).
func parseAllowOrigin(s string) ([]string, error) {
	var origins []string
	for _, entry := range SplitList(s) {
		origins = append(origins, strings.TrimSpace(entry))
	}
	return origins, nil
}
