package pubgrub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

// index is a package universe for tests: package → version → dependencies,
// each "name" or "name specifier" (PEP 440, e.g. "bar >=1,<2").
type index map[string]map[string][]string

// provider serves an index and counts the questions it is asked.
type provider struct {
	idx index
	mu  sync.Mutex
	// versionCalls and depCalls count calls by package and "pkg version".
	versionCalls map[string]int
	depCalls     map[string]int
}

func newProvider(idx index) *provider {
	return &provider{idx: idx, versionCalls: map[string]int{}, depCalls: map[string]int{}}
}

func (p *provider) Versions(_ context.Context, pkg string) ([]Version, error) {
	p.mu.Lock()
	p.versionCalls[pkg]++
	p.mu.Unlock()
	var vs []Version
	for v := range p.idx[pkg] {
		vs = append(vs, v)
	}
	// Newest first, by PEP 440.
	slices.SortFunc(vs, func(a, b Version) int {
		return pep440.MustParse(b).Compare(pep440.MustParse(a))
	})
	return vs, nil
}

func (p *provider) Dependencies(_ context.Context, pkg string, v Version) ([]Dependency, error) {
	p.mu.Lock()
	p.depCalls[pkg+" "+v]++
	p.mu.Unlock()
	deps, ok := p.idx[pkg][v]
	if !ok {
		return nil, fmt.Errorf("no %s %s", pkg, v)
	}
	return parseDeps(deps)
}

// parseDeps parses "name specifier" strings.
func parseDeps(reqs []string) ([]Dependency, error) {
	var out []Dependency
	for _, r := range reqs {
		name, spec, _ := strings.Cut(r, " ")
		set, err := specSet(spec)
		if err != nil {
			return nil, err
		}
		out = append(out, Dependency{Package: name, Allowed: set})
	}
	return out, nil
}

// specSet makes a Set from a PEP 440 specifier, as the integration will.
func specSet(spec string) (Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Any(), nil
	}
	ss, err := pep440.NewSpecifiers(spec)
	if err != nil {
		return Set{}, fmt.Errorf("specifier %q: %w", spec, err)
	}
	return NewSet(spec, func(v Version) bool {
		pv, err := pep440.Parse(v)
		return err == nil && ss.Check(pv)
	}), nil
}

func mustDeps(t testing.TB, reqs ...string) []Dependency {
	t.Helper()
	deps, err := parseDeps(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return deps
}
