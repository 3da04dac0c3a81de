package config

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// onPath returns f's Environment with a LookPath that finds only the file
// names in found, so that tests see which name was looked for.
func (f fakeEnv) onPath(found map[string]string) Environment {
	env := f.environment()
	env.LookPath = func(file string) (string, error) {
		if path, ok := found[file]; ok {
			return path, nil
		}
		return "", errors.New("not found")
	}
	return env
}

func TestDefaultDeno(t *testing.T) {
	tests := []struct {
		name, goos string
		found      map[string]string // LookPath's answers by file name
		env        fakeEnv
		want       string
	}{
		{"linux: on PATH", "linux", map[string]string{"deno": "/usr/bin/deno"}, fakeEnv{home: "/home/u"}, "/usr/bin/deno"},
		{"linux: PATH wins over DENO_INSTALL", "linux", map[string]string{"deno": "/usr/bin/deno"},
			fakeEnv{home: "/home/u", vars: map[string]string{"DENO_INSTALL": "/opt/deno"}}, "/usr/bin/deno"},
		{"linux: relative PATH answer skipped", "linux", map[string]string{"deno": "bin/deno"}, fakeEnv{home: "/home/u"}, "/home/u/.deno/bin/deno"},
		{"linux: deno.exe is not deno", "linux", map[string]string{"deno.exe": "/usr/bin/deno.exe"}, fakeEnv{home: "/home/u"}, "/home/u/.deno/bin/deno"},
		{"linux: DENO_INSTALL", "linux", nil, fakeEnv{home: "/home/u", vars: map[string]string{"DENO_INSTALL": "/opt/deno/"}}, "/opt/deno/bin/deno"},
		{"linux: relative DENO_INSTALL skipped", "linux", nil, fakeEnv{home: "/home/u", vars: map[string]string{"DENO_INSTALL": "deno"}}, "/home/u/.deno/bin/deno"},
		{"linux: empty DENO_INSTALL skipped", "linux", nil, fakeEnv{home: "/home/u", vars: map[string]string{"DENO_INSTALL": ""}}, "/home/u/.deno/bin/deno"},
		{"linux: home is the root", "linux", nil, fakeEnv{home: "/"}, "/.deno/bin/deno"},
		{"linux: nothing known", "linux", nil, fakeEnv{}, "deno"},
		{"darwin: on PATH", "darwin", map[string]string{"deno": "/opt/homebrew/bin/deno"}, fakeEnv{home: "/Users/u"}, "/opt/homebrew/bin/deno"},
		{"darwin: home", "darwin", nil, fakeEnv{home: "/Users/u"}, "/Users/u/.deno/bin/deno"},
		{"windows: on PATH", "windows", map[string]string{"deno.exe": `C:\Program Files\deno\deno.exe`},
			fakeEnv{home: `C:\Users\u`}, `C:\Program Files\deno\deno.exe`},
		{"windows: deno without .exe is not looked for", "windows", map[string]string{"deno": `C:\bin\deno`},
			fakeEnv{home: `C:\Users\u`}, `C:\Users\u\.deno\bin\deno.exe`},
		{"windows: DENO_INSTALL", "windows", nil,
			fakeEnv{home: `C:\Users\u`, vars: map[string]string{"DENO_INSTALL": `D:\tools\deno`}}, `D:\tools\deno\bin\deno.exe`},
		{"windows: DENO_INSTALL with forward slashes", "windows", nil,
			fakeEnv{home: `C:\Users\u`, vars: map[string]string{"DENO_INSTALL": "D:/tools/deno/"}}, `D:\tools\deno\bin\deno.exe`},
		{"windows: DENO_INSTALL without a drive skipped", "windows", nil,
			fakeEnv{home: `C:\Users\u`, vars: map[string]string{"DENO_INSTALL": "/opt/deno"}}, `C:\Users\u\.deno\bin\deno.exe`},
		{"windows: USERPROFILE", "windows", nil, fakeEnv{home: `C:\Users\u`}, `C:\Users\u\.deno\bin\deno.exe`},
		{"windows: UNC home", "windows", nil, fakeEnv{home: `\\srv\home\u`}, `\\srv\home\u\.deno\bin\deno.exe`},
		{"windows: Unix home skipped", "windows", nil, fakeEnv{home: "/home/u"}, "deno.exe"},
		{"windows: nothing known", "windows", nil, fakeEnv{}, "deno.exe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultDeno(tt.goos, tt.env.onPath(tt.found)); got != tt.want {
				t.Errorf("defaultDeno(%q) = %q, want %q", tt.goos, got, tt.want)
			}
		})
	}
}

