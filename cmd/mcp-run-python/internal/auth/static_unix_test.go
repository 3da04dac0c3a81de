//go:build unix

package auth

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// notRegular makes, at path, each kind of file that is not a regular one.
var notRegular = []struct {
	name string
	make func(path string) error
}{
	{"fifo", func(path string) error { return syscall.Mkfifo(path, 0o600) }},
	{"directory", func(path string) error { return os.Mkdir(path, 0o700) }},
	{"device", func(path string) error { return os.Symlink(os.DevNull, path) }},
}

// within fails the test when fn has not returned in a while: a FIFO used to
// make the open wait for a writer for ever.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second): // a hang, not a slow machine
		t.Fatalf("%s did not return", what)
		panic("unreachable")
	}
}

// TestStaticTokensRefuseSpecialFiles: a token file that is not a regular
// file is refused at once, at start and at a reload, and a later reload of a
// regular file works.
func TestStaticTokensRefuseSpecialFiles(t *testing.T) {
	for _, kind := range notRegular {
		t.Run(kind.name, func(t *testing.T) {
			dir := t.TempDir()
			special := filepath.Join(dir, "special")
			if err := kind.make(special); err != nil {
				t.Fatal(err)
			}
			err := within(t, "NewStaticTokens", func() error {
				_, err := NewStaticTokens(special, zaptest.NewLogger(t))
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("NewStaticTokens of a %s: %v", kind.name, err)
			}

			path := writeTokenFile(t, filepath.Join(dir, "tokens"), alpha+"\n")
			s, err := NewStaticTokens(path, zaptest.NewLogger(t))
			if err != nil {
				t.Fatalf("NewStaticTokens: %v", err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(special, path); err != nil {
				t.Fatal(err)
			}
			err = within(t, "Reload", s.Reload)
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("Reload of a %s: %v", kind.name, err)
			}
			checkTokens(t, s, map[string]identity.Principal{alpha: alphaID}, beta)

			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			writeTokenFile(t, path, beta+"\n")
			if err := within(t, "Reload", s.Reload); err != nil {
				t.Fatalf("Reload of a regular file after a %s: %v", kind.name, err)
			}
			checkTokens(t, s, map[string]identity.Principal{beta: betaID}, alpha)
		})
	}
}
