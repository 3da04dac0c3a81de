package runtimefiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

func TestSweepRemovesOnlyRunDirsOfServersThatAreGone(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, lock bool, age time.Duration) string {
		t.Helper()
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(dir, "worker-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, runDirLock), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := mk(RunDirPrefix+"gone", true, 0)
	live := mk(RunDirPrefix+"live", true, 0)
	held := flock.New(filepath.Join(live, runDirLock))
	if ok, err := held.TryLock(); !ok || err != nil {
		t.Fatalf("lock the live server's directory: %v", err)
	}
	defer held.Unlock()
	starting := mk(RunDirPrefix+"starting", false, time.Minute)
	stale := mk(RunDirPrefix+"stale", false, 2*unlockedGrace)
	other := mk("someone-else", true, 0)

	sweepRunDirs(base, zaptest.NewLogger(t))

	for dir, want := range map[string]bool{gone: false, live: true, starting: true, stale: false, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v after the sweep, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}

func TestRunDirIsLockedWhileOpen(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // os.TempDir on Unix; TMP and TEMP on Windows
	t.Setenv("TMP", os.Getenv("TMPDIR"))
	t.Setenv("TEMP", os.Getenv("TMPDIR"))
	run, err := OpenRunDir(zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if abandoned(run.path) {
		t.Error("an open run directory counts as abandoned")
	}
	sweepRunDirs(filepath.Dir(run.path), zaptest.NewLogger(t))
	if _, err := os.Stat(run.path); err != nil {
		t.Errorf("the sweep removed a live server's directory: %v", err)
	}
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run.path); !os.IsNotExist(err) {
		t.Errorf("the run directory is still there after close: %v", err)
	}
}

// A Unix socket's path is short: sun_path holds 104 bytes on macOS, whose
// own temporary directory leaves a run directory 9 of them to spare, and 108
// on Linux. Under a longer TMPDIR the bridge must still listen.
func TestRunDirHoldsTheBridgeSocketUnderALongTMPDIR(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long) // os.TempDir on Unix; TMP and TEMP on Windows
	t.Setenv("TMP", long)
	t.Setenv("TEMP", long)
	run, err := OpenRunDir(zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	b, err := bridge.Listen(zaptest.NewLogger(t), 1<<20, run.BridgeSocket())
	if err != nil {
		t.Fatalf("the bridge in run directory %s: %v", run.path, err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}
