package permissions

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckPathAccepts(t *testing.T) {
	tests := []struct {
		goos, path string
	}{
		{"linux", "/"},
		{"linux", "/home/u/.cache/mcp-run-python/pyodide"},
		{"linux", `/tmp/back\slash is a name on Unix`},
		{"linux", "/tmp/ünïcode and spaces"},
		{"darwin", "/private/var/folders/x/T/mcp"},
		{"darwin", "/Users/u/Library/Caches/mcp-run-python"},
		{"freebsd", "/usr/local/share"},
		{"windows", `C:\`},
		{"windows", `C:\Users\u\AppData\Local\mcp-run-python\pyodide`},
		{"windows", `d:\cache`},
		{"windows", `\\server\share`},
		{"windows", `\\server\share\mcp\snap.bin`},
		{"windows", `C:\Program Files (x86)\deno`},
	}
	for _, tt := range tests {
		if err := CheckPath(tt.goos, tt.path); err != nil {
			t.Errorf("CheckPath(%q, %q) = %v, want nil", tt.goos, tt.path, err)
		}
	}
}

func TestCheckPathRefuses(t *testing.T) {
	tests := []struct {
		goos, path, mention string
	}{
		{"linux", "", "empty"},
		{"windows", "", "empty"},
		{"linux", "relative/dir", "must start with /"},
		{"darwin", "./x", "must start with /"},
		{"linux", `C:\Users\u`, "must start with /"},
		{"linux", "/a//b", "empty element"},
		{"linux", "/a/b/", "empty element"},
		{"linux", "/a/../etc", ". or .."},
		{"darwin", "/a/./b", ". or .."},
		{"linux", "/tmp/a\x00b", "NUL"},
		{"linux", "/tmp/a\nb", "line break"},
		{"windows", "C:\\a\r\nb", "line break"},
		{"linux", "/tmp/\xff", "UTF-8"},
		{"linux", "/tmp/a,b", "comma"},
		{"darwin", "/tmp/a,,b", "comma"},
		{"windows", `C:\a,b`, "comma"},
		{"windows", "/home/u", "forward slash"},
		{"windows", "C:/Users/u", "forward slash"},
		{"windows", `C:\Users/u`, "forward slash"},
		{"windows", `C:`, "not absolute"},
		{"windows", `C:dir`, "not absolute"},
		{"windows", `\dir`, "not absolute"},
		{"windows", `dir\sub`, "not absolute"},
		{"windows", `1:\dir`, "not absolute"},
		{"windows", `\\?\C:\dir`, "verbatim"},
		{"windows", `\\.\PhysicalDrive0`, "device"},
		{"windows", `\\server`, "server and a share"},
		{"windows", `\\server\`, "server and a share"},
		{"windows", `\\\share`, "server and a share"},
		{"windows", `C:\a\\b`, "empty element"},
		{"windows", `C:\a\`, "empty element"},
		{"windows", `C:\a\..\b`, ". or .."},
		{"windows", `C:\a\file.txt:stream`, "forbids"},
		{"windows", `C:\a\*`, "forbids"},
		{"windows", `C:\a\b?`, "forbids"},
	}
	for _, tt := range tests {
		err := CheckPath(tt.goos, tt.path)
		var pathErr *PathError
		if !errors.As(err, &pathErr) {
			t.Errorf("CheckPath(%q, %q) = %v, want a *PathError", tt.goos, tt.path, err)
			continue
		}
		if pathErr.Path != tt.path || pathErr.GOOS != tt.goos {
			t.Errorf("CheckPath(%q, %q) names %q on %q", tt.goos, tt.path, pathErr.Path, pathErr.GOOS)
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("CheckPath(%q, %q) = %q, want it to mention %q", tt.goos, tt.path, err, tt.mention)
		}
	}
}

// TestCheckPathIsPerOS shows that the same text is judged by the rules of the
// system deno runs on, never the host's.
func TestCheckPathIsPerOS(t *testing.T) {
	tests := []struct {
		path                   string
		linux, darwin, windows bool // valid there
	}{
		{"/var/folders/x", true, true, false},
		{`C:\Users\u`, false, false, true},
		{`\\server\share\x`, false, false, true},
		{"/tmp/a,b", false, false, false},
	}
	for _, tt := range tests {
		for goos, want := range map[string]bool{"linux": tt.linux, "darwin": tt.darwin, "windows": tt.windows} {
			if got := CheckPath(goos, tt.path) == nil; got != want {
				t.Errorf("CheckPath(%q, %q) valid = %v, want %v", goos, tt.path, got, want)
			}
		}
	}
}

func TestPolicyValidatePaths(t *testing.T) {
	tests := []struct {
		name    string
		goos    string
		policy  Policy
		mention string // "" when valid
	}{
		{"empty policy", "linux", Policy{}, ""},
		{"unix paths", "darwin", Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}, Program: "/c/js"}, ""},
		{"windows paths", "windows", Policy{Read: []string{`C:\c\pyodide`}, Program: `\\srv\share\js`}, ""},
		{"bad program", "linux", Policy{Read: []string{"/p"}, Program: "js"}, `program directory: path "js"`},
		{"empty read entry", "linux", Policy{Read: []string{"/p", ""}}, "read permission: path \"\""},
		{"comma in second read entry", "linux", Policy{Read: []string{"/p", "/a,b"}}, `read permission: path "/a,b"`},
		{"unix path on windows", "windows", Policy{Read: []string{"/p"}}, "forward slash"},
		{"windows path on linux", "linux", Policy{Read: []string{`C:\p`}}, "must start with /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Validate(tt.goos)
			if tt.mention == "" {
				if err != nil {
					t.Fatalf("Validate(%q) = %v, want nil", tt.goos, err)
				}
				return
			}
			var pathErr *PathError
			if !errors.As(err, &pathErr) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Validate(%q) = %v, want a *PathError mentioning %q", tt.goos, err, tt.mention)
			}
		})
	}
}
