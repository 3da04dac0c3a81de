package pubgrub

import (
	"math/bits"
	"strings"
)

// Version is one version of a package as the [Provider] spells it, e.g.
// "2.0.1" or "1.0rc1". The solver never parses or orders versions: the
// provider's list order is the order of preference, and a [Set] decides
// membership. It is a string so that a PEP 440 specifier's
// Allows(version string) bool can be used as a Set as it is.
type Version = string

// Set is the set of versions a requirement allows, given by a membership
// test (for example a PEP 440 specifier's Allows) and the text that names
// it in explanations. The zero Set allows every version.
//
// A Set is exact for any version, so intersection, union and complement
// are too; the solver evaluates it only on the versions the provider
// listed, which is all PubGrub needs (see the package documentation).
type Set struct {
	// allows is nil for the set of every version.
	allows func(Version) bool
	// label is how explanations print the set, e.g. ">=1.0,<2".
	label string
}

// Any returns the set of every version; it is the zero Set.
func Any() Set { return Set{} }

// Exactly returns the set holding v alone, printed "==v". Extras can be
// modelled with it: a virtual package "pkg[extra]" whose version v depends
// on pkg Exactly(v) and on the extra's requirements.
func Exactly(v Version) Set {
	return Set{allows: func(u Version) bool { return u == v }, label: "==" + v}
}

// NewSet returns the set of the versions for which allows reports true,
// printed as label (e.g. a specifier's String). A nil allows gives [Any].
func NewSet(label string, allows func(Version) bool) Set {
	if allows == nil {
		return Set{}
	}
	return Set{allows: allows, label: label}
}

// Contains reports whether v is in the set.
func (s Set) Contains(v Version) bool { return s.allows == nil || s.allows(v) }

// IsAny reports whether s is the set of every version by construction
// ([Any], or a union with it); a predicate that happens to allow
// everything is not detected.
func (s Set) IsAny() bool { return s.allows == nil }

// String returns the set's label, or "*" for [Any].
func (s Set) String() string {
	if s.allows == nil {
		return "*"
	}
	return s.label
}

// Intersect returns the versions in both s and o, printed "s, o" as PEP
// 440 writes a conjunction.
func (s Set) Intersect(o Set) Set {
	switch {
	case s.allows == nil:
		return o
	case o.allows == nil:
		return s
	}
	a, b := s.allows, o.allows
	return Set{allows: func(v Version) bool { return a(v) && b(v) }, label: s.label + ", " + o.label}
}

// Union returns the versions in s or o, printed "s || o".
func (s Set) Union(o Set) Set {
	if s.allows == nil || o.allows == nil {
		return Set{}
	}
	a, b := s.allows, o.allows
	return Set{allows: func(v Version) bool { return a(v) || b(v) }, label: s.label + " || " + o.label}
}

// Complement returns the versions not in s, printed "not (s)".
func (s Set) Complement() Set {
	if s.allows == nil {
		return Set{allows: func(Version) bool { return false }, label: "<none>"}
	}
	a := s.allows
	return Set{allows: func(v Version) bool { return !a(v) }, label: "not (" + s.label + ")"}
}

// vset is a Set evaluated on one package's candidate list: bit i stands for
// the provider's i-th version (newest first). Over a finite universe every
// set operation, complement included, is exact and cheap, and emptiness
// means "no listed version", which is what the solver can choose from.
type vset struct {
	w []uint64
	n int // the universe's size; bits at n and above are always 0
	// label is the text of the Set it came from, kept while an operation
	// leaves the bits unchanged; "" means "print the bits" (see
	// solver.setText).
	label string
}

func emptyVset(n int) vset { return vset{w: make([]uint64, (n+63)/64), n: n} }

func fullVset(n int) vset {
	s := emptyVset(n)
	for i := range s.w {
		s.w[i] = ^uint64(0)
	}
	s.trim()
	return s
}

