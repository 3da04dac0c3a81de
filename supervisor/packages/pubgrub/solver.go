package pubgrub

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Provider answers the solver's questions about packages. The solver asks
// lazily and at most once per question in a [Solve] call: Versions when a
// package is first named by a chosen version's dependencies (or the root),
// Dependencies when it first tries a version. Caching across calls is the
// provider's business.
type Provider interface {
	// Versions returns the versions of pkg that may be chosen, newest (most
	// preferred) first. Versions the caller must never choose (yanked, no
	// usable file, pre-releases it does not allow) are best left out. An
	// unknown package can return an empty list: requiring it then fails
	// with an explanation rather than an error.
	Versions(ctx context.Context, pkg string) ([]Version, error)
	// Dependencies returns what version v of pkg (one of Versions' answers)
	// requires.
	Dependencies(ctx context.Context, pkg string, v Version) ([]Dependency, error)
}

// Dependency is a requirement: Package must be selected at a version in
// Allowed.
type Dependency struct {
	// Package is the package's name, as the provider knows it (normalize
	// it first: the solver compares names as strings).
	Package string
	// Allowed are the versions that meet the requirement; the zero Set
	// allows any.
	Allowed Set
}

// rootID is the package id of the virtual root, whose only version depends
// on Solve's requirements.
const rootID = 0

// errInternal reports a broken invariant of the algorithm; it means a bug
// here, never bad input.
var errInternal = errors.New("pubgrub: internal error")

// Solve chooses one version for each package reachable from root such that
// every chosen version's dependencies, and root, are met; it prefers the
// newest versions. It returns the chosen versions by package name.
//
// When no choice works the error is a [*NoSolution] explaining why. An
// error of the provider, or ctx's, is returned wrapped.
func Solve(ctx context.Context, p Provider, root []Dependency) (map[string]Version, error) {
	s := &solver{
		ctx:      ctx,
		provider: p,
		ids:      map[string]int{},
		rootDeps: root,

		stamps:    []uint64{1, 2},
		nextStamp: 3,
	}
	// The root is a package with one version, "", so that its requirements
	// are ordinary dependency incompatibilities.
	s.pkgs = append(s.pkgs, &pkgState{name: "", versions: []Version{""}, decided: -1, deps: map[int][]*incompat{}})
	s.addIncompat(&incompat{terms: []term{{pkg: rootID, pos: false, set: fullVset(1)}}, kind: causeRoot})
	next := rootID
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("version solving stopped: %w", err)
		}
		if err := s.propagate(next); err != nil {
			return nil, err
		}
		pkg, done, err := s.decide()
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		next = pkg
	}
	out := make(map[string]Version, len(s.pkgs)-1)
	for id, ps := range s.pkgs {
		if id != rootID && ps.decided >= 0 {
			out[ps.name] = ps.versions[ps.decided]
		}
	}
	return out, nil
}

// pkgState is what the solver knows about one package: its versions and
// incompatibilities, and its share of the partial solution.
type pkgState struct {
	name     string
	versions []Version // newest first, as the provider listed them
	// incompats are the incompatibilities that mention the package, oldest
	// first.
	incompats []*incompat
	// deps caches the dependency incompatibilities added for a version
	// (by index), so a version tried again is not asked for again.
	deps map[int][]*incompat
	// depsOn lists this package's dependency incompatibilities by
	// dependee, to merge versions with the same dependency.
	depsOn map[int][]depEntry

	// assigned are the indexes of the partial solution's assignments to
	// this package, in order.
	assigned []int
	// acc is the intersection of those assignments when hasAcc.
	acc    term
	hasAcc bool
	// decided is the index of the decided version, or -1.
	decided int
}

// depEntry is a dependency incompatibility and what was added to the
// solver for it: itself, or when it names no version, what it implies.
type depEntry struct {
	dependency, added *incompat
}

// assignment is one entry of the partial solution (solver.md, "Partial
// Solution"): a decision (cause nil) or a derivation.
type assignment struct {
	t     term
	level int
	cause *incompat
}

