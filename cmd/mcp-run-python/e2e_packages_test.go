package main_test

// End-to-end tests of package installs: wheels built by the test, served as
// a simple index on 127.0.0.1 or as a directory, resolved and fetched by the
// server, installed into the real worker's interpreter.
//
//	go test ./cmd/mcp-run-python/ -run Packages -count=1 -v

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// packageRepo is the index the package tests install from. Each call makes
// new wheels (a nonce in their source), so their hashes are new to the
// shared package cache and the first install really downloads them.
func packageRepo(t testing.TB) *pt.Repo {
	t.Helper()
	nonce := make([]byte, 8)
	rand.Read(nonce)
	mark := "# " + hex.EncodeToString(nonce) + "\n"
	r := &pt.Repo{}
	r.Add(pt.Wheel{Name: "greet", Version: "1.0", Source: mark + "def hello(name):\n    return f'hello {name}'\n"})
	r.Add(pt.Wheel{Name: "greet", Version: "2.0", Requires: []string{
		"colorlib>=1.1",
		`sparkle; extra == "fancy"`,
		`emscripten-only; sys_platform == "emscripten"`,
		`linux-only; sys_platform == "linux"`, // not in the index: must be skipped
	}, Source: mark + "from colorlib import paint\ndef hello(name):\n    return paint(f'hello {name}')\n"})
	r.Add(pt.Wheel{Name: "colorlib", Version: "1.0", Source: mark + "def paint(s):\n    return s\n"})
	r.Add(pt.Wheel{Name: "colorlib", Version: "1.1", Source: mark + "def paint(s):\n    return f'*{s}*'\n"})
	r.Add(pt.Wheel{Name: "sparkle", Version: "0.5", Source: mark + "SPARK = '+'\n"})
	r.Add(pt.Wheel{Name: "emscripten-only", Version: "1.0", Source: mark})
	r.Add(pt.Wheel{Name: "native-only", Version: "1.0", Tag: "cp314-cp314-manylinux_2_17_x86_64"})
	r.AddSdist("native-only", "1.0")
	r.Add(pt.Wheel{Name: "liar", Version: "1.0", Source: mark}).SHA256 = strings.Repeat("ab", 32)
	r.Add(pt.Wheel{Name: "burst", Version: "1.0", Source: mark + "N = 7\n"})
	return r
}

// sha256Of returns the sha256 of the repo's file with that name.
func sha256Of(t *testing.T, r *pt.Repo, filename string) string {
	t.Helper()
	for _, f := range r.Files {
		if f.Filename == filename {
			return pt.SHA256(f.Data)
		}
	}
	t.Fatalf("no file %s", filename)
	return ""
}