// trim clears the bits past the universe, which complement sets.
func (s vset) trim() {
	if r := s.n % 64; r != 0 {
		s.w[len(s.w)-1] &= (uint64(1) << r) - 1
	}
}

func (s vset) has(i int) bool { return s.w[i/64]&(uint64(1)<<(i%64)) != 0 }

func (s vset) with(i int) vset {
	r := vset{w: append([]uint64(nil), s.w...), n: s.n}
	r.w[i/64] |= uint64(1) << (i % 64)
	return r
}

func (s vset) isEmpty() bool {
	for _, x := range s.w {
		if x != 0 {
			return false
		}
	}
	return true
}

func (s vset) isFull() bool { return s.count() == s.n }

func (s vset) count() int {
	c := 0
	for _, x := range s.w {
		c += bits.OnesCount64(x)
	}
	return c
}

// first returns the lowest index in s (the newest allowed version), or -1.
func (s vset) first() int {
	for i, x := range s.w {
		if x != 0 {
			return i*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

func (s vset) equal(o vset) bool {
	for i := range s.w {
		if s.w[i] != o.w[i] {
			return false
		}
	}
	return true
}

func (s vset) subsetOf(o vset) bool {
	for i := range s.w {
		if s.w[i]&^o.w[i] != 0 {
			return false
		}
	}
	return true
}

func (s vset) disjoint(o vset) bool {
	for i := range s.w {
		if s.w[i]&o.w[i] != 0 {
			return false
		}
	}
	return true
}

// combine applies op word by word. The result keeps an operand's label
// when it has the same bits, so that "b >=2" intersected with "b *" still
// prints as written.
func (s vset) combine(o vset, op func(a, b uint64) uint64) vset {
	r := vset{w: make([]uint64, len(s.w)), n: s.n}
	for i := range s.w {
		r.w[i] = op(s.w[i], o.w[i])
	}
	r.trim()
	switch {
	case r.equal(s):
		r.label = s.label
	case r.equal(o):
		r.label = o.label
	}
	return r
}

func (s vset) intersect(o vset) vset {
	return s.combine(o, func(a, b uint64) uint64 { return a & b })
}

func (s vset) union(o vset) vset {
	return s.combine(o, func(a, b uint64) uint64 { return a | b })
}

func (s vset) minus(o vset) vset {
	return s.combine(o, func(a, b uint64) uint64 { return a &^ b })
}

// materialize evaluates set on a package's versions.
func materialize(set Set, versions []Version) vset {
	s := emptyVset(len(versions))
	for i, v := range versions {
		if set.Contains(v) {
			s.w[i/64] |= uint64(1) << (i % 64)
		}
	}
	if !set.IsAny() {
		s.label = set.label
	}
	return s
}

// rangeText prints s by its runs of adjacent versions, bounded by the
// listed versions around each run: over [3.0, 2.0, 1.1, 1.0] the set
// {1.0, 1.1} prints "<2.0", {2.0, 3.0} ">=2.0", {2.0} "==2.0". It is exact
// relative to the listed versions, which is all the solver knows.
func rangeText(s vset, versions []Version) string {
	var runs []string
	// Walk from the oldest version (the end of the list) to the newest.
	for i := s.n - 1; i >= 0; i-- {
		if !s.has(i) {
			continue
		}
		oldest := i
		for i > 0 && s.has(i-1) {
			i--
		}
		newest := i
		var parts []string
		if oldest == newest {
			parts = append(parts, "=="+versions[oldest])
		} else {
			if oldest < s.n-1 {
				parts = append(parts, ">="+versions[oldest])
			}
			if newest > 0 {
				parts = append(parts, "<"+versions[newest-1])
			}
		}
		runs = append(runs, strings.Join(parts, ", "))
	}
	switch {
	case len(runs) == 0:
		return "<none>"
	case len(runs) == 1 && runs[0] == "":
		return "*"
	}
	return strings.Join(runs, " || ")
}
