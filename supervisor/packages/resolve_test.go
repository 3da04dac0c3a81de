package packages

import (
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
			msg: `cannot install "builtin==1.0": Pyodide ships builtin 1.5.0 and cannot install another version of it`,
		},
		{
			name: "lock package and a conflicting dependency", reqs: []string{"zeta"}, kind: KindConflict,
			msg: `cannot install "builtin<1": required by zeta 1.0, but Pyodide ships builtin 1.5.0 and cannot install another version of it`,
		},
		{
			name: "lock package chosen, then a conflicting pin", reqs: []string{"builtin", "zeta"}, kind: KindConflict,
			msg: `cannot install "builtin<1": required by zeta 1.0, but Pyodide ships builtin 1.5.0 and cannot install another version of it`,
		},
		{
			name: "two requirements in conflict", reqs: []string{"alpha==1.0", "eta"}, kind: KindConflict,
			msg: `cannot install "alpha>=2": required by eta 1.0, but alpha 1.0 was already chosen for "alpha==1.0"`,
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
					plan, err := r.Resolve(testContext(t), tc.reqs)
					if tc.kind != 0 {
						e := wantKind(t, err, tc.kind)
						if !strings.Contains(e.Error(), tc.msg) {
							t.Fatalf("error %q does not contain %q", e.Error(), tc.msg)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if got := planNames(plan); strings.Join(got, " ") != strings.Join(tc.want, " ") {
						t.Fatalf("plan = %v, want %v", got, tc.want)
					}
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
