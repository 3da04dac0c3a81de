package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// The tests' tokens and their principals, worked out by sha256sum.
const (
	alpha = "alpha-0123456789abcdef"
	beta  = "beta-0123456789abcdef"
	gamma = "gamma-0123456789abcdef"

	alphaID identity.Principal = "token:484bf040f8c8885c"
	betaID  identity.Principal = "token:cd539eb9e1598de0"
	gammaID identity.Principal = "token:90d8e5628f30845c"
)

// writeTokenFile writes content to a private file and returns its path.
func writeTokenFile(t *testing.T, path, content string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "tokens")
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkTokens checks that s accepts want (token to principal) and refuses
// refused.
func checkTokens(t *testing.T, s *StaticTokens, want map[string]identity.Principal, refused ...string) {
	t.Helper()
	for token, id := range want {
		if p, err := s.Authenticate(context.Background(), token); err != nil || p != id {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", token, p, err, id)
		}
	}
	for _, token := range refused {
		if p, err := s.Authenticate(context.Background(), token); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Authenticate(%q) = %q, %v; want ErrInvalidToken", token, p, err)
		}
	}
}

func TestStaticTokens(t *testing.T) {
	path := writeTokenFile(t, "", "# the tokens of the team\n\n  "+alpha+"  \r\n\t# "+gamma+"\n"+beta)
	s, err := NewStaticTokens(path, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewStaticTokens: %v", err)
	}
	checkTokens(t, s, map[string]identity.Principal{alpha: alphaID, beta: betaID},
		gamma, "", "wrong", alpha[:len(alpha)-1], alpha+"f", " "+alpha, "# the tokens of the team")
}

func TestNewStaticTokensRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string // "" for no file
		wantErr string
	}{
		{"no file", "", "no such file"},
		{"empty file", "\n", "holds no token"},
		{"only comments", "# " + alpha + "\n  # another\n", "holds no token"},
		{"not a bearer token", alpha + "\nsecret with spaces\n", `:2: not a bearer token`},
		{"quote in token", `secret"quoted` + "\n", `:1: not a bearer token`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i)))
			if tt.content != "" {
				writeTokenFile(t, path, tt.content)
			}
			s, err := NewStaticTokens(path, zaptest.NewLogger(t))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("NewStaticTokens = %v, %v; want an error naming the file with %q", s, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q tells the token", err)
			}
		})
	}
}

func TestStaticTokensReload(t *testing.T) {
	path := writeTokenFile(t, "", alpha+"\n"+beta+"\n")
	s, err := NewStaticTokens(path, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewStaticTokens: %v", err)
	}
	writeTokenFile(t, path, beta+"\n"+gamma+"\n")
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	checkTokens(t, s, map[string]identity.Principal{beta: betaID, gamma: gammaID}, alpha)

	// A failed reload keeps the tokens.
	writeTokenFile(t, path, "# all gone\n")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "holds no token") {
		t.Fatalf("Reload of an empty file: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("Reload of a removed file succeeded")
	}
	checkTokens(t, s, map[string]identity.Principal{beta: betaID, gamma: gammaID}, alpha)
}

// TestStaticTokensConcurrentReload is for the race detector.
func TestStaticTokensConcurrentReload(t *testing.T) {
	path := writeTokenFile(t, "", alpha+"\n")
	s, err := NewStaticTokens(path, nil)
	if err != nil {
		t.Fatalf("NewStaticTokens: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if p, err := s.Authenticate(context.Background(), alpha); p != alphaID || err != nil {
					t.Errorf("Authenticate = %q, %v", p, err)
					return
				}
			}
		})
	}
	for range 20 {
		if err := s.Reload(); err != nil {
			t.Errorf("Reload: %v", err)
		}
	}
	wg.Wait()
}
