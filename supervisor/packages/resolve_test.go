package packages

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// planNames renders a plan as "name==version" in plan order.
func planNames(p Plan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Name+"=="+f.Version)
	}
	return out
}

// newTestResolver builds a resolver over the standard repo served as v,
// with the test lock served the same way (directory or HTTP).
func newTestResolver(t *testing.T, repo *pt.Repo, v pt.Variant, cache *Cache) *Resolver {
	t.Helper()
	tl := makeLock(t)
	r, err := NewResolver(Config{
		Lock:       tl.parsed(t),
		PyodideURL: tl.location(t, v.Dir),
		IndexURL:   repo.Location(t, v),
		Cache:      cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newTestCache(t *testing.T, opts CacheOptions) *Cache {
	t.Helper()
	c, err := NewCache(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkResolve resolves reqs and checks the plan against want ("name==version"
// in order) or, with kind set, the error's kind and that its message
// contains msg.
func checkResolve(t *testing.T, r *Resolver, reqs, want []string, kind Kind, msg string) Plan {
	t.Helper()
	plan, err := r.Resolve(testContext(t), reqs)
	if kind != 0 {
		e := wantKind(t, err, kind)
		if !strings.Contains(e.Error(), msg) {
			t.Fatalf("error %q does not contain %q", e.Error(), msg)
		}
		return plan
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := planNames(plan); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("plan = %v, want %v", got, want)
	}
	return plan
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name string
		reqs []string
		want []string // plan in order; nil with kind set
		kind Kind
		msg  string // substring of the error
	}{
		{name: "nothing", reqs: nil, want: nil},
		{name: "version pin", reqs: []string{"alpha==1.0"}, want: []string{"alpha==1.0"}},
		{name: "newest final, skipping yanked and pre-release", reqs: []string{"alpha"}, want: []string{"alpha==2.0"}},
		{name: "pre-release when asked for", reqs: []string{"alpha>=3.0a1"}, want: []string{"alpha==3.0a1"}},
		{name: "yanked when pinned", reqs: []string{"alpha==2.5"}, want: []string{"alpha==2.5"}},
		{name: "compatible release", reqs: []string{"alpha~=1.0"}, want: []string{"alpha==1.1"}},
		{name: "newest matching two constraints", reqs: []string{"alpha>1.0,<2.5", "alpha!=2.0"}, want: []string{"alpha==1.1"}},
		{name: "name normalisation", reqs: []string{"ALPHA==1.0"}, want: []string{"alpha==1.0"}},
		{
			name: "markers: emscripten true, linux false", reqs: []string{"beta"},
			want: []string{"delta==1.0", "alpha==1.1", "beta==1.0"},
		},
		{
			name: "extras", reqs: []string{"beta[fast]"},
			want: []string{"delta==1.0", "alpha==1.1", "gamma==1.0", "beta==1.0"},
		},
		{
			name: "extras added by a later requirement", reqs: []string{"beta", "Beta[FAST]"},
			want: []string{"delta==1.0", "alpha==1.1", "gamma==1.0", "beta==1.0"},
		},
		{
			name: "dependency constraint applies before the choice", reqs: []string{"beta", "alpha>=1.0"},
			want: []string{"delta==1.0", "alpha==1.1", "beta==1.0"},
		},
		{
			name: "top-level markers", reqs: []string{`epsilon; sys_platform == "linux"`, `gamma; platform_machine == "wasm32" and python_version >= "3.12"`},
			want: []string{"gamma==1.0"},
		},
		{name: "Pyodide platform wheel", reqs: []string{"pnative"}, want: []string{"pnative==1.0"}},
		{name: "Requires-Python", reqs: []string{"old"}, want: []string{"old==1.0"}},
		{name: "lock package with a shared library", reqs: []string{"builtin"}, want: []string{"libfoo==1.0", "builtin==1.5.0"}},
		{name: "lock depends are normalized", reqs: []string{"builtin_native"}, want: []string{"libfoo==1.0", "builtin==1.5.0", "builtin-native==0.3"}},
		{name: "lock package extras", reqs: []string{"builtin[more]"}, want: []string{"libfoo==1.0", "alpha==2.0", "builtin==1.5.0"}},
		{name: "lock version allowed", reqs: []string{"builtin>=1.5,<2"}, want: []string{"libfoo==1.0", "builtin==1.5.0"}},
		{
			name: "index package needing a lock package", reqs: []string{"uses-builtin"},
			want: []string{"libfoo==1.0", "builtin==1.5.0", "alpha==2.0", "uses-builtin==1.0"},
		},
		{
			name: "unknown package", reqs: []string{"nonexistent"}, kind: KindNotFound,
			msg: `cannot install "nonexistent": no package named nonexistent on the index`,
		},
		{
			name: "no matching version", reqs: []string{"alpha>=5"}, kind: KindNotFound,
			msg: `cannot install "alpha>=5": no version of alpha matches >=5 (available: 1.0, 1.1, 2.0, 2.5, 3.0a1)`,
		},
		{
			name: "only a manylinux wheel and an sdist", reqs: []string{"native"}, kind: KindNoCompatibleWheel,
			msg: "native-1.0-cp314-cp314-manylinux_2_17_x86_64.whl: built for another platform; native-1.0.tar.gz: a source distribution",
		},
		{
			name: "lock package and a conflicting pin", reqs: []string{"builtin==1.0"}, kind: KindConflict,
			msg: `cannot install "builtin==1.0": Pyodide ships builtin 1.5.0; only its build can be installed, and it does not satisfy "builtin==1.0"`,
		},
		{
			name: "lock package and a conflicting dependency", reqs: []string{"zeta"}, kind: KindConflict,
			msg: `cannot install "builtin<1": Pyodide ships builtin 1.5.0; only its build can be installed, and it does not satisfy "builtin<1" (required by zeta 1.0)`,
		},
		{
			name: "lock package chosen, then a conflicting pin", reqs: []string{"builtin", "zeta"}, kind: KindConflict,
			msg: `cannot install "builtin<1": Pyodide ships builtin 1.5.0; only its build can be installed, and it does not satisfy "builtin<1" (required by zeta 1.0)`,
		},
		{
			name: "two requirements in conflict", reqs: []string{"alpha==1.0", "eta"}, kind: KindConflict,
			msg: "cannot install \"alpha==1.0, eta\": no set of versions satisfies every requirement:\n" +
				"Because every version of eta depends on alpha >=2 and you require alpha ==1.0, every version of eta is forbidden.\n" +
				"So, because you require eta, version solving failed.",
		},
		{name: "invalid requirement", reqs: []string{"alpha>="}, kind: KindInvalid, msg: `cannot install "alpha>="`},
		{name: "direct URL", reqs: []string{"alpha @ file:///nonexistent/alpha.whl"}, kind: KindInvalid, msg: "direct URL"},
	}
	repo := standardRepo(t)
	for _, v := range pt.AllVariants() {
		t.Run(v.String(), func(t *testing.T) {
			r := newTestResolver(t, repo, v, newTestCache(t, CacheOptions{}))
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					checkResolve(t, r, tc.reqs, tc.want, tc.kind, tc.msg)
				})
			}
		})
	}
}

func TestResolvePlanDetails(t *testing.T) {
	repo := standardRepo(t)
	for _, v := range []pt.Variant{{JSON: true, Metadata: true}, {Dir: true}} {
		t.Run(v.String(), func(t *testing.T) {
			var lines []string
			r := newTestResolver(t, repo, v, nil).WithProgress(func(s string) { lines = append(lines, s) })
			plan, err := r.Resolve(testContext(t), []string{"pnative", "builtin"})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Files) != 3 {
				t.Fatalf("plan = %v", planNames(plan))
			}
			pn, lib, bi := plan.Files[0], plan.Files[1], plan.Files[2]
			if pn.Filename != "pnative-1.0-cp314-cp314-pyemscripten_2026_0_wasm32.whl" || pn.Origin != OriginIndex ||
				pn.InstallDir != "site" || pn.PackageType != TypePackage {
				t.Errorf("pnative: %+v", pn)
			}
			if v.JSON && pn.Size == 0 {
				t.Errorf("pnative: size not taken from the JSON index: %+v", pn)
			}
			if lib.Origin != OriginLock || lib.PackageType != TypeSharedLibrary || lib.InstallDir != "dynlib" {
				t.Errorf("libfoo: %+v", lib)
			}
			if bi.Origin != OriginLock || len(bi.Depends) != 1 || bi.Depends[0] != "libfoo" {
				t.Errorf("builtin: %+v", bi)
			}
			for _, f := range plan.Files {
				if !sha256RE.MatchString(f.SHA256) {
					t.Errorf("%s: sha256 %q", f.Filename, f.SHA256)
				}
				if v.Dir {
					if !filepath.IsAbs(f.Source) {
						t.Errorf("%s: source %q is not an absolute path", f.Filename, f.Source)
					} else if _, err := os.Stat(f.Source); err != nil {
						t.Errorf("%s: %v", f.Filename, err)
					}
				} else if !strings.HasPrefix(f.Source, "http://127.0.0.1:") {
					t.Errorf("%s: source %q", f.Filename, f.Source)
				}
			}
			if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "builtin 1.5.0: built into Pyodide") {
				t.Errorf("progress lines: %q", lines)
			}
		})
	}
}

