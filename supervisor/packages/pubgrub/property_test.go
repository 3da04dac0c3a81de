package pubgrub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// graph is a random dependency graph: packages p0…pN-1, each with versions
// "k.0", newest first.
type graph struct {
	versions [][]Version
	root     []gdep
	deps     [][][]gdep // deps[pkg][version index]
}

// gdep requires pkg at one of the version indexes allowed marks.
type gdep struct {
	pkg     int
	allowed []bool
}

func pkgName(i int) string { return fmt.Sprintf("p%d", i) }

// randomGraph draws a graph. Sets are mostly ranges (as specifiers are),
// sometimes arbitrary subsets, empty or everything; dependencies may point
// anywhere, cycles and self-dependencies included.
func randomGraph(r *rand.Rand, minPkgs, maxPkgs, minVersions, maxVersions int) *graph {
	n := minPkgs + r.IntN(maxPkgs-minPkgs+1)
	g := &graph{versions: make([][]Version, n), deps: make([][][]gdep, n)}
	for p := range n {
		nv := minVersions + r.IntN(maxVersions-minVersions+1)
		for k := nv; k >= 1; k-- {
			g.versions[p] = append(g.versions[p], fmt.Sprintf("%d.0", k))
		}
	}
	randSet := func(pkg int) []bool {
		nv := len(g.versions[pkg])
		allowed := make([]bool, nv)
		switch x := r.IntN(20); {
		case x < 3: // any
			for i := range allowed {
				allowed[i] = true
			}
		case x < 4: // nothing
		case x < 7: // arbitrary subset
			for i := range allowed {
				allowed[i] = r.IntN(2) == 0
			}
		default: // a range
			lo := r.IntN(nv)
			hi := lo + r.IntN(nv-lo)
			for i := lo; i <= hi; i++ {
				allowed[i] = true
			}
		}
		return allowed
	}
	randDeps := func(maxDeps int) []gdep {
		var out []gdep
		for range r.IntN(maxDeps + 1) {
			pkg := r.IntN(n)
			out = append(out, gdep{pkg: pkg, allowed: randSet(pkg)})
		}
		return out
	}
	g.root = randDeps(3)
	for p := range n {
		g.deps[p] = make([][]gdep, len(g.versions[p]))
		for v := range g.versions[p] {
			g.deps[p][v] = randDeps(3)
		}
	}
	return g
}

func (g *graph) index(pkg string) int {
	var i int
	if _, err := fmt.Sscanf(pkg, "p%d", &i); err != nil || i < 0 || i >= len(g.versions) {
		return -1
	}
	return i
}

func (g *graph) set(d gdep) Set {
	var label []string
	for i, ok := range d.allowed {
		if ok {
			label = append(label, g.versions[d.pkg][i])
		}
	}
	allowed := map[Version]bool{}
	for _, v := range label {
		allowed[v] = true
	}
	return NewSet("in {"+strings.Join(label, ",")+"}", func(v Version) bool { return allowed[v] })
}

func (g *graph) toDeps(ds []gdep) []Dependency {
	out := make([]Dependency, len(ds))
	for i, d := range ds {
		out[i] = Dependency{Package: pkgName(d.pkg), Allowed: g.set(d)}
	}
	return out
}

// graphProvider serves a graph and fails the test on a repeated question.
type graphProvider struct {
	t        testing.TB
	g        *graph
	asked    map[string]bool
	nDepCall int
}

func (p *graphProvider) once(key string) {
	if p.asked[key] {
		p.t.Errorf("provider asked twice: %s", key)
	}
	p.asked[key] = true
}

func (p *graphProvider) Versions(_ context.Context, pkg string) ([]Version, error) {
	p.once("versions " + pkg)
	i := p.g.index(pkg)
	if i < 0 {
		return nil, fmt.Errorf("unknown package %s", pkg)
	}
	return p.g.versions[i], nil
}

func (p *graphProvider) Dependencies(_ context.Context, pkg string, v Version) ([]Dependency, error) {
	p.once("deps " + pkg + " " + v)
	p.nDepCall++
	i := p.g.index(pkg)
	for vi, u := range p.g.versions[i] {
		if u == v {
			return p.g.toDeps(p.g.deps[i][vi]), nil
		}
	}
	return nil, fmt.Errorf("unknown version %s %s", pkg, v)
}

