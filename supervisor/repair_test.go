package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir/cachedirtest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// skipOpenFilesStay skips a test that removes the cache under a running
// server where that cannot be done: Windows removes no file that is open,
// such as the locks the server holds on what it uses, nor a directory that
// a process works in, as a worker does in the program's.
func skipOpenFilesStay(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows removes no open file: the cache cannot go under a running server")
	}
}

// A cleaner of caches, or a user, may remove the cache directory under a
// running server: the next worker's start rebuilds it, says why, and calls
// go on being served.
func TestARuntimeRemovedUnderTheServerIsRebuilt(t *testing.T) {
	skipOpenFilesStay(t)
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
	if _, err := os.Stat(s.runtime.Files().Entry); err != nil {
		t.Errorf("the rebuilt runtime lacks its worker program: %v", err)
	}
}

// The cache directory removed as a worker starts (rm -rf racing the
// server): the start that failed for it rebuilds the runtime and starts
// again, and the call that waits for that worker gets it.
func TestARuntimeRemovedAsAWorkerStartsIsRebuilt(t *testing.T) {
	skipOpenFilesStay(t)
	cache := t.TempDir()
	var armed atomic.Bool
	s := New(Config{Deno: testDeno(t), CacheDir: cache, Workers: 1, Timeout: 30 * time.Second}, zaptest.NewLogger(t))
	oneCallPerProcess(s) // the second call's worker is a new process
	launch := s.workers.Launch
	s.workers.Launch = func(cmd *exec.Cmd) (worker.Process, error) {
		if armed.CompareAndSwap(true, false) {
			// Between the start's check of the runtime's files and deno's
			// start: the worker's directory is gone as deno is started in it.
			if err := os.RemoveAll(cache); err != nil {
				t.Error(err)
			}
		}
		return launch(cmd)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Warmup(ctx, func(step string) { t.Log(step) }); err != nil {
		t.Fatal(err)
	}
	settle := func(what string, ok func(Health) bool) { t.Helper(); awaitHealth(t, s, what, ok) }
	settle("warmed up", func(h Health) bool { return h.Warm == 1 && h.Starting == 0 })
	// One call holds the only worker while another waits for the next,
	// whose start finds the cache gone.
	call := func(code string) <-chan error {
		done := make(chan error, 1)
		go func() {
			res, err := s.Run(ctx, Request{Code: code})
			if err == nil && res.Status != StatusSuccess {
				err = fmt.Errorf("%+v", res)
			}
			done <- err
		}()
		return done
	}
	first := call("import time\ntime.sleep(2)")
	settle("took the worker", func(h Health) bool { return h.Busy == 1 })
	armed.Store(true)
	second := call("'second'")
	settle("queued the second call", func(h Health) bool { return h.Waiting == 1 })
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
	removed := time.Now()
	if err := <-second; err != nil {
		t.Fatalf("the call waiting as the cache was removed: %v", err)
	}
	t.Logf("the call waiting as the cache was removed was served %v after", time.Since(removed).Round(time.Millisecond))
	if armed.Load() {
		t.Error("no worker started after the removal was armed")
	}
}

// awaitHealth polls s's health until ok, for at most a minute.
func awaitHealth(t *testing.T, s *Supervisor, what string, ok func(Health) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for h := s.Health(); !ok(h); h = s.Health() {
		if time.Now().After(deadline) {
			t.Fatalf("the pool never %s: %+v", what, h)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling of the pool's state
	}
}

// A code cache template that no worker can start from (a package's
// import-time code once filled it through the Cache API) is dropped and
// made again: when a worker's start finds it, and when a server starts
// with it in its cache.
func TestADamagedCodeCacheTemplateIsRemade(t *testing.T) {
	cache := t.TempDir()
	// Share the downloaded Pyodide; everything else in this cache is new.
	if err := os.Symlink(filepath.Join(testCache(t), "pyodide"), filepath.Join(cache, "pyodide")); err != nil {
		t.Fatal(err)
	}
	first := start(t, Config{Workers: 1, CacheDir: cache})
	oneCallPerProcess(first) // a new process finds the template damaged
	template := first.runtime.Files().CodeCache
	stored := filepath.Join(template, "location_data", "web_cache", "0123", "body")
	awaitHealth(t, first, "warmed up", func(h Health) bool { return h.Warm == 1 && h.Starting == 0 })
	cachedirtest.Write(t, stored, "stored by a package as its snapshot was made")
	// The first call may get the worker started before; the second needs
	// one started after.
	for _, code := range []string{"'before'", "'remade'"} {
		if res, _ := run(t, first, code); res.Status != StatusSuccess {
			t.Fatalf("a call with the template damaged: %+v", res)
		}
	}
	if _, err := os.Stat(filepath.Join(template, "location_data")); err == nil {
		t.Error("the damaged template is still there")
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	cachedirtest.Write(t, stored, "stored by a package as its snapshot was made")
	s := start(t, Config{Workers: 1, CacheDir: cache})
	if res, _ := run(t, s, "'restarted'"); res.Status != StatusSuccess {
		t.Fatalf("a call after a restart with the template damaged: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(template, "location_data")); err == nil {
		t.Error("the damaged template is still there after a restart")
	}
}
