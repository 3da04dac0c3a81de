package js

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
)

// relativeImport matches the relative imports of a TypeScript module:
// `from "./x.ts"`, `import "./x.ts"`, and the text imports of Python
// modules.
var relativeImport = regexp.MustCompile(`(?m)(?:from|import)\s+"(\./[^"]+)"`)

// TestProgramIsComplete checks that the embedded program holds every module
// the worker imports, from worker.ts on, and none of the tests: deno runs
// the program from the cache directory it is written to, where a module
// left out of the embed list is a worker that never starts.
func TestProgramIsComplete(t *testing.T) {
	seen := map[string]bool{}
	var visit func(name, from string)
	visit = func(name, from string) {
		if seen[name] {
			return
		}
		seen[name] = true
		b, err := fs.ReadFile(Files(), name)
		if err != nil {
			t.Errorf("%s imports %s, which is not embedded: %v", from, name, err)
			return
		}
		if !strings.HasSuffix(name, ".ts") {
			return
		}
		for _, m := range relativeImport.FindAllStringSubmatch(string(b), -1) {
			visit(path.Clean(m[1]), name)
		}
	}
	visit(Entry, "the supervisor")
	visit("runner.ts", "worker.ts") // started as a Worker by URL, not imported
	err := fs.WalkDir(Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(name, "_test.") {
			t.Errorf("the test %s is embedded", name)
		}
		if !seen[name] && name != "deno.json" {
			t.Errorf("%s is embedded but no module imports it", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Errorf("found %d modules, want the runner's parts: the import pattern is blind", len(seen))
	}
}
