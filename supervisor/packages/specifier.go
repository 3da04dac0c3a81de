package packages

import (
	"fmt"
	"regexp"
	"strings"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

// PEP 440 versions and their ordering come from
// github.com/aquasecurity/go-pep440-version (used by Trivy and Syft). Its
// operators were checked against pip's vendored "packaging" on a table of
// cases (see specifier_test.go) and agree, with two exceptions that this
// file works around:
//
//   - "~=1.4.5a4" must mean ">=1.4.5a4, ==1.4.*" (PEP 440 drops the suffix
//     of a compatible-release clause); the library makes it "==1.4.5.*".
//     We translate "~=" into those two clauses ourselves.
//   - "===" (arbitrary equality) must compare strings, also ones that are
//     not PEP 440 versions; the library only accepts valid versions. We
//     compare the strings ourselves.
//
// The library's WithPreRelease option is not used: it also changes what
// "<2.0" means for "2.0a1". Whether pre-releases may be chosen at all is
// the resolver's policy (see allowPrereleases), not the specifier's.

// clauseRE splits one clause such as ">= 1.0" into operator and version.
var clauseRE = regexp.MustCompile(`^(~=|===|==|!=|<=|>=|<|>)\s*(\S+)$`)

// Specifier is a parsed PEP 440 version specifier such as ">=1.0,!=1.3.*";
// the zero value allows every version.
type Specifier struct {
	clauses []clause
}

// clause is one "op version" of a Specifier.
type clause struct {
	op      string // as written: ~=, ===, ==, !=, <=, >=, <, >
	version string // as written, possibly ending in ".*"
	// checks are library specifiers that must all hold (a "~=" becomes two);
	// empty for "===".
	checks []pep440.Specifiers
	// pre says the clause names a pre-release with an operator that asks
	// for it (==, >=, <=, ~=, ===), which lets pre-releases be chosen.
	pre bool
}

// ParseSpecifier parses a comma-separated PEP 440 specifier. An empty or
// blank string gives the empty specifier.
func ParseSpecifier(s string) (Specifier, error) {
	var spec Specifier
	if strings.TrimSpace(s) == "" {
		return spec, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		m := clauseRE.FindStringSubmatch(part)
		if m == nil {
			return Specifier{}, fmt.Errorf("invalid version specifier %q", part)
		}
		c, err := newClause(m[1], m[2])
		if err != nil {
			return Specifier{}, fmt.Errorf("invalid version specifier %q: %w", part, err)
		}
		spec.clauses = append(spec.clauses, c)
	}
	return spec, nil
}

func newClause(op, version string) (clause, error) {
	c := clause{op: op, version: version}
	if op == "===" {
		if v, err := pep440.Parse(version); err == nil {
			c.pre = v.IsPreRelease()
		}
		return c, nil
	}
	texts := []string{op + version}
	if op == "~=" {
		v, err := pep440.Parse(version)
		if err != nil {
			return clause{}, err
		}
		// BaseVersion is "[N!]release"; drop the last release segment.
		base := v.BaseVersion()
		epoch := ""
		if i := strings.Index(base, "!"); i >= 0 {
			epoch, base = base[:i+1], base[i+1:]
		}
		rel := strings.Split(base, ".")
		if len(rel) < 2 || v.Local() != "" {
			return clause{}, fmt.Errorf("~= needs a release of at least two parts and no local version")
		}
		texts = []string{">=" + version, "==" + epoch + strings.Join(rel[:len(rel)-1], ".") + ".*"}
	}
	for _, t := range texts {
		s, err := pep440.NewSpecifiers(t)
		if err != nil {
			return clause{}, err
		}
		c.checks = append(c.checks, s)
	}
	switch op {
	case "==", ">=", "<=", "~=":
		if v, err := pep440.Parse(strings.TrimSuffix(version, ".*")); err == nil {
			c.pre = v.IsPreRelease()
		}
	}
	return c, nil
}

// allows reports whether version v (original: its text as published)
// satisfies every clause, pre-releases included.
func (s Specifier) allows(v pep440.Version, original string) bool {
	for _, c := range s.clauses {
		if c.op == "===" {
			if !strings.EqualFold(strings.TrimSpace(original), c.version) {
				return false
			}
			continue
		}
		for _, chk := range c.checks {
			if !chk.Check(v) {
				return false
			}
		}
	}
	return true
}

// Allows reports whether the version string satisfies every clause,
// pre-releases included. An unparsable version satisfies only "===".
func (s Specifier) Allows(version string) bool {
	v, err := pep440.Parse(version)
	if err != nil {
		for _, c := range s.clauses {
			if c.op != "===" || !strings.EqualFold(strings.TrimSpace(version), c.version) {
				return false
			}
		}
		return true
	}
	return s.allows(v, version)
}

// Prereleases reports whether the specifier explicitly names a pre-release
// (e.g. ">=2.0b1"), which makes pre-releases eligible.
func (s Specifier) Prereleases() bool {
	for _, c := range s.clauses {
		if c.pre {
			return true
		}
	}
	return false
}

// pinned reports whether the specifier is an exact pin ("==V" without a
// wildcard, or "===V"), the case in which PEP 592 lets yanked files be used.
func (s Specifier) pinned() bool {
	for _, c := range s.clauses {
		if c.op == "===" || (c.op == "==" && !strings.HasSuffix(c.version, ".*")) {
			return true
		}
	}
	return false
}

// IsEmpty reports whether the specifier has no clauses.
func (s Specifier) IsEmpty() bool { return len(s.clauses) == 0 }

// String returns the clauses joined with ",", e.g. ">=1.0,<2".
func (s Specifier) String() string {
	parts := make([]string, len(s.clauses))
	for i, c := range s.clauses {
		parts[i] = c.op + c.version
	}
	return strings.Join(parts, ",")
}