func TestResolveIndexDown(t *testing.T) {
	repo := standardRepo(t)
	srv, _ := repo.Serve(t, pt.Variant{JSON: true}, 0)
	url := srv.URL + "/simple/"
	srv.Close()
	r, err := NewResolver(Config{IndexURL: url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(testContext(t), []string{"alpha"})
	e := wantKind(t, err, KindUnreachable)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.HasPrefix(ue.URL, url) {
		t.Fatalf("no *UnreachableError for %s in %v", url, err)
	}
	if !strings.Contains(e.Error(), `cannot install "alpha": cannot look up alpha: cannot reach `+url+"alpha/: ") {
		t.Errorf("message: %v", e)
	}
}

func TestResolveWithoutIndex(t *testing.T) {
	tl := makeLock(t)
	r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: tl.location(t, true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(testContext(t), []string{"builtin"}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(testContext(t), []string{"alpha"})
	wantKind(t, err, KindNotFound)
}

func TestNewResolverErrors(t *testing.T) {
	tl := makeLock(t)
	for _, cfg := range []Config{
		{Lock: tl.parsed(t)},
		{IndexURL: "ftp://example.invalid/simple"},
		{Lock: tl.parsed(t), PyodideURL: "gopher://x"},
	} {
		if _, err := NewResolver(cfg); err == nil {
			t.Errorf("NewResolver(%+v) succeeded", cfg)
		}
	}
}

// solverRepo is the index of the tests of version solving.
func solverRepo(t *testing.T) *pt.Repo {
	t.Helper()
	r := &pt.Repo{}
	add := func(name, version string, requires ...string) {
		r.Add(wheel(name, version, "py3-none-any", requires...))
	}
	// One level: b needs a<2.
	add("a", "1.0")
	add("a", "1.5")
	add("a", "2.0")
	add("b", "1.0", "a<2")
	// Two levels: c 2.0 needs d>=2, whose only version needs e>=2.
	add("c", "1.0", "d<2")
	add("c", "2.0", "d>=2")
	add("d", "1.0", "e")
	add("d", "2.0", "e>=2")
	add("e", "1.0")
	add("e", "2.0")
	// No solution: x and y disagree on z.
	add("x", "1.0", "z<2")
	add("y", "1.0", "z>=2")
	add("z", "1.0")
	add("z", "2.0")
	// Pyodide ships six 1.17.0 (pure Python); the index has others.
	add("six", "1.16.0")
	add("six", "1.18.0")
	// An index wheel of a native built-in, which must never be used.
	add("builtin_native", "0.2")
	// Errors name who needed the package.
	add("m", "1.0", "nonexistent-dep")
	add("m2", "1.0", "native")
	r.Add(wheel("native", "1.0", "cp314-cp314-manylinux_2_17_x86_64"))
	return r
}

func TestResolveSolver(t *testing.T) {
	tests := []struct {
		name    string
		reqs    []string
		want    []string // plan in order; nil with kind set
		origins string   // origin of each file, "l" lock or "i" index, when set
		kind    Kind
		msg     string // substring of the error
	}{
		{name: "backtracking one level", reqs: []string{"a", "b"}, want: []string{"a==1.5", "b==1.0"}},
		{name: "backtracking two levels", reqs: []string{"c", "e<2"}, want: []string{"e==1.0", "d==1.0", "c==1.0"}},
		{
			name: "no solution, explained", reqs: []string{"x", "y"}, kind: KindConflict,
			msg: "cannot install \"x, y\": no set of versions satisfies every requirement:\n" +
				"Because every version of x depends on z <2 and every version of y depends on z >=2, x is incompatible with y.\n" +
				"So, because you require both x and y, version solving failed.",
		},
		{name: "pure built-in preferred", reqs: []string{"six"}, want: []string{"six==1.17.0"}, origins: "l"},
		{name: "pure built-in pinned to another version", reqs: []string{"six==1.16.0"}, want: []string{"six==1.16.0"}, origins: "i"},
		{name: "pure built-in, a newer version asked for", reqs: []string{"six>=1.18"}, want: []string{"six==1.18.0"}, origins: "i"},
		{
			name: "Pyodide's package depending on a replaced one", reqs: []string{"sixuser", "six<1.17"},
			want: []string{"six==1.16.0", "sixuser==1.0"}, origins: "il",
		},
		{
			name: "pure built-in, no version satisfies", reqs: []string{"six==1.0"}, kind: KindConflict,
			msg: `cannot install "six==1.0": Pyodide ships six 1.17.0, which does not satisfy "six==1.0", and the index has no version of it that does`,
		},
		{
			name: "native built-in cannot be replaced", reqs: []string{"builtin-native<0.3"}, kind: KindConflict,
			msg: `cannot install "builtin-native<0.3": Pyodide ships builtin-native 0.3; only its build can be installed, and it does not satisfy "builtin-native<0.3"`,
		},
		{name: "requires-python satisfied", reqs: []string{"python>=3.12", "e"}, want: []string{"e==2.0"}},
		{
			name: "requires-python not satisfied", reqs: []string{"python>=3.15", "e"}, kind: KindConflict,
			msg: `cannot install "python>=3.15": requires Python >=3.15, but Pyodide runs Python 3.14.2`,
		},
		{
			name: "error names the requiring package", reqs: []string{"m"}, kind: KindNotFound,
			msg: `cannot install "nonexistent-dep": no package named nonexistent-dep on the index`,
		},
		{
			name: "no usable wheel names the requiring package", reqs: []string{"m2"}, kind: KindNoCompatibleWheel,
			msg: `cannot install "native": no file of native 1.0 can be installed in Pyodide (required by m2 1.0)`,
		},
	}
	repo := solverRepo(t)
	for _, v := range []pt.Variant{{JSON: true, Metadata: true}, {Dir: true}} {
		t.Run(v.String(), func(t *testing.T) {
			tl := makeLock(t)
			tl.addLockWheel(t, wheel("six", "1.17.0", ""))
			tl.addLockWheel(t, wheel("sixuser", "1.0", "", "six"), "six")
			r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: tl.location(t, v.Dir), IndexURL: repo.Location(t, v)})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					plan := checkResolve(t, r, tc.reqs, tc.want, tc.kind, tc.msg)
					if got := origins(plan); tc.origins != "" && got != tc.origins {
						t.Errorf("origins = %s, want %s", got, tc.origins)
					}
				})
			}
		})
	}
}