func TestDefaultCachePath(t *testing.T) {
	tests := []struct {
		name, goos string
		env        fakeEnv
		want       string // "" when an error is wanted
		mention    string // what the error names
	}{
		{"linux: user cache dir", "linux", fakeEnv{cacheDir: "/home/u/.cache", home: "/home/u"}, "/home/u/.cache/mcp-run-python", ""},
		{"linux: XDG_CACHE_HOME", "linux", fakeEnv{cacheDir: "/var/cache/u", home: "/home/u"}, "/var/cache/u/mcp-run-python", ""},
		{"linux: relative cache dir skipped", "linux", fakeEnv{cacheDir: "cache", home: "/home/u"}, "/home/u/.cache/mcp-run-python", ""},
		{"linux: from home", "linux", fakeEnv{home: "/home/u"}, "/home/u/.cache/mcp-run-python", ""},
		{"linux: no home", "linux", fakeEnv{}, "", "find home directory"},
		{"linux: relative home", "linux", fakeEnv{home: "u"}, "", "not absolute"},
		{"darwin: user cache dir", "darwin", fakeEnv{cacheDir: "/Users/u/Library/Caches", home: "/Users/u"}, "/Users/u/Library/Caches/mcp-run-python", ""},
		{"darwin: from home", "darwin", fakeEnv{home: "/Users/u"}, "/Users/u/Library/Caches/mcp-run-python", ""},
		{"windows: LocalAppData", "windows", fakeEnv{cacheDir: `C:\Users\u\AppData\Local`, home: `C:\Users\u`}, `C:\Users\u\AppData\Local\mcp-run-python`, ""},
		{"windows: from home", "windows", fakeEnv{home: `C:\Users\u`}, `C:\Users\u\AppData\Local\mcp-run-python`, ""},
		{"windows: Unix cache dir skipped", "windows", fakeEnv{cacheDir: "/home/u/.cache", home: `C:\Users\u`}, `C:\Users\u\AppData\Local\mcp-run-python`, ""},
		{"windows: home without a drive", "windows", fakeEnv{home: `\Users\u`}, "", "not absolute"},
		{"windows: no home", "windows", fakeEnv{}, "", "find home directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultCacheDir(tt.goos, tt.env.environment())
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.mention) {
					t.Fatalf("defaultCacheDir(%q) = %q, %v; want an error mentioning %q", tt.goos, got, err, tt.mention)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("defaultCacheDir(%q) = %q, %v; want %q", tt.goos, got, err, tt.want)
			}
		})
	}
}

// TestParseConfigPathsPerOS shows that Parse's defaults are those of
// the system it is asked for, whatever the host.
func TestParseConfigPathsPerOS(t *testing.T) {
	tests := []struct {
		goos           string
		found          map[string]string
		env            fakeEnv
		deno, cacheDir string
	}{
		{"linux", nil, fakeEnv{cacheDir: "/home/u/.cache", home: "/home/u"},
			"/home/u/.deno/bin/deno", "/home/u/.cache/mcp-run-python"},
		{"darwin", map[string]string{"deno": "/opt/homebrew/bin/deno"}, fakeEnv{cacheDir: "/Users/u/Library/Caches", home: "/Users/u"},
			"/opt/homebrew/bin/deno", "/Users/u/Library/Caches/mcp-run-python"},
		{"windows", nil, fakeEnv{cacheDir: `C:\Users\u\AppData\Local`, home: `C:\Users\u`},
			`C:\Users\u\.deno\bin\deno.exe`, `C:\Users\u\AppData\Local\mcp-run-python`},
	}
	for _, tt := range tests {
		t.Run(tt.goos, func(t *testing.T) {
			cfg, err := parse([]string{"stdio"}, tt.env.onPath(tt.found), tt.goos)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Supervisor.Deno != tt.deno || cfg.Supervisor.CacheDir != tt.cacheDir {
				t.Errorf("deno %q, cache dir %q; want %q, %q", cfg.Supervisor.Deno, cfg.Supervisor.CacheDir, tt.deno, tt.cacheDir)
			}
		})
	}
}

