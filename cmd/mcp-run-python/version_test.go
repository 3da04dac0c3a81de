package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		info.Settings = []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}}
		if modified != "" {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return info
	}
	module := func(v string) *debug.BuildInfo { return &debug.BuildInfo{Main: debug.Module{Version: v}} }
	tests := []struct {
		name            string
		version, commit string // stamped
		info            *debug.BuildInfo
		want            versionInfo
		text            string
	}{
		{"no build info", "", "", nil, versionInfo{Version: "dev"}, "mcp-run-python dev\n"},
		{"go run or go build without VCS", "", "", module("(devel)"), versionInfo{Version: "dev"}, "mcp-run-python dev\n"},
		{"go install @v1.2.3", "", "", module("v1.2.3"), versionInfo{Version: "1.2.3"}, "mcp-run-python 1.2.3\n"},
		{"release stamp", "1.4.0", "abc1234", module("(devel)"), versionInfo{Version: "1.4.0", Commit: "abc1234"},
			"mcp-run-python 1.4.0\ncommit abc1234\n"},
		{"stamp with a v", "v1.4.0", "", nil, versionInfo{Version: "1.4.0"}, "mcp-run-python 1.4.0\n"},
		{"stamp wins over the build info", "1.4.0", "abc1234", vcs("ffffffffffff", "true"),
			versionInfo{Version: "1.4.0", Commit: "abc1234"}, "mcp-run-python 1.4.0\ncommit abc1234\n"},
		{"checkout", "", "", vcs("0123456789abcdef", "false"), versionInfo{Version: "dev", Commit: "0123456789abcdef"},
			"mcp-run-python dev\ncommit 0123456789abcdef\n"},
		{"modified checkout", "", "", vcs("0123456789abcdef", "true"),
			versionInfo{Version: "dev", Commit: "0123456789abcdef", Modified: true},
			"mcp-run-python dev\ncommit 0123456789abcdef (modified)\n"},
		{"modified without a revision", "", "", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}},
			versionInfo{Version: "dev"}, "mcp-run-python dev\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readVersion(tt.version, tt.commit, tt.info)
			if got != tt.want {
				t.Errorf("readVersion = %+v, want %+v", got, tt.want)
			}
			if text := got.text(); text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
		})
	}
}

// TestVersionFlag checks that --version prints what the binary knows, its
// first line the one scripts read.
func TestVersionFlag(t *testing.T) {
	got := runProgram(t, []string{"--version"}, &fakeEngine{})
	if got.code != exitOK || got.stdout != binaryVersion().text() {
		t.Fatalf("exit %d, stdout %q; want 0, %q", got.code, got.stdout, binaryVersion().text())
	}
	if !strings.HasPrefix(got.stdout, "mcp-run-python "+buildVersion()+"\n") {
		t.Errorf("first line of %q is not mcp-run-python %s", got.stdout, buildVersion())
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