func TestResolveNamesRequirer(t *testing.T) {
	// The error's message names the package that needed the missing one.
	r := newTestResolver(t, solverRepo(t), pt.Variant{Dir: true}, nil)
	_, err := r.Resolve(testContext(t), []string{"m"})
	if e := wantKind(t, err, KindNotFound); !strings.Contains(e.Error(), "(required by m 1.0)") {
		t.Errorf("error %q does not name m 1.0", e.Error())
	}
}

func TestResolveUnknownExtra(t *testing.T) {
	r := newTestResolver(t, standardRepo(t), pt.Variant{Dir: true}, nil)
	plan, err := r.Resolve(testContext(t), []string{"alpha[nosuch]", "beta[fast]"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(planNames(plan), " "); got != "alpha==1.1 delta==1.0 gamma==1.0 beta==1.0" {
		t.Errorf("plan = %s", got)
	}
	// Only the unknown extra of the chosen version, not of versions tried
	// (alpha 2.0 first, which beta's alpha<2 rules out).
	want := []string{`warning: alpha 1.1 does not provide the extra "nosuch"`}
	if !slices.Equal(plan.Warnings, want) {
		t.Errorf("warnings %q, want %q", plan.Warnings, want)
	}
}

func TestResolveConcurrentCallsShare(t *testing.T) {
	repo := solverRepo(t)
	srv, counter := repo.Serve(t, pt.Variant{JSON: true}, 200*time.Millisecond)
	r, err := NewResolver(Config{IndexURL: srv.URL + "/simple/"})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 4
	var wg sync.WaitGroup
	plans := make([]Plan, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() { plans[i], errs[i] = r.Resolve(testContext(t), []string{"a", "b"}) })
	}
	wg.Wait()
	for i := range calls {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got := strings.Join(planNames(plans[i]), " "); got != "a==1.5 b==1.0" {
			t.Errorf("call %d: plan = %s", i, got)
		}
	}
	if n := counter.Get("/simple/a/"); n != 1 {
		t.Errorf("the index page of a was read %d times, want 1", n)
	}
}

// scaleRepo is 50 packages of 10 versions: p<i> <j>.0 needs p<i+1> ==<j>.0;
// scaleReqs ask for p0 and the last below 5.0, so the solver must walk
// every package back to 4.0.
func scaleRepo(t testing.TB) (string, []string) {
	const packages, versions = 50, 10
	repo := &pt.Repo{}
	for i := range packages {
		for j := 1; j <= versions; j++ {
			var requires []string
			if i+1 < packages {
				requires = []string{fmt.Sprintf("p%d==%d.0", i+1, j)}
			}
			repo.Add(wheel(fmt.Sprintf("p%d", i), fmt.Sprintf("%d.0", j), "py3-none-any", requires...))
		}
	}
	return repo.Location(t, pt.Variant{JSON: true, Metadata: true, Dir: true}), []string{"p0", fmt.Sprintf("p%d<5", packages-1)}
}

func TestResolveScale(t *testing.T) {
	index, reqs := scaleRepo(t)
	r, err := NewResolver(Config{IndexURL: index})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Resolve(testContext(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 50 {
		t.Fatalf("%d files, want 50", len(plan.Files))
	}
	for _, f := range plan.Files {
		if f.Version != "4.0" {
			t.Fatalf("%s %s, want 4.0", f.Name, f.Version)
		}
	}
}

// BenchmarkResolve50x10 resolves scaleRepo from a local index, metadata
// and index pages read anew each time (the goal: under a second).
func BenchmarkResolve50x10(b *testing.B) {
	index, reqs := scaleRepo(b)
	r, err := NewResolver(Config{IndexURL: index})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.Resolve(context.Background(), reqs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestResolveWithoutPyodideHost(t *testing.T) {
	repo := solverRepo(t)
	repo.Add(pt.Wheel{Name: "six", Version: "1.17.0", Source: "MIRROR = True\n"})
	tl := makeLock(t)
	tl.addLockWheel(t, wheel("six", "1.17.0", ""))
	tl.addLockWheel(t, wheel("sixuser", "1.0", "", "six"), "six")
	down := httptest.NewServer(http.NotFoundHandler())
	host := down.URL + "/pyodide/"
	down.Close()
	cache := newTestCache(t, CacheOptions{})
	r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: host, IndexURL: repo.Location(t, pt.Variant{Dir: true}), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	// With the host up in principle, the lock's build is planned, and
	// fetching it says which flag points elsewhere.
	plan := checkResolve(t, r, []string{"six"}, []string{"six==1.17.0"}, 0, "")
	_, err = cache.Fetch(testContext(t), plan)
	e := wantKind(t, err, KindUnreachable)
	if !PyodideHostUnreachable(err) || !strings.HasSuffix(e.Error(), "(to install without Pyodide's package host: fill the cache where it can be reached with \"mcp-run-python fetch PACKAGE...\" and run with --offline, or point --pyodide-index-url at a mirror or a local directory)") {
		t.Fatalf("error %q: not the host's, or it does not say what to do", e.Error())
	}

	mirror := r.WithoutPyodideHost()
	tests := []struct {
		name    string
		reqs    []string
		want    []string
		origins string
		kind    Kind
		msg     string
	}{
		{name: "the index's build of the version Pyodide ships", reqs: []string{"six"}, want: []string{"six==1.17.0"}, origins: "i"},
		{name: "a pin still chooses", reqs: []string{"six<1.17"}, want: []string{"six==1.16.0"}, origins: "i"},
		{
			name: "a pure built-in not on the index", reqs: []string{"sixuser"}, kind: KindNotFound,
			msg: `cannot install "sixuser": no package named sixuser on the index`,
		},
		{
			// builtin links the shared library libfoo.
			name: "native built-ins only from the host", reqs: []string{"builtin-native"},
			want: []string{"libfoo==1.0", "builtin==1.5.0", "builtin-native==0.3"}, origins: "lll",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := checkResolve(t, mirror, tc.reqs, tc.want, tc.kind, tc.msg)
			if got := origins(plan); got != tc.origins {
				t.Errorf("origins = %s, want %s", got, tc.origins)
			}
		})
	}
	t.Run("cached builds are used", func(t *testing.T) {
		// With sixuser's build in the cache, Pyodide's package is used
		// with the index's six it depends on.
		lp, _ := r.lockPackage("sixuser")
		f := r.lockFile("sixuser", lp)
		if err := os.MkdirAll(filepath.Dir(cache.Path(f.SHA256, f.Filename)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cache.Path(f.SHA256, f.Filename), tl.files[f.Filename], 0o644); err != nil {
			t.Fatal(err)
		}
		plan := checkResolve(t, mirror, []string{"sixuser"}, []string{"six==1.17.0", "sixuser==1.0"}, 0, "")
		if got := origins(plan); got != "il" {
			t.Errorf("origins = %s, want il", got)
		}
	})
}

// origins is the origin of each file of plan: "l" lock, "i" index.
func origins(plan Plan) string {
	var s string
	for _, f := range plan.Files {
		s += string(f.Origin[0])
	}
	return s
}

// TestOfflineAfterMirror: offline, resolution takes what the cache holds,
// the index's builds that stood in for Pyodide's host among them, from the
// pages kept for the index used online, an HTTP one or a local directory,
// even when another index (or none) is configured now.
func TestOfflineAfterMirror(t *testing.T) {
	repo := &pt.Repo{}
	repo.Add(pt.Wheel{Name: "six", Version: "1.16.0", Source: "MIRROR = True\n"})
	repo.Add(wheel("alpha", "1.0", "py3-none-any"))
	repo.Add(wheel("alpha", "2.0", "py3-none-any"))
	tl := makeLock(t)
	tl.addLockWheel(t, wheel("six", "1.17.0", ""))
	tl.addLockWheel(t, wheel("sixuser", "1.0", "", "six"), "six")
	down := httptest.NewServer(http.NotFoundHandler())
	host := down.URL + "/pyodide/"
	down.Close()
	for _, v := range []pt.Variant{{JSON: true, Metadata: true}, {JSON: true, Dir: true}} {
		t.Run(v.String(), func(t *testing.T) {
			offlineIndexes := []string{"https://pypi.invalid/simple/"}
			var srv *httptest.Server
			index := repo.Location(t, v)
			if !v.Dir {
				srv, _ = repo.Serve(t, v, 0)
				index = srv.URL + "/simple/"
				offlineIndexes = append(offlineIndexes, index)
			}
			dir := t.TempDir()
			online, err := NewCache(dir, CacheOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: host, IndexURL: index, Cache: online})
			if err != nil {
				t.Fatal(err)
			}
			for _, reqs := range [][]string{{"six"}, {"alpha==1.0"}} {
				plan, err := r.WithoutPyodideHost().Resolve(testContext(t), reqs)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := online.Fetch(testContext(t), plan); err != nil {
					t.Fatal(err)
				}
			}
			if srv != nil {
				srv.Close() // from here on nothing may reach the index
			}
			checkOffline(t, dir, tl.parsed(t), host, offlineIndexes)
		})
	}
}

// checkOffline checks what resolution offline takes from the cache dir
// that TestOfflineAfterMirror filled, with each of indexes configured.
func checkOffline(t *testing.T, dir string, lock *Lock, host string, indexes []string) {
	t.Helper()
	offline, err := NewCache(dir, CacheOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, index := range indexes {
		r, err := NewResolver(Config{Lock: lock, PyodideURL: host, IndexURL: index, Cache: offline})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			reqs    []string
			want    []string
			origins string
			kind    Kind
			msg     string
		}{
			{name: "the index's build that stood in", reqs: []string{"six"}, want: []string{"six==1.16.0"}, origins: "i"},
			{name: "the cached version", reqs: []string{"alpha"}, want: []string{"alpha==1.0"}, origins: "i"},
			{
				name: "a version not cached", reqs: []string{"alpha==2.0"}, kind: KindOfflineMiss,
				msg: `cannot install "alpha==2.0": offline mode, and alpha-2.0-py3-none-any.whl is not in the package cache ` + offline.Dir(),
			},
			{
				name: "a built-in cached in another version", reqs: []string{"six==1.17.0"}, kind: KindOfflineMiss,
				msg: `cannot install "six==1.17.0": offline mode, and six-1.17.0-py3-none-any.whl is not in the package cache ` + offline.Dir() + `, nor a build of six from the index that satisfies "six==1.17.0"`,
			},
			{
				name: "a built-in cached in no build", reqs: []string{"sixuser"}, kind: KindOfflineMiss,
				msg: `cannot install "sixuser": offline mode, and sixuser-1.0-py3-none-any.whl is not in the package cache ` + offline.Dir() + `, nor a build of sixuser from the index`,
			},
		}
		for _, tc := range tests {
			t.Run(index+"/"+tc.name, func(t *testing.T) {
				plan := checkResolve(t, r, tc.reqs, tc.want, tc.kind, tc.msg)
				if got := origins(plan); got != tc.origins {
					t.Errorf("origins = %s, want %s", got, tc.origins)
				}
				if _, err := offline.Fetch(testContext(t), plan); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
