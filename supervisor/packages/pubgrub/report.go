package pubgrub

import (
	"fmt"
	"strings"
)

// NoSolution is the error of a [Solve] that found no versions meeting all
// requirements. Its text explains why, in the manner of pub and uv: the
// chain of requirements that clash, one derivation a line, for example
//
//	Because b depends on a <2 and you require b, a <2 is required.
//	So, because you require a >=2, version solving failed.
type NoSolution struct {
	explanation string
}

// Error returns the explanation.
func (e *NoSolution) Error() string { return e.explanation }

// Explain returns the explanation: lines separated by "\n", without a
// trailing newline. Lines that later lines refer back to start with a
// number in parentheses.
func (e *NoSolution) Explain() string { return e.explanation }

// explain writes the derivation graph of the failure inc as text, following
// solver.md, "Error Reporting" (and pub's SolveFailure for the wording).
func (s *solver) explain(inc *incompat) string {
	r := &reporter{s: s, root: inc, derivations: map[*incompat]int{}, lineNumbers: map[*incompat]int{}}
	r.countDerivations(inc)
	if inc.isDerived() {
		r.visit(inc, false)
	} else {
		r.write(inc, "Because "+r.text(inc)+", version solving failed.", false)
	}
	width := 0
	if n := len(r.lineNumbers); n > 0 {
		width = len(fmt.Sprintf("(%d) ", n))
	}
	var b strings.Builder
	lastEmpty := false
	for _, l := range r.lines {
		if l.text == "" {
			if !lastEmpty {
				b.WriteString("\n")
			}
			lastEmpty = true
			continue
		}
		lastEmpty = false
		prefix := ""
		if l.number > 0 {
			prefix = fmt.Sprintf("(%d) ", l.number)
		}
		b.WriteString(prefix + strings.Repeat(" ", width-len(prefix)) + l.text + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reporter turns a derivation graph into lines.
type reporter struct {
	s *solver
	// root is the failure being explained; its line starts with "So,".
	root *incompat
	// derivations counts how many derived incompatibilities each one
	// causes; one used more than once gets a line number to refer to.
	derivations map[*incompat]int
	lineNumbers map[*incompat]int
	lines       []line
}

type line struct {
	text   string
	number int // 0: none
}

func (r *reporter) countDerivations(inc *incompat) {
	r.derivations[inc]++
	if r.derivations[inc] == 1 && inc.isDerived() {
		r.countDerivations(inc.conflict)
		r.countDerivations(inc.other)
	}
}

func (r *reporter) write(inc *incompat, text string, numbered bool) {
	l := line{text: text}
	if numbered {
		l.number = len(r.lineNumbers) + 1
		r.lineNumbers[inc] = l.number
	}
	r.lines = append(r.lines, l)
}

// visit writes the lines that explain the derived incompatibility inc; see
// solver.md, "Error Reporting", for the cases.
func (r *reporter) visit(inc *incompat, conclusion bool) {
	numbered := conclusion || r.derivations[inc] > 1
	conjunction := "And"
	if conclusion || inc == r.root {
		conjunction = "So,"
	}
	text := r.text(inc)
	c, o := inc.conflict, inc.other
	switch {
	case c.isDerived() && o.isDerived():
		cLine, cOK := r.lineNumbers[c]
		oLine, oOK := r.lineNumbers[o]
		switch {
		case cOK && oOK:
			r.write(inc, fmt.Sprintf("Because %s, %s.", r.and(c, o, cLine, oLine), text), numbered)
		case cOK || oOK:
			with, without, n := c, o, cLine
			if oOK {
				with, without, n = o, c, oLine
			}
			r.visit(without, false)
			r.write(inc, fmt.Sprintf("%s because %s (%d), %s.", conjunction, r.text(with), n, text), numbered)
		default:
			singleC, singleO := isSingleLine(c), isSingleLine(o)
			if singleC || singleO {
				first, second := o, c
				if singleO {
					first, second = c, o
				}
				r.visit(first, false)
				r.visit(second, false)
				r.write(inc, fmt.Sprintf("Thus, %s.", text), numbered)
			} else {
				r.visit(c, true)
				r.lines = append(r.lines, line{})
				r.visit(o, false)
				r.write(inc, fmt.Sprintf("%s because %s (%d), %s.", conjunction, r.text(c), r.lineNumbers[c], text), numbered)
			}
		}
	case c.isDerived() || o.isDerived():
		derived, ext := c, o
		if o.isDerived() {
			derived, ext = o, c
		}
		if n, ok := r.lineNumbers[derived]; ok {
			r.write(inc, fmt.Sprintf("Because %s, %s.", r.and(ext, derived, 0, n), text), numbered)
		} else if r.isCollapsible(derived) {
			// Skip the derived step: its own external cause joins ours.
			prior, priorExt := derived.conflict, derived.other
			if !prior.isDerived() {
				prior, priorExt = priorExt, prior
			}
			r.visit(prior, false)
			r.write(inc, fmt.Sprintf("%s because %s, %s.", conjunction, r.and(priorExt, ext, 0, 0), text), numbered)
		} else {
			r.visit(derived, false)
			r.write(inc, fmt.Sprintf("%s because %s, %s.", conjunction, r.text(ext), text), numbered)
		}
	default:
		r.write(inc, fmt.Sprintf("Because %s, %s.", r.and(c, o, 0, 0), text), numbered)
	}
}

// isSingleLine reports whether inc's causes are both external, so that it
// is explained in one line.
func isSingleLine(inc *incompat) bool { return !inc.conflict.isDerived() && !inc.other.isDerived() }

// isCollapsible reports whether the derived inc can be skipped in the
// explanation: it has one derived and one external cause, is used once,
// and its derived cause has no line number of its own.
func (r *reporter) isCollapsible(inc *incompat) bool {
	if r.derivations[inc] > 1 {
		return false
	}
	c, o := inc.conflict, inc.other
	if c.isDerived() == o.isDerived() {
		return false
	}
	inner := c
	if !c.isDerived() {
		inner = o
	}
	_, numbered := r.lineNumbers[inner]
	return !numbered
}

// setText prints a term's set: its label, or the versions it holds.
func (r *reporter) setText(t term) string {
	if t.set.label != "" {
		return t.set.label
	}
	return rangeText(t.set, r.s.pkgs[t.pkg].versions)
}

// isAny reports whether t's set is every version and has no label of its
// own: "foo" rather than "foo >=1".
func isAny(t term) bool { return t.set.label == "" && t.set.isFull() }

// terse prints a term without its sign: "foo >=1", "foo" for any version,
// or with every "every version of foo".
func (r *reporter) terse(t term, every bool) string {
	name := r.s.pkgs[t.pkg].name
	switch {
	case t.pkg == rootID:
		return "your requirements"
	case isAny(t) && every:
		return "every version of " + name
	case isAny(t):
		return name
	}
	return name + " " + r.setText(t)
}

// subjectVerb starts a sentence about what the positive term t needs:
// "you require", "foo >=1 depends on", "every version of foo requires".
func (r *reporter) subjectVerb(t term, dependency bool) string {
	if t.pkg == rootID {
		return "you require"
	}
	if dependency {
		return r.terse(t, true) + " depends on"
	}
	return r.terse(t, true) + " requires"
}

// text describes one incompatibility in words.
func (r *reporter) text(inc *incompat) string {
	switch inc.kind {
	case causeRoot:
		return "your requirements must be met"
	case causeDependency:
		return r.subjectVerb(inc.terms[0], true) + " " + r.terse(inc.dependee, false)
	case causeNoVersions:
		t := inc.terms[0]
		if t.set.label == "" {
			return r.s.pkgs[t.pkg].name + " has no versions"
		}
		return "no version of " + r.s.pkgs[t.pkg].name + " matches " + t.set.label
	}
	if isFailure(inc) {
		return "version solving failed"
	}
	var pos, neg []term
	for _, t := range inc.terms {
		if t.pos {
			pos = append(pos, t)
		} else {
			neg = append(neg, t)
		}
	}
	switch {
	case len(inc.terms) == 1 && len(pos) == 1:
		return r.terse(pos[0], true) + " is forbidden"
	case len(inc.terms) == 1:
		return r.terse(neg[0], false) + " is required"
	case len(inc.terms) == 2 && len(pos) == 2:
		return r.terse(pos[0], false) + " is incompatible with " + r.terse(pos[1], false)
	case len(inc.terms) == 2 && len(neg) == 2:
		return "either " + r.terse(neg[0], false) + " or " + r.terse(neg[1], false)
	case len(pos) == 1:
		return r.subjectVerb(pos[0], false) + " " + r.join(neg, " or ")
	case len(pos) > 1 && len(neg) > 0:
		return "if " + r.join(pos, " and ") + " then " + r.join(neg, " or ")
	case len(pos) > 1:
		return "one of " + r.join(pos, " or ") + " must be false"
	}
	return "one of " + r.join(neg, " or ") + " must be true"
}

func (r *reporter) join(ts []term, sep string) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = r.terse(t, false)
	}
	return strings.Join(parts, sep)
}

// and describes two incompatibilities together, with their line numbers
// when not 0, shortening the common shapes as pub does: "foo depends on
// both a and b", "foo depends on a which depends on b", "foo depends on a
// which is forbidden".
func (r *reporter) and(a, b *incompat, aLine, bLine int) string {
	if s, ok := r.requiresBoth(a, b, aLine, bLine); ok {
		return s
	}
	if s, ok := r.requiresThrough(a, b, aLine, bLine); ok {
		return s
	}
	if s, ok := r.requiresForbidden(a, b, aLine, bLine); ok {
		return s
	}
	return withLine(r.text(a), aLine) + " and " + withLine(r.text(b), bLine)
}

func withLine(s string, n int) string {
	if n == 0 {
		return s
	}
	return fmt.Sprintf("%s (%d)", s, n)
}

// single returns inc's only term of the given sign.
func single(inc *incompat, pos bool) (term, bool) {
	var found term
	n := 0
	for _, t := range inc.terms {
		if t.pos == pos {
			found = t
			n++
		}
	}
	return found, n == 1
}

// negatives lists inc's negative terms, with the dependee of a
// self-dependency (whose terms hold only the depender).
func negatives(inc *incompat) []term {
	if inc.kind == causeDependency {
		return []term{inc.dependee}
	}
	var out []term
	for _, t := range inc.terms {
		if !t.pos {
			out = append(out, t)
		}
	}
	return out
}

// requiresBoth: two incompatibilities whose one positive term is the same
// ("foo depends on a", "foo depends on b") read as "foo depends on both a
// and b".
func (r *reporter) requiresBoth(a, b *incompat, aLine, bLine int) (string, bool) {
	if len(a.terms) == 1 || len(b.terms) == 1 {
		return "", false
	}
	ap, ok1 := single(a, true)
	bp, ok2 := single(b, true)
	if !ok1 || !ok2 || ap.pkg != bp.pkg || !ap.set.equal(bp.set) {
		return "", false
	}
	dependency := a.kind == causeDependency && b.kind == causeDependency
	return fmt.Sprintf("%s both %s and %s", r.subjectVerb(ap, dependency),
		withLine(r.join(negatives(a), " or "), aLine), withLine(r.join(negatives(b), " or "), bLine)), true
}

// requiresThrough: when what one requires satisfies the other's subject
// ("foo depends on a >=1", "a depends on b"), read "foo depends on a >=1
// which depends on b".
func (r *reporter) requiresThrough(a, b *incompat, aLine, bLine int) (string, bool) {
	if len(a.terms) == 1 || len(b.terms) == 1 {
		return "", false
	}
	through := func(prior, latter *incompat) (term, bool) {
		neg, ok := single(prior, false)
		if !ok {
			return term{}, false
		}
		pos, ok := single(latter, true)
		if !ok || pos.pkg != neg.pkg || !neg.negate().satisfies(pos) || len(negatives(latter)) == 0 {
			return term{}, false
		}
		return neg, true
	}
	prior, latter, priorLine, latterLine := a, b, aLine, bLine
	neg, ok := through(a, b)
	if !ok {
		prior, latter, priorLine, latterLine = b, a, bLine, aLine
		if neg, ok = through(b, a); !ok {
			return "", false
		}
	}
	var sb strings.Builder
	if !r.subject(&sb, prior) {
		return "", false
	}
	sb.WriteString(withLine(r.terse(neg, false), priorLine))
	verb := " which requires "
	if latter.kind == causeDependency {
		verb = " which depends on "
	}
	sb.WriteString(verb + withLine(r.join(negatives(latter), " or "), latterLine))
	return sb.String(), true
}

// requiresForbidden: "foo depends on a >=1" and "a >=1 is forbidden" read
// "foo depends on a >=1 which is forbidden".
func (r *reporter) requiresForbidden(a, b *incompat, aLine, bLine int) (string, bool) {
	if len(a.terms) != 1 && len(b.terms) != 1 {
		return "", false
	}
	prior, latter, priorLine, latterLine := a, b, aLine, bLine
	if len(a.terms) == 1 {
		prior, latter, priorLine, latterLine = b, a, bLine, aLine
	}
	neg, ok := single(prior, false)
	if !ok || len(latter.terms) != 1 || latter.terms[0].pkg != neg.pkg || !neg.negate().satisfies(latter.terms[0]) {
		return "", false
	}
	var sb strings.Builder
	if !r.subject(&sb, prior) {
		return "", false
	}
	sb.WriteString(withLine(r.terse(neg, false), priorLine))
	if latter.kind == causeNoVersions {
		sb.WriteString(" which matches no version")
	} else {
		sb.WriteString(" which is forbidden")
	}
	if latterLine != 0 {
		fmt.Fprintf(&sb, " (%d)", latterLine)
	}
	return sb.String(), true
}

// subject writes the start of "X requires ...": "if a and b then " for
// several positive terms, else "foo depends on " or "foo requires ". It
// reports false when inc has no positive term to start with.
func (r *reporter) subject(sb *strings.Builder, inc *incompat) bool {
	var pos []term
	for _, t := range inc.terms {
		if t.pos {
			pos = append(pos, t)
		}
	}
	switch {
	case len(pos) == 0:
		return false
	case len(pos) > 1:
		sb.WriteString("if " + r.join(pos, " and ") + " then ")
	default:
		sb.WriteString(r.subjectVerb(pos[0], inc.kind == causeDependency) + " ")
	}
	return true
}