// solver is the state of one Solve call.
type solver struct {
	ctx      context.Context
	provider Provider
	rootDeps []Dependency

	pkgs []*pkgState
	ids  map[string]int

	assigns []assignment
	// level is the current decision level: the number of decisions in the
	// partial solution. The root's decision is level 1.
	level int
	// stamps[l] identifies the current stint at decision level l: it is
	// renewed each time a decision enters level l, so a note taken at
	// level l holds exactly while stamps[l] is unchanged (see
	// incompat.contradictedAt).
	stamps    []uint64
	nextStamp uint64

	// scratch is satisfier's working memory.
	scratch []uint64
}

// pkgID returns the id of the named package, asking the provider for its
// versions the first time.
func (s *solver) pkgID(name string) (int, error) {
	if id, ok := s.ids[name]; ok {
		return id, nil
	}
	vs, err := s.provider.Versions(s.ctx, name)
	if err != nil {
		return 0, fmt.Errorf("versions of %s: %w", name, err)
	}
	// A repeated version would make two bits for one choice.
	seen := make(map[Version]bool, len(vs))
	uniq := make([]Version, 0, len(vs))
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			uniq = append(uniq, v)
		}
	}
	id := len(s.pkgs)
	s.pkgs = append(s.pkgs, &pkgState{name: name, versions: uniq, decided: -1, deps: map[int][]*incompat{}})
	s.ids[name] = id
	return id, nil
}

func (s *solver) addIncompat(inc *incompat) {
	for _, t := range inc.terms {
		ps := s.pkgs[t.pkg]
		ps.incompats = append(ps.incompats, inc)
	}
}

// relation says how the partial solution stands to a term.
type relation int

const (
	inconclusive relation = iota
	satisfied
	contradicted
)

func (s *solver) relation(t term) relation {
	ps := s.pkgs[t.pkg]
	switch {
	case !ps.hasAcc:
		return inconclusive
	case ps.acc.satisfies(t):
		return satisfied
	case ps.acc.contradicts(t):
		return contradicted
	}
	return inconclusive
}

// assign appends t to the partial solution at the current level.
func (s *solver) assign(t term, cause *incompat) {
	s.assigns = append(s.assigns, assignment{t: t, level: s.level, cause: cause})
	ps := s.pkgs[t.pkg]
	ps.assigned = append(ps.assigned, len(s.assigns)-1)
	if ps.hasAcc {
		ps.acc = ps.acc.intersect(t)
	} else {
		ps.acc, ps.hasAcc = t, true
	}
}

// backtrack removes the assignments above decision level level.
func (s *solver) backtrack(level int) {
	touched := map[int]bool{}
	for len(s.assigns) > 0 && s.assigns[len(s.assigns)-1].level > level {
		a := s.assigns[len(s.assigns)-1]
		s.assigns = s.assigns[:len(s.assigns)-1]
		ps := s.pkgs[a.t.pkg]
		ps.assigned = ps.assigned[:len(ps.assigned)-1]
		if a.cause == nil {
			ps.decided = -1
		}
		touched[a.t.pkg] = true
	}
	s.level = level
	for pkg := range touched {
		ps := s.pkgs[pkg]
		ps.hasAcc = false
		for _, i := range ps.assigned {
			if ps.hasAcc {
				ps.acc = ps.acc.intersect(s.assigns[i].t)
			} else {
				ps.acc, ps.hasAcc = s.assigns[i].t, true
			}
		}
	}
}

