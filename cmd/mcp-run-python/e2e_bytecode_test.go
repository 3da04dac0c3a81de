package main_test

// End-to-end tests of the bytecode that the server compiles for installed
// wheels (supervisor/internal/install/bytecode.go):
//
//	go test ./cmd/mcp-run-python/ -run Bytecode -count=1 -v

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// compileWait bounds the wait for a background compile: it waits for the
// calls to end (30 s at most) and then runs at a low priority.
const compileWait = 2 * time.Minute

// compiledVariant waits until the package cache holds the compiled variant
// of the wheel with this sha256, and returns its path.
func compiledVariant(t *testing.T, s *e2eSetup, sha string, c *e2eClient) string {
	t.Helper()
	deadline := time.Now().Add(compileWait)
	for {
		found, _ := filepath.Glob(filepath.Join(s.cacheDir, "packages", "wheels", "sha256", sha, "bytecode", "*", "*.whl"))
		manifests, _ := filepath.Glob(filepath.Join(s.cacheDir, "packages", "wheels", "sha256", sha, "bytecode", "*", "bytecode.json"))
		if len(found) == 1 && len(manifests) == 1 {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compiled variant of %s in the cache after %s; server's log:\n%s", sha, compileWait, c.stderr)
		}
		time.Sleep(100 * time.Millisecond) // bounded polling for the background compile
	}
}

// nonceLine makes a wheel's content, and so its hash, new to the shared
// package cache.
func nonceLine() string {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	return "# " + hex.EncodeToString(nonce) + "\n"
}

// TestPackagesBytecode: a package whose module compiles with a
// SyntaxWarning (an invalid escape sequence, as in sympy). The first call
// compiles it at import, as Python does, and shows the warning; the server
// compiles the wheel in the background; a later call installs the compiled
// variant and imports the module from its unchecked-hash .pyc, without
// compiling it, so without the warning.
func TestPackagesBytecode(t *testing.T) {
	s := setup(t)
	r := &pt.Repo{}
	w := pt.Wheel{Name: "escapes", Version: "1.0", Source: nonceLine() + "from . import esc\n",
		Files: map[string]string{"esc.py": "import re\nPATTERN = re.compile('\\d+')\n"}}
	r.Add(w)
	data, _ := w.Build()
	sha := pt.SHA256(data)
	c := startTarget(t, s, modeStdio, "--log-level", "debug", "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true})).connect(t)
	// Whether the module came from a .pyc of ours: there is none unless we
	// made it (Pyodide writes none at import), its PEP 552 flags are 1
	// (hash-based, unchecked: the loader reads neither the source nor its
	// times), and its hash is the source's.
	code := `import escapes, importlib.util, os
e = escapes.esc
pyc = open(e.__cached__, 'rb').read() if os.path.exists(e.__cached__) else b''
flags = int.from_bytes(pyc[4:8], 'little') if pyc else None
same = pyc[8:16] == importlib.util.source_hash(open(e.__file__, 'rb').read())
e.PATTERN.pattern, e.__spec__.cached == e.__cached__, flags, same`
	first := c.run(t, code)
	if !strings.Contains(first, `SyntaxWarning: "\d" is an invalid escape sequence`) || !strings.Contains(first, "\n  null,\n") {
		t.Fatalf("first call, from source: want the compile warning and no .pyc, got:\n%s", first)
	}
	variant := compiledVariant(t, s, sha, c)
	if !strings.HasPrefix(filepath.Base(filepath.Dir(variant)), "cpython-314-pyodide-") {
		t.Errorf("the variant's key %s names no interpreter", filepath.Dir(variant))
	}
	want := "<status>success</status>\n<dependencies>[\"escapes\"]</dependencies>\n<return_value>\n[\n  \"\\\\d+\",\n  true,\n  1,\n  true\n]\n</return_value>"
	c.expectRun(t, code, want)
	// The original stays: it is the source of truth.
	if _, err := os.Stat(filepath.Join(s.cacheDir, "packages", "wheels", "sha256", sha, w.Filename())); err != nil {
		t.Errorf("the original wheel: %v", err)
	}
}

// TestPackagesBytecodeHostile: a package whose modules are built to break
// a compiler: nesting past every limit, a module larger than any real one,
// one that does not parse, one that takes the compiler more than the memory
// limit (or than a module's time). The compile skips them (they import from source,
// as without bytecode, and fail as they would), compiles the rest, and the
// server goes on serving.
func TestPackagesBytecodeHostile(t *testing.T) {
	s := setup(t)
	r := &pt.Repo{}
	w := pt.Wheel{Name: "hostile", Version: "1.0", Source: nonceLine(), Files: map[string]string{
		"ok.py":       "VALUE = 'fine'\n",
		"chain.py":    "x = 1" + strings.Repeat(" + 1", 200_000) + "\n",
		"nested.py":   "x = " + strings.Repeat("[", 5_000) + strings.Repeat("]", 5_000) + "\n",
		"blocks.py":   nestedBlocks(2_000),
		"huge.py":     strings.Repeat("a = 'x'\n", 700_000), // 5.3 MiB
		"broken.py":   "def (:\n",
		"nullbyte.py": "x = 1\x00\n",
		"patterns.py": orPatterns(200, 100),
	}}
	r.Add(w)
	data, _ := w.Build()
	sha := pt.SHA256(data)
	c := startTarget(t, s, modeStdio, "--log-level", "debug", "--index-url", r.Location(t, pt.Variant{JSON: true, Dir: true})).connect(t)
	code := `import hostile.ok as ok, os
pyc = open(ok.__cached__, 'rb').read() if os.path.exists(ok.__cached__) else b''

ok.VALUE, int.from_bytes(pyc[4:8], 'little') if pyc else None`
	c.expectRun(t, code, "<status>success</status>\n<dependencies>[\"hostile\"]</dependencies>\n<return_value>\n[\n  \"fine\",\n  null\n]\n</return_value>")
	compiledVariant(t, s, sha, c)
	c.expectRun(t, code, "<status>success</status>\n<dependencies>[\"hostile\"]</dependencies>\n<return_value>\n[\n  \"fine\",\n  1\n]\n</return_value>")
	// Only the healthy modules have bytecode.
	c.expectRun(t, `import hostile, os
sorted(os.listdir(os.path.join(hostile.__path__[0], '__pycache__')))`,
		"<status>success</status>\n<dependencies>[\"hostile\"]</dependencies>\n<return_value>\n[\n  \"__init__.cpython-314.pyc\",\n  \"ok.cpython-314.pyc\"\n]\n</return_value>")
	for range 3 {
		c.expectWorks(t)
	}
}

// nestedBlocks is a module of n if-blocks, each inside the last.
func nestedBlocks(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "if x:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "pass\n")
	return b.String()
}

// orPatterns is a module of one match statement whose case is the or of n
// names in m orders: the compiler's work grows with both, and the square of
// n, far past the source's size (n = m = 100, 48 KiB: 2 s in Pyodide; n =
// 200, 100 KiB: more than 1 GiB).
func orPatterns(n, m int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	alts := make([]string, m)
	for i := range alts {
		k := i % n
		alts[i] = "[" + strings.Join(append(slices.Clone(names[k:]), names[:k]...), ", ") + "]"
	}
	return "match x:\n case " + strings.Join(alts, " | ") + ":\n  pass\n"
}
