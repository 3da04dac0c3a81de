// Package cachedirtest makes cache entries, and the files in them, for tests.
package cachedirtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PutEntry writes a file of size bytes at rel in root (an entry's member is
// its directory, or the file itself for .bin and .json) and dates the
// member age ago. It returns the member's path.
func PutEntry(t testing.TB, root, rel string, size int, age time.Duration) string {
	t.Helper()
	member := filepath.Join(root, filepath.FromSlash(rel))
	file := member
	if !strings.HasSuffix(rel, ".bin") && !strings.HasSuffix(rel, ".json") {
		file = filepath.Join(member, "data")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	for _, p := range []string{file, member} {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return member
}

// Write writes text to path, making its directory.
func Write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
