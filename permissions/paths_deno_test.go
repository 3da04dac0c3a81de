package permissions

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/denotest"
)

// probeJS prints, as one JSON object, whether each file named in its
// arguments could be read.
const probeJS = `const r = {};
for (const p of Deno.args) {
  try { Deno.readTextFileSync(p); r[p] = true; } catch { r[p] = false; }
}
console.log(JSON.stringify(r));
`

// TestFlagsWithRealDeno runs deno under Flags and shows which files it may
// read: exactly the policy's, and never more for a path with a comma, which
// deno 2.9 splits at with no escape.
func TestFlagsWithRealDeno(t *testing.T) {
	deno := denotest.Deno(t)
	dir := resolvedTempDir(t)
	files := map[string]string{} // name of a directory → the file in it
	for _, name := range []string{"a", "b", "a,b"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		files[name] = filepath.Join(dir, name, "f.txt")
		if err := os.WriteFile(files[name], []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		read      string
		mayRefuse bool            // deno may refuse to start rather than run
		want      map[string]bool // directory name → its file readable
	}{
		{"a plain path", "a", false, map[string]bool{"a": true, "b": false, "a,b": false}},
		// The doubled comma must not grant a, nor b relative to the working
		// directory; whether a,b itself is granted depends on deno's version.
		{"a path with a comma", "a,b", true, map[string]bool{"a": false, "b": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Read: []string{filepath.Join(dir, tt.read)}}
			if err := p.Validate(runtime.GOOS); (err == nil) == tt.mayRefuse {
				t.Errorf("Validate = %v; want an error exactly for the path deno may refuse", err)
			}
			got, started := readable(t, deno, dir, Flags(p), files)
			if !started {
				if !tt.mayRefuse {
					t.Fatal("deno did not start")
				}
				t.Logf("deno refused to start with %q", Flags(p))
				return
			}
			for name, want := range tt.want {
				if got[files[name]] != want {
					t.Errorf("file in %q readable = %v, want %v", name, got[files[name]], want)
				}
			}
		})
	}
}

// readable runs the probe under flags in dir and returns which files it
// could read, and false if deno did not run it at all.
func readable(t *testing.T, deno, dir string, flags []string, files map[string]string) (map[string]bool, bool) {
	t.Helper()
	probe := filepath.Join(dir, "probe.js")
	if err := os.WriteFile(probe, []byte(probeJS), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append([]string{"run"}, flags...), probe)
	for _, f := range files {
		args = append(args, f)
	}
	cmd := exec.CommandContext(ctx, deno, args...)
	cmd.Dir = dir // so that a relative entry deno split off would point into dir
	cmd.Env = append(os.Environ(), "DENO_NO_UPDATE_CHECK=1", "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if ctx.Err() == nil && errors.As(err, &exit) {
			t.Logf("deno: %v: %s", err, exit.Stderr)
			return nil, false
		}
		t.Fatalf("run deno: %v", err)
	}
	got := map[string]bool{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	return got, true
}

// resolvedTempDir returns a new temporary directory by its real path: on
// macOS the temporary directory is under /var, a symlink deno resolves.
func resolvedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
