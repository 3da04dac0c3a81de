// Package denotest finds what the tests that run real deno need, the same
// way in every package: deno itself and the runtime cache the tests share.
//
// One rule holds for a missing deno: with -short such a test is skipped, as
// it is no unit test; otherwise it fails, saying how to get deno, because a
// run that means to test everything must not pass by skipping.
package denotest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// The variables the Makefile and the server read.
const (
	denoVar  = "MCP_RUN_PYTHON_DENO"
	cacheVar = "MCP_RUN_PYTHON_CACHE_DIR"
)

// Deno returns the deno to test with (see [Find]). It skips t under -short
// and fails it when there is no deno.
func Deno(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs deno: not with -short")
	}
	deno, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	return deno
}

// Find returns the absolute path of the deno to test with:
// $MCP_RUN_PYTHON_DENO when set, else where the server would look (deno on
// PATH, else $DENO_INSTALL/bin, else ~/.deno/bin). It is for tests that
// check -short themselves; the others call [Deno].
func Find() (string, error) {
	return find(env{getenv: os.Getenv, lookPath: exec.LookPath, homeDir: os.UserHomeDir})
}

// CacheDir returns the runtime cache the tests share, so that Pyodide is
// installed once: $MCP_RUN_PYTHON_CACHE_DIR when set, else the server's
// default, mcp-run-python in the user cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv(cacheVar); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory (set %s): %w", cacheVar, err)
	}
	return filepath.Join(d, "mcp-run-python"), nil
}

// env is what find reads of the machine besides its files; tests replace
// it.
type env struct {
	getenv   func(key string) string
	lookPath func(file string) (string, error)
	homeDir  func() (string, error)
}

// find is Find in e.
func find(e env) (string, error) {
	if d := e.getenv(denoVar); d != "" {
		if _, err := os.Stat(d); err != nil {
			return "", fmt.Errorf("%s=%s: %w; run `make test`, which installs deno", denoVar, d, err)
		}
		return filepath.Abs(d)
	}
	exe := "deno"
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	if d, err := e.lookPath(exe); err == nil {
		return filepath.Abs(d)
	}
	var installed []string
	if dir := e.getenv("DENO_INSTALL"); dir != "" {
		installed = append(installed, filepath.Join(dir, "bin", exe))
	}
	if home, err := e.homeDir(); err == nil && home != "" {
		installed = append(installed, filepath.Join(home, ".deno", "bin", exe))
	}
	for _, d := range installed {
		if info, err := os.Stat(d); err == nil && !info.IsDir() {
			return filepath.Abs(d)
		}
	}
	return "", errors.New("deno not found (not in " + denoVar + ", on PATH, in $DENO_INSTALL/bin or ~/.deno/bin): " +
		"this test runs real deno; run `make test`, which installs it, or skip such tests with go test -short")
}
