package supervisor

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// A cleaner of caches, or a user, may remove the cache directory under a
// running server: the next worker's start rebuilds it, says why, and calls
// go on being served.
func TestARuntimeRemovedUnderTheServerIsRebuilt(t *testing.T) {
	cache := t.TempDir()
	var mu sync.Mutex
	var warnings []string
	hook := zap.Hooks(func(e zapcore.Entry) error {
		if e.Level >= zapcore.WarnLevel {
			mu.Lock()
			warnings = append(warnings, e.Message)
			mu.Unlock()
		}
		return nil
	})
	s := start(t, Config{Workers: 1, CacheDir: cache}, zaptest.WrapOptions(hook))
	if res, _ := run(t, s, "'before'"); res.Status != StatusSuccess {
		t.Fatalf("a call before the removal: %+v", res)
	}
	// Removed while the server does nothing with it: a worker starting at
	// the same time would rebuild it while it is being removed.
	deadline := time.Now().Add(20 * time.Second)
	for h := s.Health(); h.Warm != 1 || h.Starting != 0; h = s.Health() {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not settle: %+v", h)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling of the pool's state
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	// The first call may find a worker that started before the removal;
	// the one after it needs a worker started after it.
	for _, code := range []string{"'after'", "'rebuilt'"} {
		start := time.Now()
		if res, _ := run(t, s, code); res.Status != StatusSuccess {
			t.Fatalf("a call after the removal: %+v", res)
		}
		t.Logf("%s served in %v", code, time.Since(start).Round(time.Millisecond))
	}
	mu.Lock()
	defer mu.Unlock()
	said := strings.Join(warnings, "\n")
	if !strings.Contains(said, "a file of the Python runtime is gone; rebuilding the runtime") {
		t.Errorf("no warning said why the runtime was rebuilt; warnings:\n%s", said)
	}
	if _, err := os.Stat(s.rt.Load().entry); err != nil {
		t.Errorf("the rebuilt runtime lacks its worker program: %v", err)
	}
}