// pyodideHost is a Pyodide package host with a file the real lock file
// names, with the wrong content. It returns the directory and that
// content's sha256.
func pyodideHost(t *testing.T) (dir, sha string) {
	t.Helper()
	dir = t.TempDir()
	fake, _ := pt.Wheel{Name: "six", Version: "1.17.0", Tag: "py2.py3-none-any"}.Build()
	if err := os.WriteFile(filepath.Join(dir, "six-1.17.0-py2.py3-none-any.whl"), fake, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pt.SHA256(fake)
}

// installError is the XML result of a call whose dependencies deps (as
// JSON) could not be installed.
func installError(deps, msg string) string {
	return "<status>install-error</status>\n<dependencies>[" + deps + "]</dependencies>\n<error>\n" + msg + "\n</error>"
}

// script is code with a PEP 723 block asking for deps.
func script(deps, body string) string {
	return "# /// script\n# dependencies = [" + deps + "]\n# ///\n" + body
}

// greetCode uses greet and what its dependencies and markers bring.
const greetCode = `import greet, colorlib, importlib.util
print(greet.hello('world'))
print(colorlib.__version__, importlib.util.find_spec('emscripten_only') is not None, importlib.util.find_spec('linux_only') is not None)
greet.__version__`

func TestPackages(t *testing.T) {
	s := setup(t)
	for i, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			repo := packageRepo(t)
			srv, counter := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
			index := srv.URL + "/simple/"
			host, fakeSix := pyodideHost(t)
			if i%2 == 1 {
				// Half of the transports get the Pyodide host over HTTP.
				hostSrv := httptest.NewServer(http.FileServer(http.Dir(host)))
				t.Cleanup(hostSrv.Close)
				host = hostSrv.URL + "/"
			}
			tg := startTarget(t, s, mode, "--workers", "2", "--index-url", index, "--pyodide-index-url", host)
			c := tg.connect(t)

			t.Run("script_with_dependency", func(t *testing.T) {
				code := script(`"greet>=2"`, greetCode)
				want := "<status>success</status>\n<dependencies>[\"greet>=2\"]</dependencies>\n<output>\n*hello world*\n1.1 True False\n</output>\n<return_value>\n2.0\n</return_value>"
				c.expectRun(t, code, want)
				// The same dependencies again: nothing is downloaded, and
				// no index is asked.
				before := counter.Total()
				c.expectRun(t, code, want)
				if after := counter.Total(); after != before {
					t.Errorf("the second call made %d requests to the index, want none", after-before)
				}
			})
			cases := []struct{ name, code, want string }{
				{"inferred_import", "import greet\ngreet.__version__",
					"<status>success</status>\n<dependencies>[\"greet\"]</dependencies>\n<return_value>\n2.0\n</return_value>"},
				{"version_pin", script(`"greet==1.0"`, "import greet\nprint(greet.hello('pin'))\ngreet.__version__"),
					"<status>success</status>\n<dependencies>[\"greet==1.0\"]</dependencies>\n<output>\nhello pin\n</output>\n<return_value>\n1.0\n</return_value>"},
				{"extras", script(`"greet[fancy]"`, "import sparkle\nsparkle.SPARK"),
					"<status>success</status>\n<dependencies>[\"greet[fancy]\"]</dependencies>\n<return_value>\n+\n</return_value>"},
				{"false_marker_skipped", script(`"linux-only; sys_platform == 'linux'"`, "1"),
					"<status>success</status>\n<dependencies>[\"linux-only; sys_platform == 'linux'\"]</dependencies>\n<return_value>\n1\n</return_value>"},
				{"script_without_dependencies", "# /// script\n# requires-python = \">=3.12\"\n# ///\nimport not_installed",
					"<status>run-error</status>\n<error>\nTraceback (most recent call last):\n  File \"main.py\", line 4, in <module>\n    import not_installed\nModuleNotFoundError: No module named 'not_installed'\n" +
						`note: nothing was installed for module 'not_installed': with a PEP 723 block the server installs only what the block names; add "not_installed" to its dependencies, or start the server with --deps not_installed` + "\n\n</error>"},
				{"unknown_package", script(`"no-such-package>=1"`, "1"), installError(`"no-such-package>=1"`,
					`cannot install "no-such-package>=1": no package named no-such-package on the index `+index)},
				// No package provides it: skipped, so the import itself
				// fails as in CPython, and a guarded one would not.
				{"unknown_import", "import no_such_module",
					"<status>run-error</status>\n<error>\nTraceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n    import no_such_module\nModuleNotFoundError: No module named 'no_such_module'\n\n</error>"},
				{"guarded_import", "try:\n    import no_such_module\nexcept ImportError:\n    no_such_module = None\nno_such_module is None",
					"<status>success</status>\n<return_value>\ntrue\n</return_value>"},
				{"no_compatible_wheel", script(`"native-only"`, "1"), installError(`"native-only"`,
					`cannot install "native-only": no file of native-only 1.0 can be installed in Pyodide (native_only-1.0-cp314-cp314-manylinux_2_17_x86_64.whl: built for another platform; native-only-1.0.tar.gz: a source distribution, not a wheel); Pyodide needs pure-Python wheels (py3-none-any) or wheels built for pyemscripten_2026_0_wasm32`)},
				{"hash_mismatch_index", script(`"liar"`, "1"), installError(`"liar"`,
					`cannot install "liar==1.0": liar-1.0-py3-none-any.whl has sha256 `+sha256Of(t, repo, "liar-1.0-py3-none-any.whl")+`, but the package index says `+strings.Repeat("ab", 32)+`; the file was discarded`)},
				{"hash_mismatch_lock", "import six", installError(`"six"`,
					`cannot install "six==1.17.0": six-1.17.0-py2.py3-none-any.whl has sha256 `+fakeSix+`, but the Pyodide lock file says 228c50f73aa7addf2c2ccf2979c256802a59ab69cad8152b31b9443cc8140f42; the file was discarded`)},
				{"pin_conflicts_with_pyodide", script(`"six<1"`, "1"), installError(`"six<1"`,
					`cannot install "six<1": Pyodide ships six 1.17.0, which does not satisfy "six<1", and the index has no version of it that does`)},
				{"invalid_script_block", "# /// script\n# dependencies = 'greet'\n# ///\n1",
					"<status>install-error</status>\n<error>\nPEP 723 script block: dependencies must be a list of strings, not a string\n</error>"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c.expectRun(t, tc.code, tc.want)
				})
			}
			t.Run("concurrent_calls_share_a_download", func(t *testing.T) {
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						c.expectRun(t, script(`"burst"`, "import burst\nburst.N"),
							"<status>success</status>\n<dependencies>[\"burst\"]</dependencies>\n<return_value>\n7\n</return_value>")
					})
				}
				wg.Wait()
				if n := counter.Get("/files/burst-1.0-py3-none-any.whl"); n != 1 {
					t.Errorf("the wheel was downloaded %d times, want once", n)
				}
			})
		})
	}
}

