package main_test

// The official MCP conformance suite against the streamable_http mode. Many
// of its scenarios call the suite's own test tools, resources and prompts,
// which this server does not have: testdata/conformance/baseline.yml lists
// them, each with why. The suite fails the test when a scenario outside the
// baseline fails and when one inside it passes, so the baseline stays true.
//
//	go test ./cmd/mcp-run-python/ -run Conformance -count=1 -v

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	// conformancePackage is the suite, pinned; testdata/conformance/deno.lock
	// pins its dependencies, so that the run is the same everywhere. To move
	// to a newer release, change the version, delete the lock file, run the
	// test once (deno writes the lock again) and review the baseline.
	conformancePackage = "npm:@modelcontextprotocol/conformance@0.1.16"
	conformanceDir     = "../../testdata/conformance"
	// conformanceTimeout bounds the suite's run: it takes about a second,
	// plus deno's download of the package on a cold cache.
	conformanceTimeout = 2 * time.Minute
)

// ansi matches the colours of the suite's output, which ignores NO_COLOR.
var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// baselineEntry is a line "  - SCENARIO" of the baseline's server list.
var baselineEntry = regexp.MustCompile(`^\s+-\s+([a-z0-9-]+)\s*(#.*)?$`)

func TestConformance(t *testing.T) {
	s := setup(t)
	dir, err := filepath.Abs(conformanceDir)
	if err != nil {
		t.Fatal(err)
	}
	baseline := filepath.Join(dir, "baseline.yml")
	// No call reaches Python: one worker is enough.
	tg := startTarget(t, s, modeStateful, "--workers", "1")
	out := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()
	// The suite needs Node 22's fs.globSync; deno has it. --no-config and a
	// working directory of its own keep deno away from the repository's
	// deno.json (whose nodeModulesDir would create node_modules here);
	// --frozen-lockfile fails rather than resolve other dependencies.
	cmd := exec.CommandContext(ctx, s.deno, "run", "--no-config",
		"--lock="+filepath.Join(dir, "deno.lock"), "--frozen-lockfile", "-A",
		conformancePackage, "server",
		"--url", tg.url+"/mcp",
		"--expected-failures", baseline,
		"--output-dir", out)
	cmd.Dir = out
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		t.Fatalf("the conformance suite: %v (a scenario outside %s failed, or one in it now passes: see the end)\n%s\nserver stderr:\n%s",
			err, baseline, ansi.ReplaceAllString(output.String(), ""), tg.stderr)
	}
	t.Logf("%s", summary(ansi.ReplaceAllString(output.String(), "")))

	// The suite ignores baseline entries it did not run: a renamed scenario
	// would stay listed for ever.
	ran, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range baselineScenarios(t, baseline) {
		found := false
		for _, e := range ran {
			// Each scenario's results are in server-SCENARIO-TIMESTAMP.
			if rest, ok := strings.CutPrefix(e.Name(), "server-"+name+"-"); ok && len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
				found = true
			}
		}
		if !found {
			t.Errorf("%s lists %s, which the suite did not run: remove it", baseline, name)
		}
	}
}

// baselineScenarios returns the scenarios the baseline lists.
func baselineScenarios(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := baselineEntry.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no scenario", path)
	}
	return names
}

// summary returns the suite's output from its summary on.
func summary(output string) string {
	if i := strings.Index(output, "=== SUMMARY ==="); i >= 0 {
		return output[i:]
	}
	return output
}