// satisfier returns the index of the earliest assignment with which the
// partial solution satisfies t. Conflict resolution calls it for every
// term at every step, so it folds the assignments into scratch words
// rather than building intermediate terms: the positive sets intersect,
// the negative ones unite, and the running term is pos \ neg while any
// assignment is positive, else "not neg".
func (s *solver) satisfier(t term) (int, error) {
	words := len(t.set.w)
	if cap(s.scratch) < 2*words {
		s.scratch = make([]uint64, 2*words)
	}
	pos, neg := s.scratch[:words], s.scratch[words:2*words]
	clear(neg)
	positive := false
	for _, i := range s.pkgs[t.pkg].assigned {
		a := s.assigns[i].t
		switch {
		case !a.pos:
			for w := range neg {
				neg[w] |= a.set.w[w]
			}
		case positive:
			for w := range pos {
				pos[w] &= a.set.w[w]
			}
		default:
			copy(pos, a.set.w)
			positive = true
		}
		if foldSatisfies(positive, pos, neg, t) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: no assignment satisfies a term of %s", errInternal, s.pkgs[t.pkg].name)
}

// foldSatisfies is term.satisfies for satisfier's running term.
func foldSatisfies(positive bool, pos, neg []uint64, t term) bool {
	for w, x := range t.set.w {
		switch {
		case positive && t.pos:
			if pos[w]&^neg[w]&^x != 0 {
				return false
			}
		case positive:
			if pos[w]&^neg[w]&x != 0 {
				return false
			}
		case t.pos:
			return false // "not neg" holds when the package is absent
		default:
			if x&^neg[w] != 0 {
				return false
			}
		}
	}
	return positive || !t.pos
}

// propagate is unit propagation (solver.md, "Unit Propagation"): it derives
// what the incompatibilities force, starting from the package that just
// changed, and resolves the conflicts it finds.
func (s *solver) propagate(start int) error {
	changed := []int{start}
	queued := map[int]bool{start: true}
	for len(changed) > 0 {
		// Conflicts can chain for long on hard inputs: stay cancellable.
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("version solving stopped: %w", err)
		}
		pkg := changed[0]
		changed = changed[1:]
		delete(queued, pkg)
		incs := s.pkgs[pkg].incompats
		// Newest first: learned incompatibilities are the more general.
		for i := len(incs) - 1; i >= 0; i-- {
			got, conflict := s.propagateOne(incs[i])
			if conflict {
				cause, err := s.resolveConflict(incs[i])
				if err != nil {
					return err
				}
				got, conflict = s.propagateOne(cause)
				if conflict || got < 0 {
					return fmt.Errorf("%w: the learned incompatibility derives nothing", errInternal)
				}
				// Backjumping undid what the queue was about.
				changed, queued = []int{got}, map[int]bool{got: true}
				break
			}
			if got >= 0 && !queued[got] {
				changed = append(changed, got)
				queued[got] = true
			}
		}
	}
	return nil
}

// propagateOne derives the negation of inc's one inconclusive term when the
// partial solution satisfies all its other terms, returning that term's
// package (else -1), or reports that inc is satisfied: a conflict.
func (s *solver) propagateOne(inc *incompat) (pkg int, conflict bool) {
	if s.stillContradicted(inc) {
		return -1, false
	}
	unsat := -1
	for i, t := range inc.terms {
		switch s.relation(t) {
		case contradicted:
			s.noteContradicted(inc)
			return -1, false
		case inconclusive:
			if unsat >= 0 {
				return -1, false
			}
			unsat = i
		}
	}
	if unsat < 0 {
		return -1, true
	}
	t := inc.terms[unsat]
	s.assign(t.negate(), inc)
	s.noteContradicted(inc)
	return t.pkg, false
}

// noteContradicted records that the partial solution contradicts inc.
// More assignments only narrow the partial solution, so inc stays
// contradicted until a backjump below the current level, and propagation
// can skip it meanwhile (as pubgrub-rs does): re-checking such
// incompatibilities is otherwise most of the solver's work.
func (s *solver) noteContradicted(inc *incompat) {
	inc.contradictedLevel, inc.contradictedStamp = s.level, s.stamps[s.level]
}

// stillContradicted reports whether a note of noteContradicted still holds.
func (s *solver) stillContradicted(inc *incompat) bool {
	l := inc.contradictedLevel
	return inc.contradictedStamp != 0 && l <= s.level && s.stamps[l] == inc.contradictedStamp
}