func TestPackagesLogProgressAndFailures(t *testing.T) {
	s := setup(t)
	repo := packageRepo(t)
	tg := startTarget(t, s, modeStdio, "--index-url", repo.Location(t, pt.Variant{JSON: true}))
	c := tg.connect(t)
	c.setLevel(t, mcp.LoggingLevelDebug)
	c.run(t, script(`"greet"`, "1"))
	c.run(t, script(`"no-such-package"`, "1"))
	var debug, errs []string
	for _, m := range c.logged() {
		switch m.Level {
		case mcp.LoggingLevelDebug:
			debug = append(debug, m.Data)
		case mcp.LoggingLevelError:
			errs = append(errs, m.Data)
		}
	}
	if len(debug) == 0 || !strings.HasPrefix(debug[0], "resolving greet") {
		t.Errorf("debug logs %q, want install progress starting with the resolution", debug)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], `cannot install "no-such-package"`) {
		t.Errorf("error logs %q, want the install failure", errs)
	}
}

// TestPackagesFromDirectoryAndDeps installs from an index laid out as a
// directory, with --deps installed into every interpreter.
func TestPackagesFromDirectoryAndDeps(t *testing.T) {
	s := setup(t)
	repo := packageRepo(t)
	dir := repo.Write(t, pt.Variant{})
	tg := startTarget(t, s, modeStdio, "--index-url", filepath.Join(dir, "simple"), "--deps", "colorlib==1.0")
	c := tg.connect(t)
	// --deps are there without being asked for, and not listed.
	c.expectRun(t, "import colorlib\ncolorlib.__version__", "<status>success</status>\n<return_value>\n1.0\n</return_value>")
	// A script's dependencies are resolved together with --deps: greet 2.0
	// needs colorlib>=1.1, so the resolver backtracks to greet 1.0.
	c.expectRun(t, script(`"greet"`, "import greet\ngreet.__version__"),
		"<status>success</status>\n<dependencies>[\"greet\"]</dependencies>\n<return_value>\n1.0\n</return_value>")
	c.expectRun(t, script(`"greet<2"`, "import greet, colorlib\ngreet.__version__, colorlib.__version__"),
		"<status>success</status>\n<dependencies>[\"greet<2\"]</dependencies>\n<return_value>\n[\n  \"1.0\",\n  \"1.0\"\n]\n</return_value>")
}

