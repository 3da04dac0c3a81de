package pubgrub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// plantedGraph draws n packages of nv versions each where a hidden choice
// (a random version of every package, rarely the newest) meets every
// requirement of the versions it picks, while the other versions require
// random ranges that often exclude it: a solution exists, and finding it
// takes backtracking. Every package is reachable from the root.
func plantedGraph(r *rand.Rand, n, nv int) *graph {
	g := &graph{versions: make([][]Version, n), deps: make([][][]gdep, n)}
	hidden := make([]int, n)
	for p := range n {
		for k := nv; k >= 1; k-- {
			g.versions[p] = append(g.versions[p], fmt.Sprintf("%d.0", k))
		}
		hidden[p] = r.IntN(nv)
	}
	// rangeWith returns a random range of version indexes, holding the
	// hidden version of q when must.
	rangeWith := func(q int, must bool) []bool {
		allowed := make([]bool, nv)
		lo, hi := r.IntN(nv), r.IntN(nv)
		if lo > hi {
			lo, hi = hi, lo
		}
		if must {
			lo, hi = min(lo, hidden[q]), max(hi, hidden[q])
		}
		for i := lo; i <= hi; i++ {
			allowed[i] = true
		}
		return allowed
	}
	for p := range n {
		g.deps[p] = make([][]gdep, nv)
		for v := range nv {
			// A chain p → p+1 keeps everything reachable; the rest is random.
			targets := []int{}
			if p+1 < n {
				targets = append(targets, p+1)
			}
			for range 1 + r.IntN(3) {
				if q := r.IntN(n); q != p {
					targets = append(targets, q)
				}
			}
			for _, q := range targets {
				g.deps[p][v] = append(g.deps[p][v], gdep{pkg: q, allowed: rangeWith(q, v == hidden[p])})
			}
		}
	}
	g.root = []gdep{{pkg: 0, allowed: rangeWith(0, true)}}
	return g
}

// TestSolveFiftyPackagesTenVersions: the bound, resolving 50
// packages of 10 versions each in under a second, with a wide margin (the
// benchmark below gives the real figure).
func TestSolveFiftyPackagesTenVersions(t *testing.T) {
	limit := time.Second
	if raceEnabled {
		limit *= 10 // the race detector's slowdown, not the solver's
	}
	for seed := range 5 {
		g := plantedGraph(rand.New(rand.NewPCG(uint64(seed), 50)), 50, 10)
		p := &graphProvider{t: t, g: g, asked: map[string]bool{}}
		start := time.Now()
		sol, err := Solve(context.Background(), p, g.toDeps(g.root))
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if msg := g.check(sol); msg != "" {
			t.Fatalf("seed %d: invalid solution: %s", seed, msg)
		}
		t.Logf("seed %d: %d packages in %v, %d versions' dependencies read", seed, len(sol), elapsed, p.nDepCall)
		if elapsed > limit {
			t.Errorf("seed %d: took %v, want under %v", seed, elapsed, limit)
		}
	}
}

// BenchmarkSolve50x10 resolves a planted 50 × 10 graph (seed 0).
func BenchmarkSolve50x10(b *testing.B) {
	g := plantedGraph(rand.New(rand.NewPCG(0, 50)), 50, 10)
	root := g.toDeps(g.root)
	for b.Loop() {
		p := &graphProvider{t: b, g: g, asked: map[string]bool{}}
		if _, err := Solve(context.Background(), p, root); err != nil {
			b.Fatal(err)
		}
	}
}

// errProvider fails, or cancels a context, on one package.
type errProvider struct {
	*provider
	failOn string
	err    error
	cancel context.CancelFunc
}

func (p *errProvider) Versions(ctx context.Context, pkg string) ([]Version, error) {
	if pkg == p.failOn {
		if p.cancel != nil {
			p.cancel()
			return p.provider.Versions(ctx, pkg)
		}
		return nil, p.err
	}
	return p.provider.Versions(ctx, pkg)
}

func (p *errProvider) Dependencies(ctx context.Context, pkg string, v Version) ([]Dependency, error) {
	if pkg+" "+v == p.failOn {
		return nil, p.err
	}
	return p.provider.Dependencies(ctx, pkg, v)
}

func TestSolveProviderErrors(t *testing.T) {
	idx := index{
		"a": {"1.0": {"b"}},
		"b": {"1.0": nil},
	}
	boom := errors.New("index unreachable")
	for _, failOn := range []string{"a", "b", "a 1.0", "b 1.0"} {
		p := &errProvider{provider: newProvider(idx), failOn: failOn, err: boom}
		_, err := Solve(context.Background(), p, mustDeps(t, "a"))
		if !errors.Is(err, boom) {
			t.Errorf("failing on %q: Solve error %v, want it to wrap %v", failOn, err, boom)
		}
		var ns *NoSolution
		if errors.As(err, &ns) {
			t.Errorf("failing on %q: a provider error became a *NoSolution", failOn)
		}
	}
}

func TestSolveCanceled(t *testing.T) {
	idx := index{
		"a": {"1.0": {"b"}},
		"b": {"1.0": nil},
	}
	// Canceled before the start.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Solve(ctx, newProvider(idx), mustDeps(t, "a")); !errors.Is(err, context.Canceled) {
		t.Errorf("Solve with a canceled context: %v, want context.Canceled", err)
	}
	// Canceled while the provider answers.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	p := &errProvider{provider: newProvider(idx), failOn: "b", cancel: cancel}
	if _, err := Solve(ctx, p, mustDeps(t, "a")); !errors.Is(err, context.Canceled) {
		t.Errorf("Solve canceled midway: %v, want context.Canceled", err)
	}
}

// TestSolveLazy: only versions that are tried have their dependencies read,
// and each question is asked once.
func TestSolveLazy(t *testing.T) {
	idx := index{
		"a":      {"3.0": {"b <1"}, "2.0": {"c"}, "1.0": {"unused"}},
		"b":      {"1.0": nil},
		"c":      {"1.0": nil},
		"unused": {"1.0": nil},
	}
	p := newProvider(idx)
	sol, err := Solve(context.Background(), p, mustDeps(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if sol["a"] != "2.0" || sol["c"] != "1.0" || len(sol) != 2 {
		t.Fatalf("Solve = %v", sol)
	}
	for key, n := range p.depCalls {
		if n != 1 {
			t.Errorf("dependencies of %s read %d times", key, n)
		}
	}
	for _, key := range []string{"a 1.0", "b 1.0", "unused 1.0"} {
		if p.depCalls[key] != 0 {
			t.Errorf("dependencies of %s read, but it was never a candidate", key)
		}
	}
	if p.versionCalls["unused"] != 0 {
		t.Errorf("versions of unused read, but nothing chosen needs it")
	}
}