func TestPathHelpPerOS(t *testing.T) {
	tests := []struct {
		goos             string
		deno, cache, not string // help must mention deno and cache, and never not
	}{
		{"linux", "$HOME/.deno/bin/deno", "~/.cache", "%"},
		{"darwin", "$DENO_INSTALL/bin/deno", "~/Library/Caches", `\`},
		{"windows", `%USERPROFILE%\.deno\bin\deno.exe`, "%LocalAppData%", "$HOME"},
	}
	for _, tt := range tests {
		help := denoHelp(tt.goos) + "\n" + cacheDirHelp(tt.goos)
		for _, want := range []string{tt.deno, tt.cache} {
			if !strings.Contains(help, want) {
				t.Errorf("help on %s lacks %q:\n%s", tt.goos, want, help)
			}
		}
		if strings.Contains(help, tt.not) {
			t.Errorf("help on %s mentions %q:\n%s", tt.goos, tt.not, help)
		}
	}
	if usage := Usage(); !strings.Contains(usage, denoHelp(runtime.GOOS)) {
		t.Errorf("usage text lacks this system's --deno help %q", denoHelp(runtime.GOOS))
	}
}

func TestJoinPath(t *testing.T) {
	tests := []struct {
		goos, base string
		elems      []string
		want       string
	}{
		{"linux", "/home/u", []string{".deno", "bin", "deno"}, "/home/u/.deno/bin/deno"},
		{"linux", "/home/u/", []string{"x"}, "/home/u/x"},
		{"linux", "/", []string{"x"}, "/x"},
		{"linux", `/odd\name`, []string{"x"}, `/odd\name/x`},
		{"darwin", "/Users/u", []string{"Library", "Caches"}, "/Users/u/Library/Caches"},
		{"windows", `C:\Users\u`, []string{".deno", "bin", "deno.exe"}, `C:\Users\u\.deno\bin\deno.exe`},
		{"windows", `C:\`, []string{"x"}, `C:\x`},
		{"windows", "C:/Users/u/", []string{"x"}, `C:\Users\u\x`},
		{"windows", `\\srv\share`, []string{"x"}, `\\srv\share\x`},
	}
	for _, tt := range tests {
		if got := joinPath(tt.goos, tt.base, tt.elems...); got != tt.want {
			t.Errorf("joinPath(%q, %q, %q) = %q, want %q", tt.goos, tt.base, tt.elems, got, tt.want)
		}
	}
}

func TestIsAbsPath(t *testing.T) {
	tests := []struct {
		path          string
		unix, windows bool
	}{
		{"/home/u", true, false},
		{"home/u", false, false},
		{"", false, false},
		{`C:\Users`, false, true},
		{"C:/Users", false, true},
		{"c:", false, false},
		{`C:Users`, false, false},
		{`\Users`, false, false},
		{`\\srv\share`, false, true},
		{"//srv/share", true, true},
	}
	for _, tt := range tests {
		for goos, want := range map[string]bool{"linux": tt.unix, "darwin": tt.unix, "windows": tt.windows} {
			if got := isAbs(goos, tt.path); got != want {
				t.Errorf("isAbs(%q, %q) = %v, want %v", goos, tt.path, got, want)
			}
		}
	}
}