// TestPackagesOfflineAndIndexDown: an index that cannot be reached is an
// install-error naming it; offline, what the cache holds installs and what it
// does not is an install-error.
func TestPackagesOfflineAndIndexDown(t *testing.T) {
	s := setup(t)
	repo := packageRepo(t)
	srv, _ := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
	index := srv.URL + "/simple/"

	online := startTarget(t, s, modeStdio, "--index-url", index).connect(t)
	online.expectRun(t, script(`"greet==1.0"`, "import greet\ngreet.__version__"),
		"<status>success</status>\n<dependencies>[\"greet==1.0\"]</dependencies>\n<return_value>\n1.0\n</return_value>")
	srv.Close()

	down := startTarget(t, s, modeStdio, "--index-url", index).connect(t)
	down.expectRun(t, script(`"greet==1.0"`, "1"), installError(`"greet==1.0"`,
		`cannot install "greet==1.0": cannot look up greet: cannot reach `+index+`greet/: dial tcp `+strings.TrimPrefix(srv.URL, "http://")+`: connect: connection refused (--index-url installs from another index or a local directory instead)`))
	down.expectWorks(t)

	offline := startTarget(t, s, modeStdio, "--index-url", index, "--offline").connect(t)
	offline.expectRun(t, script(`"greet==1.0"`, "import greet\ngreet.__version__"),
		"<status>success</status>\n<dependencies>[\"greet==1.0\"]</dependencies>\n<return_value>\n1.0\n</return_value>")
	offline.expectRun(t, script(`"greet==2.0"`, "1"), installError(`"greet==2.0"`,
		`cannot install "greet==2.0": offline mode, and greet-2.0-py3-none-any.whl is not in the package cache `+filepath.Join(s.cacheDir, "packages")))
	offline.expectWorks(t)
}

// resolverRepo is the index of the resolver's end-to-end tests.
func resolverRepo() *pt.Repo {
	r := &pt.Repo{}
	// Two levels: app 2.0 needs mid>=2, whose only version needs base>=2.
	r.Add(pt.Wheel{Name: "app", Version: "1.0", Requires: []string{"mid<2"}})
	r.Add(pt.Wheel{Name: "app", Version: "2.0", Requires: []string{"mid>=2"}})
	r.Add(pt.Wheel{Name: "mid", Version: "1.0", Requires: []string{"base<2"}})
	r.Add(pt.Wheel{Name: "mid", Version: "2.0", Requires: []string{"base>=2"}})
	r.Add(pt.Wheel{Name: "base", Version: "1.0"})
	r.Add(pt.Wheel{Name: "base", Version: "2.0"})
	// Pyodide ships six 1.17.0 (pure Python) and numpy (native).
	r.Add(pt.Wheel{Name: "six", Version: "1.16.0", Tag: "py2.py3-none-any", Source: "FROM = 'index'\n"})
	r.Add(pt.Wheel{Name: "six", Version: "1.17.0", Tag: "py2.py3-none-any", Source: "FROM = 'index'\n"})
	r.Add(pt.Wheel{Name: "numpy", Version: "1.0", Source: "FROM = 'index'\n"})
	// A look-alike: the project fancytext provides module othermod.
	r.Add(pt.Wheel{Name: "fancytext", Version: "1.0", Package: "othermod"})
	// slugify is python-slugify's module; the project "slugify" is another.
	r.Add(pt.Wheel{Name: "python-slugify", Version: "8.0", Package: "slugify", Source: "WHO = 'python-slugify'\n"})
	r.Add(pt.Wheel{Name: "slugify", Version: "0.0.1", Source: "WHO = 'look-alike'\n"})
	// As networkx imports numpy in pagerank: an import no inference sees.
	r.Add(pt.Wheel{Name: "lazy", Version: "1.0", Source: "def rank():\n    import base\n    return base.__version__\n"})
	return r
}