// bruteForce reports whether some choice of a version or nothing for each
// package meets every requirement, by trying them all (pruned only by
// requirements among the packages already chosen).
func (g *graph) bruteForce() bool {
	n := len(g.versions)
	choice := make([]int, n) // -1: not selected
	holds := func(d gdep, upto int) bool {
		if d.pkg > upto {
			return true // not chosen yet
		}
		return choice[d.pkg] >= 0 && d.allowed[choice[d.pkg]]
	}
	// consistent checks the requirements that involve only p0…pUpto and
	// that mention pUpto (the others were checked before).
	consistent := func(upto int) bool {
		for _, d := range g.root {
			if d.pkg == upto && !holds(d, upto) {
				return false
			}
		}
		for p := 0; p <= upto; p++ {
			if choice[p] < 0 {
				continue
			}
			for _, d := range g.deps[p][choice[p]] {
				if (p == upto || d.pkg == upto) && !holds(d, upto) {
					return false
				}
			}
		}
		return true
	}
	var try func(p int) bool
	try = func(p int) bool {
		if p == n {
			return true
		}
		for c := -1; c < len(g.versions[p]); c++ {
			choice[p] = c
			if consistent(p) && try(p+1) {
				return true
			}
		}
		return false
	}
	return try(0)
}

// check returns why sol is not a valid, minimal solution of g, or "".
func (g *graph) check(sol map[string]Version) string {
	choice := map[int]int{}
	for name, v := range sol {
		p := g.index(name)
		if p < 0 {
			return "unknown package " + name
		}
		vi := -1
		for i, u := range g.versions[p] {
			if u == v {
				vi = i
			}
		}
		if vi < 0 {
			return "unknown version " + name + " " + v
		}
		choice[p] = vi
	}
	meets := func(d gdep) bool {
		vi, ok := choice[d.pkg]
		return ok && d.allowed[vi]
	}
	reached := map[int]bool{}
	var reach func(ds []gdep) string
	reach = func(ds []gdep) string {
		for _, d := range ds {
			if !meets(d) {
				return fmt.Sprintf("requirement on %s not met", pkgName(d.pkg))
			}
			if !reached[d.pkg] {
				reached[d.pkg] = true
				if msg := reach(g.deps[d.pkg][choice[d.pkg]]); msg != "" {
					return msg
				}
			}
		}
		return ""
	}
	if msg := reach(g.root); msg != "" {
		return msg
	}
	if len(reached) != len(choice) {
		return "a package nothing requires was chosen"
	}
	return ""
}

func (g *graph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "root -> %s\n", g.depsText(g.root))
	for p, vs := range g.versions {
		for vi, v := range vs {
			fmt.Fprintf(&b, "%s %s -> %s\n", pkgName(p), v, g.depsText(g.deps[p][vi]))
		}
	}
	return b.String()
}

func (g *graph) depsText(ds []gdep) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, pkgName(d.pkg)+" "+g.set(d).String())
	}
	return strings.Join(parts, "; ")
}

// TestSolveMatchesBruteForce: on random graphs, Solve finds a solution
// exactly when exhaustive search does, every solution meets every
// requirement with no package chosen needlessly, and the provider is asked
// each question at most once.
func TestSolveMatchesBruteForce(t *testing.T) {
	t.Run("small", func(t *testing.T) { checkRandomGraphs(t, 5000, 3, 8, 1, 5) })
	// Over 64 versions a set takes several words of bits.
	t.Run("many versions", func(t *testing.T) { checkRandomGraphs(t, 200, 2, 3, 60, 140) })
}

func checkRandomGraphs(t *testing.T, graphs, minPkgs, maxPkgs, minVersions, maxVersions int) {
	if testing.Short() {
		graphs /= 10
	}
	var solved, failed, maxLines int
	for seed := range graphs {
		r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		g := randomGraph(r, minPkgs, maxPkgs, minVersions, maxVersions)
		p := &graphProvider{t: t, g: g, asked: map[string]bool{}}
		sol, err := Solve(context.Background(), p, g.toDeps(g.root))
		exists := g.bruteForce()
		var ns *NoSolution
		switch {
		case err == nil && !exists:
			t.Fatalf("seed %d: Solve found %v, brute force none\n%s", seed, sol, g)
		case err == nil:
			if msg := g.check(sol); msg != "" {
				t.Fatalf("seed %d: invalid solution %v: %s\n%s", seed, sol, msg, g)
			}
			solved++
		case !errors.As(err, &ns):
			t.Fatalf("seed %d: Solve: %v", seed, err)
		case exists:
			t.Fatalf("seed %d: Solve found none, brute force one\n%s\n%s", seed, g, ns.Explain())
		default:
			failed++
			maxLines = max(maxLines, strings.Count(ns.Explain(), "\n")+1)
			if !strings.HasSuffix(ns.Explain(), ", version solving failed.") {
				t.Fatalf("seed %d: explanation does not conclude:\n%s", seed, ns.Explain())
			}
		}
	}
	t.Logf("%d graphs: %d solved, %d without solution (longest explanation %d lines)", graphs, solved, failed, maxLines)
	// Both outcomes must be common for the test to mean something.
	if solved < graphs/5 || failed < graphs/5 {
		t.Errorf("unbalanced graphs: %d solved, %d failed", solved, failed)
	}
}
