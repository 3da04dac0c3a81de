package packages

import "strings"

// GuessImports returns the top-level modules that the import statements of
// code name, found line by line without parsing Python: `import a.b as c,
// d` gives a and d, `from a.b import c` gives a; relative imports give
// nothing. A statement inside a string counts, one split over lines by a
// backslash may be missed.
//
// It is a guess made before any worker is asked, to pick a worker that
// probably fits the call (a learned package set's); the worker's own
// answer, from Python's parser, decides. No Go library parses Python 3.14,
// and a guess needs no more than this.
func GuessImports(code string) map[string]bool {
	mods := map[string]bool{}
	for line := range strings.Lines(code) {
		for stmt := range strings.SplitSeq(line, ";") {
			stmt = strings.TrimSpace(stmt)
			if rest, ok := strings.CutPrefix(stmt, "import"); ok && startsWithSpace(rest) {
				for part := range strings.SplitSeq(rest, ",") {
					addTop(mods, part)
				}
			} else if rest, ok := strings.CutPrefix(stmt, "from"); ok && startsWithSpace(rest) {
				from, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
				addTop(mods, from)
			}
		}
	}
	return mods
}

func startsWithSpace(s string) bool { return s != "" && (s[0] == ' ' || s[0] == '\t') }

// addTop adds the top-level module of a dotted name ("a.b as c"), if it is one.
func addTop(mods map[string]bool, name string) {
	name = strings.TrimSpace(name)
	name, _, _ = strings.Cut(name, " ")
	top, _, _ := strings.Cut(name, ".")
	if top == "" || !isIdentifier(top) {
		return
	}
	mods[top] = true
}

// isIdentifier reports whether s can be a Python identifier (ASCII letters,
// digits and underscores, or any non-ASCII letter, not starting with a digit).
func isIdentifier(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r > 127:
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