// TestPackagesResolver: what the resolver decides, seen from a client.
func TestPackagesResolver(t *testing.T) {
	s := setup(t)
	srv, _ := resolverRepo().Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
	index := srv.URL + "/simple/"
	host, _ := pyodideHost(t)
	c := startTarget(t, s, modeStdio, "--index-url", index, "--pyodide-index-url", host).connect(t)
	success := func(deps, value string) string {
		if deps != "" {
			deps = "<dependencies>[" + deps + "]</dependencies>\n"
		}
		return "<status>success</status>\n" + deps + "<return_value>\n" + value + "\n</return_value>"
	}
	cases := []struct{ name, code, want string }{
		{"backtracking_two_levels", script(`"app", "base<2"`, "import app, mid, base\napp.__version__, mid.__version__, base.__version__"),
			success(`"app","base<2"`, "[\n  \"1.0\",\n  \"1.0\",\n  \"1.0\"\n]")},
		{"pinned_pure_builtin", script(`"six==1.16.0"`, "import six\nsix.__version__, six.FROM"),
			success(`"six==1.16.0"`, "[\n  \"1.16.0\",\n  \"index\"\n]")},
		{"native_builtin_not_replaced", script(`"numpy<2"`, "1"), installError(`"numpy<2"`,
			`cannot install "numpy<2": Pyodide ships numpy 2.4.6; only its build can be installed, and it does not satisfy "numpy<2"`)},
		{"requires_python", "# /// script\n# requires-python = \"<3.10\"\n# dependencies = [\"base\"]\n# ///\n1",
			installError(`"base"`, `cannot install "python<3.10": requires Python <3.10, but Pyodide runs Python 3.14.2`)},
		{"dead_imports", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import no_such_module\nif False:\n    import cPickle\n1", success("", "1")},
		{"look_alike", "import fancytext", "<status>run-error</status>\n<error>\nTraceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n    import fancytext\nModuleNotFoundError: No module named 'fancytext'\n\n</error>"},
		{"import_name_table", "import slugify\nslugify.WHO", success(`"python-slugify"`, "python-slugify")},
		// An import inside a package's function: the error says how to ask
		// for its package, and asking for it works.
		{"lazy_import_hint", "import lazy\nlazy.rank()", "<status>run-error</status>\n<dependencies>[\"lazy\"]</dependencies>\n<error>\nTraceback (most recent call last):\n  File \"main.py\", line 2, in <module>\n    lazy.rank()\n    ~~~~~~~~~^^\n  File \"/lib/python3.14/site-packages/lazy/__init__.py\", line 3, in rank\n    import base\nModuleNotFoundError: No module named 'base'\n" +
			`note: nothing was installed for module 'base': the server installs packages for the imports it finds in the code, and this import is not among them (it is inside a package, or made at run time); ask for the package in a PEP 723 block (# /// script, # dependencies = ["base"], # ///) or start the server with --deps base` + "\n\n</error>"},
		{"lazy_import_asked_for", script(`"lazy", "base"`, "import lazy\nlazy.rank()"), success(`"lazy","base"`, "2.0")},
		// As pip does, the call's output warns of an extra the package lacks.
		{"unknown_extra", script(`"base[nosuch]"`, "import base\nbase.__version__"),
			"<status>success</status>\n<dependencies>[\"base[nosuch]\"]</dependencies>\n<output>\nwarning: base 2.0 does not provide the extra \"nosuch\"\n</output>\n<return_value>\n2.0\n</return_value>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c.expectRun(t, tc.code, tc.want)
		})
	}
	t.Run("unsatisfiable_explained", func(t *testing.T) {
		t.Parallel()
		golden(t, "unsatisfiable.txt", c.run(t, script(`"app==2.0", "base<2"`, "1")))
	})
}

// TestPackagesMirror: with Pyodide's package host unreachable, the index's
// build of a pure-Python built-in stands in; what the index lacks is an
// error that names the host's flag. Then offline, with the same cache, the
// same call installs what stood in, with the same flags and without
// --index-url and --pyodide-index-url.
func TestPackagesMirror(t *testing.T) {
	s := setup(t)
	srv, _ := resolverRepo().Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
	index := srv.URL + "/simple/"
	down := httptest.NewServer(http.NotFoundHandler())
	host := down.URL + "/"
	down.Close()
	c := startTarget(t, s, modeStdio, "--index-url", index, "--pyodide-index-url", host).connect(t)
	const sixCode = "import six\nsix.__version__, six.FROM"
	const sixFromIndex = "<status>success</status>\n<dependencies>[\"six\"]</dependencies>\n<return_value>\n[\n  \"1.17.0\",\n  \"index\"\n]\n</return_value>"
	c.expectRun(t, sixCode, sixFromIndex)
	c.expectRun(t, "import idna", installError(`"idna"`,
		`cannot install "idna==3.11": cannot download idna-3.11-py3-none-any.whl: cannot reach `+host+`idna-3.11-py3-none-any.whl: dial tcp `+strings.TrimPrefix(down.URL, "http://")+`: connect: connection refused (to install without Pyodide's package host: fill the cache where it can be reached with "mcp-run-python fetch PACKAGE..." and run with --offline, or point --pyodide-index-url at a mirror or a local directory)`))
	c.expectWorks(t)
	srv.Close()

	for _, flags := range [][]string{{"--index-url", index, "--pyodide-index-url", host}, nil} {
		offline := startTarget(t, s, modeStdio, append(flags, "--offline")...).connect(t)
		offline.expectRun(t, sixCode, sixFromIndex)
	}
}