// resolveConflict finds the root cause of a conflict by resolution,
// learns it and backjumps to where it derives something new (solver.md,
// "Conflict Resolution"). It returns that root cause, or a *NoSolution
// when the root cause is that the root cannot be selected.
func (s *solver) resolveConflict(inc *incompat) (*incompat, error) {
	learned := false
	for !isFailure(inc) {
		var (
			recentTerm term
			satisfier  = -1
			difference *term
			// prevLevel is the level of the latest assignment before the
			// satisfier that the conflict also needs; backjumping there
			// keeps those and lets inc derive something new.
			prevLevel = 1
		)
		for _, t := range inc.terms {
			sat, err := s.satisfier(t)
			if err != nil {
				return nil, err
			}
			switch {
			case satisfier < 0:
				recentTerm, satisfier = t, sat
			case satisfier < sat:
				prevLevel = max(prevLevel, s.assigns[satisfier].level)
				recentTerm, satisfier, difference = t, sat, nil
			default:
				prevLevel = max(prevLevel, s.assigns[sat].level)
			}
			if recentTerm.pkg == t.pkg {
				// The satisfier may satisfy the term only together with
				// earlier assignments to the same package; those count too.
				d := s.assigns[satisfier].t.difference(recentTerm)
				difference = nil
				if !d.empty() {
					difference = &d
					prev, err := s.satisfier(d.negate())
					if err != nil {
						return nil, err
					}
					prevLevel = max(prevLevel, s.assigns[prev].level)
				}
			}
		}
		sat := s.assigns[satisfier]
		if prevLevel < sat.level || sat.cause == nil {
			s.backtrack(prevLevel)
			if learned {
				s.addIncompat(inc)
			}
			return inc, nil
		}
		// Resolve inc with the satisfier's cause on the satisfier's package.
		terms := make([]term, 0, len(inc.terms)+len(sat.cause.terms))
		for _, t := range inc.terms {
			if t.pkg != recentTerm.pkg {
				terms = append(terms, t)
			}
		}
		for _, t := range sat.cause.terms {
			if t.pkg != sat.t.pkg {
				terms = append(terms, t)
			}
		}
		if difference != nil {
			terms = append(terms, difference.negate())
		}
		inc = derive(terms, inc, sat.cause)
		learned = true
	}
	return nil, &NoSolution{explanation: s.explain(inc)}
}

// isFailure reports whether inc says the root cannot be selected.
func isFailure(inc *incompat) bool {
	return len(inc.terms) == 0 ||
		(len(inc.terms) == 1 && inc.terms[0].pkg == rootID && inc.terms[0].pos)
}

// decide makes a decision (solver.md, "Decision Making"): among packages
// required but not yet decided, the one with the fewest allowed versions
// (it runs out first, so conflicts show early), at its newest allowed
// version. It returns that package, or done when every required package
// has a version.
func (s *solver) decide() (pkg int, done bool, err error) {
	best, bestCount := -1, 0
	for id, ps := range s.pkgs {
		if !ps.hasAcc || !ps.acc.pos || ps.decided >= 0 {
			continue
		}
		if c := ps.acc.set.count(); best < 0 || c < bestCount {
			best, bestCount = id, c
		}
	}
	if best < 0 {
		return 0, true, nil
	}
	ps := s.pkgs[best]
	v := ps.acc.set.first()
	if v < 0 {
		// Unit propagation never leaves a positive term empty (every
		// requirement matching no version is learned as an incompatibility
		// when it is read), but saying so keeps the solver sound if it did.
		s.addIncompat(&incompat{terms: []term{ps.acc}, kind: causeNoVersions})
		return best, false, nil
	}
	incs, err := s.dependencies(best, v)
	if err != nil {
		return 0, false, err
	}
	// Deciding v would satisfy an incompatibility at once: leave it to
	// unit propagation, which will rule v out and explain why.
	for _, inc := range incs {
		if s.satisfiedExcept(inc, best) {
			return best, false, nil
		}
	}
	s.level++
	if s.level == len(s.stamps) {
		s.stamps = append(s.stamps, 0)
	}
	s.stamps[s.level] = s.nextStamp
	s.nextStamp++
	ps.decided = v
	s.assign(term{pkg: best, pos: true, set: emptyVset(len(ps.versions)).with(v)}, nil)
	return best, false, nil
}

// satisfiedExcept reports whether the partial solution satisfies every term
// of inc not about pkg.
func (s *solver) satisfiedExcept(inc *incompat, pkg int) bool {
	for _, t := range inc.terms {
		if t.pkg != pkg && s.relation(t) != satisfied {
			return false
		}
	}
	return true
}

