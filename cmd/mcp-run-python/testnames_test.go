package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNamedTestsExist: every test that the repository's code, comments and
// documents name is a test that some _test.go defines. Unit tests name the
// end-to-end tests they are twins of, and documents name the tests that
// show a claim; when tests merged, five such names outlived their tests.
func TestNamedTestsExist(t *testing.T) {
	root := filepath.Join("..", "..")
	// Without a leading \b the regexp finds "Test" as fast as strings.Index
	// would (0.02 s for the repository, 0.3 s with it); the byte before is
	// checked below.
	testName := regexp.MustCompile(`Test[A-Z][A-Za-z0-9_]*`)
	defined := map[string]bool{}
	named := map[string][]string{} // test name → the files that name it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, at := range testName.FindAllIndex(b, -1) {
			if at[0] > 0 && isWordByte(b[at[0]-1]) {
				continue // inside a longer word
			}
			n := string(b[at[0]:at[1]])
			if strings.HasSuffix(path, "_test.go") && bytes.HasSuffix(b[:at[0]], []byte("\nfunc ")) && at[1] < len(b) && b[at[1]] == '(' {
				defined[n] = true
			}
			if !slices.Contains(named[n], rel) {
				named[n] = append(named[n], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defined) < 100 {
		t.Fatalf("found %d tests under %s: not the repository", len(defined), root)
	}
	for n, files := range named {
		if !defined[n] {
			t.Errorf("%s, named in %s, is no test", n, strings.Join(files, ", "))
		}
	}
}

// isWordByte reports whether c may be part of a Go identifier (ASCII).
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
