//go:build unix

package auth

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

func TestStaticTokensFileMode(t *testing.T) {
	tests := []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o700, true},
		{0o640, true}, // a Kubernetes Secret with fsGroup
		{0o440, true},
		{0o604, false},
		{0o620, false},
		{0o602, false},
		{0o610, true},
		{0o644, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%#o", tt.mode), func(t *testing.T) {
			path := writeTokenFile(t, "", alpha+"\n")
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := NewStaticTokens(path, zaptest.NewLogger(t))
			if tt.ok {
				if err != nil {
					t.Fatalf("NewStaticTokens: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewStaticTokens succeeded")
			}
			for _, want := range []string{path, fmt.Sprintf("%#o", tt.mode), "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestStaticTokensReloadFileMode(t *testing.T) {
	path := writeTokenFile(t, "", alpha+"\n")
	s, err := NewStaticTokens(path, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewStaticTokens: %v", err)
	}
	writeTokenFile(t, path, beta+"\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Reload of a world-readable file: %v", err)
	}
	checkTokens(t, s, map[string]identity.Principal{alpha: alphaID}, beta)
}