// dependencies returns the incompatibilities that version v of pkg's
// dependencies give, adding them the first time.
func (s *solver) dependencies(pkg, v int) ([]*incompat, error) {
	ps := s.pkgs[pkg]
	if incs, ok := ps.deps[v]; ok {
		return incs, nil
	}
	var deps []Dependency
	if pkg == rootID {
		deps = s.rootDeps
	} else {
		var err error
		deps, err = s.provider.Dependencies(s.ctx, ps.name, ps.versions[v])
		if err != nil {
			return nil, fmt.Errorf("dependencies of %s %s: %w", ps.name, ps.versions[v], err)
		}
	}
	// One requirement per package: "a>=1" and "a<2" mean "a>=1, <2".
	var order []string
	byName := map[string]Set{}
	for _, d := range deps {
		if prev, ok := byName[d.Package]; ok {
			byName[d.Package] = prev.Intersect(d.Allowed)
			continue
		}
		order = append(order, d.Package)
		byName[d.Package] = d.Allowed
	}
	var incs []*incompat
	for _, name := range order {
		dep, err := s.pkgID(name)
		if err != nil {
			return nil, err
		}
		allowed := materialize(byName[name], s.pkgs[dep].versions)
		if inc := s.dependency(pkg, v, dep, allowed); inc != nil {
			incs = append(incs, inc)
			s.addIncompat(inc)
		}
	}
	ps.deps[v] = incs
	return incs, nil
}

// dependency returns the incompatibility for "version v of pkg depends on
// dep in allowed", or nil when it says nothing.
func (s *solver) dependency(pkg, v, dep int, allowed vset) *incompat {
	ps := s.pkgs[pkg]
	dependee := term{pkg: dep, pos: false, set: allowed}
	if dep == pkg {
		if allowed.has(v) {
			return nil // a version that requires itself
		}
		own := emptyVset(len(ps.versions)).with(v)
		return &incompat{terms: []term{{pkg: pkg, pos: true, set: own}}, kind: causeDependency, dependee: dependee}
	}
	// Versions with the same dependency share one incompatibility, which
	// lets PubGrub reason about them together, keeps propagation from
	// wading through one incompatibility per version, and reads as "a >=2
	// depends on b <2" (solver.md, "Decision Making"). Only the versions
	// tried so far are known, so the shared one grows as more are tried;
	// it replaces the narrower one it implies. (Assignments derived from
	// the narrower one keep it as their cause, which stays true.)
	depender := emptyVset(len(ps.versions)).with(v)
	if ps.depsOn == nil {
		ps.depsOn = map[int][]depEntry{}
	}
	entries := ps.depsOn[dep]
	merged := -1
	for i, prev := range entries {
		if prev.dependency.dependee.set.equal(allowed) {
			merged = i
			depender = depender.union(prev.dependency.terms[0].set)
			if prev.dependency.dependee.set.label != allowed.label {
				allowed.label = "" // print the versions, not one of the texts
			}
			s.removeIncompat(prev.added)
			break
		}
	}
	dependee.set = allowed
	inc := &incompat{
		terms:    []term{{pkg: pkg, pos: true, set: depender}, dependee},
		kind:     causeDependency,
		dependee: dependee,
	}
	added := inc
	if allowed.isEmpty() {
		// No listed version meets the requirement. The term "not dep in
		// ∅" always holds, which propagation cannot work with, so learn its
		// consequence right away: those versions of pkg are out. Deriving
		// it from a "no versions" fact keeps the explanation.
		none := &incompat{terms: []term{{pkg: dep, pos: true, set: allowed}}, kind: causeNoVersions}
		added = derive([]term{inc.terms[0]}, inc, none)
	}
	entry := depEntry{dependency: inc, added: added}
	if merged >= 0 {
		entries[merged] = entry
	} else {
		ps.depsOn[dep] = append(entries, entry)
	}
	return added
}

// removeIncompat takes inc out of the incompatibilities unit propagation
// looks at.
func (s *solver) removeIncompat(inc *incompat) {
	for _, t := range inc.terms {
		ps := s.pkgs[t.pkg]
		ps.incompats = slices.DeleteFunc(ps.incompats, func(i *incompat) bool { return i == inc })
	}
}
