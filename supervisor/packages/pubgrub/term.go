package pubgrub

// term is a statement about one package: positive "pkg is selected at a
// version in set", or negative "pkg is not selected at a version in set"
// (true also when pkg is not selected at all). solver.md, "Term".
type term struct {
	pkg int
	pos bool
	set vset
}

func (t term) negate() term { return term{pkg: t.pkg, pos: !t.pos, set: t.set} }

// intersect returns the term true exactly when both t and u are (same
// package): a negative term only removes versions from a positive one, and
// two negative terms exclude the union of their sets.
func (t term) intersect(u term) term {
	switch {
	case t.pos && u.pos:
		return term{pkg: t.pkg, pos: true, set: t.set.intersect(u.set)}
	case t.pos:
		return term{pkg: t.pkg, pos: true, set: t.set.minus(u.set)}
	case u.pos:
		return term{pkg: t.pkg, pos: true, set: u.set.minus(t.set)}
	default:
		return term{pkg: t.pkg, pos: false, set: t.set.union(u.set)}
	}
}

// difference returns t \ u: true when t is and u is not.
func (t term) difference(u term) term { return t.intersect(u.negate()) }

// empty reports whether t can never be true. Only a positive term can be
// empty: a negative one holds whenever its package is left out.
func (t term) empty() bool { return t.pos && t.set.isEmpty() }

// satisfies reports whether u is true whenever t is (t ⊆ u).
func (t term) satisfies(u term) bool {
	switch {
	case t.pos && u.pos:
		return t.set.subsetOf(u.set)
	case t.pos:
		return t.set.disjoint(u.set)
	case u.pos:
		return false // t holds when the package is absent; u does not
	default:
		return u.set.subsetOf(t.set)
	}
}

// contradicts reports whether t and u are never both true.
func (t term) contradicts(u term) bool {
	switch {
	case t.pos && u.pos:
		return t.set.disjoint(u.set)
	case t.pos:
		return t.set.subsetOf(u.set)
	case u.pos:
		return u.set.subsetOf(t.set)
	default:
		return false // both hold when the package is absent
	}
}

// causeKind says where an incompatibility comes from.
type causeKind int

const (
	// causeRoot: {not root}, the root must be selected.
	causeRoot causeKind = iota
	// causeDependency: {depender in X, not dependee in S}: the versions X
	// of the first term's package depend on the second term. A package
	// that depends on itself has one term, its versions outside S.
	causeDependency
	// causeNoVersions: {pkg in S} where no listed version is in S.
	causeNoVersions
	// causeDerived: learned by conflict resolution from two others.
	causeDerived
)

// incompat is a set of terms that must not all be true. solver.md,
// "Incompatibility".
type incompat struct {
	terms []term
	kind  causeKind
	// conflict and other are the causes of a derived incompatibility.
	conflict, other *incompat
	// dependee is the dependency's target term (negative), kept for
	// explanations because a self-dependency merges it away.
	dependee term

	// contradictedLevel and contradictedStamp note where the partial
	// solution was last seen to contradict the incompatibility
	// (solver.noteContradicted); a zero stamp means never.
	contradictedLevel int
	contradictedStamp uint64
}

// isDerived reports whether i was learned rather than given.
func (i *incompat) isDerived() bool { return i.kind == causeDerived }

// derive builds the incompatibility learned from conflict and other by
// resolution: terms about one package are intersected (an incompatibility
// has at most one term per package), and positive terms about the root are
// dropped from a derived incompatibility with other terms, as they always
// hold (solver.md, "Incompatibility").
func derive(terms []term, conflict, other *incompat) *incompat {
	merged := make([]term, 0, len(terms))
	for _, t := range terms {
		found := false
		for j := range merged {
			if merged[j].pkg == t.pkg {
				merged[j] = merged[j].intersect(t)
				found = true
				break
			}
		}
		if !found {
			merged = append(merged, t)
		}
	}
	if len(merged) > 1 {
		kept := merged[:0]
		for _, t := range merged {
			if !(t.pkg == rootID && t.pos) {
				kept = append(kept, t)
			}
		}
		merged = kept
	}
	return &incompat{terms: merged, kind: causeDerived, conflict: conflict, other: other}
}
