package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionFlag checks that --version prints what the binary knows, its
// first line the one scripts read.
func TestVersionFlag(t *testing.T) {
	got := runProgram(t, []string{"--version"}, &fakeEngine{})
	if got.code != exitOK || got.stdout != binaryVersion().Text() {
		t.Fatalf("exit %d, stdout %q; want 0, %q", got.code, got.stdout, binaryVersion().Text())
	}
	if !strings.HasPrefix(got.stdout, "mcp-run-python "+binaryVersion().Version+"\n") {
		t.Errorf("first line of %q is not mcp-run-python %s", got.stdout, binaryVersion().Version)
	}
}

// TestVersionStamped builds the binary as .goreleaser.yaml does and checks
// that the linker flags reach --version: a renamed variable would silently
// leave releases saying "dev".
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-run-python")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.Command("go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-s -w -X main.version=9.8.7 -X main.commit=abc1234", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "mcp-run-python 9.8.7\ncommit abc1234\n"; string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}