// TestPackagesDepsInSnapshot: --deps are imported before the memory
// snapshot is taken, so a call finds them loaded (their import-time print
// never shows), and their files are there too (metadata, a submodule
// imported later).
func TestPackagesDepsInSnapshot(t *testing.T) {
	s := setup(t)
	r := &pt.Repo{}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	r.Add(pt.Wheel{Name: "heavy", Version: "1.0", Source: "print('loading heavy')\n# " + hex.EncodeToString(nonce) + "\n",
		Files: map[string]string{"later.py": "WHEN = 'later'\n"}})
	tg := startTarget(t, s, modeStdio, "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true}), "--deps", "heavy")
	c := tg.connect(t)
	code := "import heavy, heavy.later, importlib.metadata\nheavy.__version__, heavy.later.WHEN, importlib.metadata.version('heavy')"
	want := "<status>success</status>\n<return_value>\n[\n  \"1.0\",\n  \"later\",\n  \"1.0\"\n]\n</return_value>"
	for range 2 { // the pool's first worker, and a replacement
		c.expectRun(t, code, want)
	}
}

// TestPackagesLargeWheel: a wheel past the bridge's old one-frame limit (64
// MiB) installs; it travels in chunks.
func TestPackagesLargeWheel(t *testing.T) {
	s := setup(t)
	blob := make([]byte, 100<<20)
	rand.Read(blob) // incompressible: the wheel is as large
	r := &pt.Repo{}
	r.Add(pt.Wheel{Name: "big", Version: "1.0", Files: map[string]string{"blob.bin": string(blob)}})
	c := startTarget(t, s, modeStdio, "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true})).connect(t)
	c.expectRun(t, script(`"big"`, "import big, os\nos.path.getsize(os.path.join(big.__path__[0], 'blob.bin'))"),
		"<status>success</status>\n<dependencies>[\"big\"]</dependencies>\n<return_value>\n104857600\n</return_value>")
}

// TestPackagesLearnedSnapshot: a PEP 723 set that calls repeat gets a
// snapshot of its own in the background, and later calls start from a
// worker restored from it: the package's import-time print no longer shows,
// its files are there, and each call is still a fresh interpreter.
//
// The package is hostile too: its import-time code, which runs in the
// worker that makes the set's snapshot, stores a MiB through the Cache API.
// That worker is blocked as serving workers are: nothing lands in the cache
// directory, and the set's workers and plain ones keep starting.
func TestPackagesLearnedSnapshot(t *testing.T) {
	s := setup(t)
	r := &pt.Repo{}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	r.Add(pt.Wheel{Name: "learned", Version: "1.0", Source: "print('loading learned')\n# " + hex.EncodeToString(nonce) + "\n" + hoardCache})
	c := startTarget(t, s, modeStdio, "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true})).connect(t)
	code := script(`"learned"`, "import learned, importlib.metadata\nx = globals().get('x', 0) + 1\nx, importlib.metadata.version('learned')")
	value := "<return_value>\n[\n  1,\n  \"1.0\"\n]\n</return_value>"
	imported := "<status>success</status>\n<dependencies>[\"learned\"]</dependencies>\n<output>\nloading learned\n</output>\n" + value
	loaded := "<status>success</status>\n<dependencies>[\"learned\"]</dependencies>\n" + value
	for range 2 {
		c.expectRun(t, code, imported)
	}
	untilLoaded(t, c, code, imported, loaded)
	untilLoaded(t, c, code, imported, loaded) // a fresh one: x is 1 again
	// Other calls are not affected.
	c.expectRun(t, "import sys\n'learned' in sys.modules", "<status>success</status>\n<return_value>\nfalse\n</return_value>")
	for range 8 {
		c.expectWorks(t)
	}
	stored, _ := filepath.Glob(filepath.Join(s.cacheDir, "codecache", "*", "location_data"))
	if len(stored) > 0 {
		t.Errorf("the Cache API's data in code cache templates: %v", stored)
	}
}

// TestPackagesLearnedFromImports: a set of packages that calls' plain
// imports keep making is learned too (no PEP 723 block): later calls start
// with it loaded, and answer byte for byte as on a plain worker (the same
// dependencies, each a fresh interpreter). A call whose imports need more
// than the set, or whose import statements only look like the set's, gets
// what a plain worker gives.
func TestPackagesLearnedFromImports(t *testing.T) {
	s := setup(t)
	r := &pt.Repo{}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	tag := hex.EncodeToString(nonce)
	r.Add(pt.Wheel{Name: "inferred", Version: "1.0", Requires: []string{"inferredhelper"}, Source: "print('loading inferred')\n# " + tag + "\nimport inferredhelper\n"})
	r.Add(pt.Wheel{Name: "inferredhelper", Version: "2.0", Source: "# " + tag + "\n"})
	r.Add(pt.Wheel{Name: "other", Version: "1.0"})
	c := startTarget(t, s, modeStdio, "--log-level", "debug", "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true})).connect(t)
	deps := "<status>success</status>\n<dependencies>[\"inferred\"]</dependencies>\n"
	printed := "<output>\nloading inferred\n</output>\n"
	code := "import json, inferred\nx = globals().get('x', 0) + 1\nx, json.dumps(inferred.inferredhelper.__name__)"
	value := "<return_value>\n[\n  1,\n  \"\\\"inferredhelper\\\"\"\n]\n</return_value>"
	for range 2 {
		c.expectRun(t, code, deps+printed+value)
	}
	untilLoaded(t, c, code, deps+printed+value, deps+value)
	untilLoaded(t, c, code, deps+printed+value, deps+value) // a fresh one: x is 1 again
	// Other code with the same imports gets the set too.
	code, value = "from inferred import inferredhelper as h\nh.__name__", "<return_value>\ninferredhelper\n</return_value>"
	untilLoaded(t, c, code, deps+printed+value, deps+value)
	// Imports that need more than the set: the plain answer, with both.
	c.expectRun(t, "import inferred, other\n1",
		"<status>success</status>\n<dependencies>[\"inferred\",\"other\"]</dependencies>\n"+printed+"<return_value>\n1\n</return_value>")
	// A statement that looks like the set's import but is in a string: no
	// package, as on a plain worker.
	c.expectRun(t, "s = '''\nimport inferred\n'''\nimport sys\n'inferred' in sys.modules",
		"<status>success</status>\n<return_value>\nfalse\n</return_value>")
	c.expectRun(t, "import sys\n'inferred' in sys.modules", "<status>success</status>\n<return_value>\nfalse\n</return_value>")
}

// untilLoaded calls code until its answer is loaded: until a learned set's
// snapshot is made, and a worker restored from it is warm (again after each
// call), calls import the package themselves and answer imported.
func untilLoaded(t *testing.T, c *e2eClient, code, imported, loaded string) {
	t.Helper()
	// Making the set's snapshot, then restoring a worker from it, took up
	// to 30 s on two loaded cores.
	deadline := time.Now().Add(3 * startTimeout)
	for {
		got := c.run(t, code)
		if got == loaded {
			return
		}
		if got != imported || time.Now().After(deadline) {
			t.Fatalf("call after the set's second use:\n got: %q\nwant: %q (or, for a while, %q)\nserver's log:\n%s", got, loaded, imported, c.stderr)
		}
		time.Sleep(200 * time.Millisecond) // bounded polling for the learned worker
	}
}

// hoardCache is import-time code that stores a MiB through the Cache API,
// quietly: a package's way of filling whatever DENO_DIR it runs with.
const hoardCache = `from js import caches, Response
def _hoard(cache):
    return cache.put('https://example.com/hoard', Response.new('x' * (1 << 20)))
caches.open('hoard').then(_hoard).catch(lambda e: None)
`

// TestPackagesDepsUnavailable: a server whose --deps cannot be installed
// (the index is down) ends at start, non-zero, saying why and what to do,
// rather than stay up failing every call, even 1+1. Its stdin stays open,
// as a client's does.
func TestPackagesDepsUnavailable(t *testing.T) {
	s := setup(t)
	down := httptest.NewServer(http.NotFoundHandler())
	index := down.URL + "/simple/"
	down.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append(s.baseArgs(), "--index-url", index, "--deps", "nosuchdep", "stdio")...)
	cmd.Env = serverEnv()
	var errOut syncBuffer
	cmd.Stderr = &errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	err = cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Fatalf("server with --deps it cannot install: %v, want exit status 1\n%s", err, errOut.String())
	}
	for _, want := range []string{
		`mcp-run-python: --deps cannot be installed: cannot install "nosuchdep"`,
		"(--index-url installs from another index or a local directory instead)",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}
