package denotest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	exe := "deno"
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	dir := t.TempDir()
	put := func(path string) string {
		t.Helper()
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	named := put("named/" + exe)
	onPath := put("path/" + exe)
	installed := put("install/bin/" + exe)
	home := filepath.Join(dir, "home")
	inHome := put("home/.deno/bin/" + exe)
	emptyHome := filepath.Join(dir, "empty")
	// A directory where deno should be is no deno.
	if err := os.MkdirAll(filepath.Join(dir, "dirhome", ".deno", "bin", exe), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		vars    map[string]string
		path    string // what PATH finds; "" for nothing
		home    string
		want    string
		wantErr string // in the error; "" for none
	}{
		{name: "the variable wins", vars: map[string]string{denoVar: named, "DENO_INSTALL": filepath.Join(dir, "install")}, path: onPath, home: home, want: named},
		{name: "a variable naming nothing fails", vars: map[string]string{denoVar: filepath.Join(dir, "gone")}, path: onPath, home: home, wantErr: denoVar + "="},
		{name: "PATH before the install directories", vars: map[string]string{"DENO_INSTALL": filepath.Join(dir, "install")}, path: onPath, home: home, want: onPath},
		{name: "DENO_INSTALL before the home directory", vars: map[string]string{"DENO_INSTALL": filepath.Join(dir, "install")}, home: home, want: installed},
		{name: "an empty DENO_INSTALL falls through", vars: map[string]string{"DENO_INSTALL": filepath.Join(dir, "nothing")}, home: home, want: inHome},
		{name: "the home directory", home: home, want: inHome},
		{name: "a directory is no deno", home: filepath.Join(dir, "dirhome"), wantErr: "deno not found"},
		{name: "none fails, saying how to get deno", home: emptyHome, wantErr: "make test"},
		{name: "no home directory", wantErr: "deno not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{
				getenv: func(key string) string { return tt.vars[key] },
				lookPath: func(file string) (string, error) {
					if file != exe || tt.path == "" {
						return "", errors.New("not on PATH")
					}
					return tt.path, nil
				},
				homeDir: func() (string, error) {
					if tt.home == "" {
						return "", errors.New("no home")
					}
					return tt.home, nil
				},
			}
			got, err := find(e)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("find = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("find = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv(cacheVar, "/somewhere/cache")
	if got, err := CacheDir(); err != nil || got != "/somewhere/cache" {
		t.Errorf("with %s set: CacheDir = %q, %v", cacheVar, got, err)
	}
	t.Setenv(cacheVar, "")
	got, err := CacheDir()
	if user, userErr := os.UserCacheDir(); userErr != nil {
		if err == nil {
			t.Errorf("without %s or a user cache directory (%v): CacheDir = %q", cacheVar, userErr, got)
		}
	} else if err != nil || got != filepath.Join(user, "mcp-run-python") {
		t.Errorf("without %s: CacheDir = %q, %v; want mcp-run-python in %s", cacheVar, got, err, user)
	}
}
