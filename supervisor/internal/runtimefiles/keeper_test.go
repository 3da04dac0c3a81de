package runtimefiles

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

// fakeBuilds is what a Keeper's builds do in these tests: no files,
// no deno; each build waits for release, then fails with fail or
// succeeds.
type fakeBuilds struct {
	builds, rebuilds, starts atomic.Int32
	release                  chan struct{}

	mu   sync.Mutex
	fail error
}

// keeper returns a keeper over fb's builds, and the cancel of its context
// (the supervisor's Close).
func (fb *fakeBuilds) keeper(t *testing.T) (*Keeper[string], context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := NewKeeper(ctx, new(tracker.Tracker), zap.NewNop(), Builds[string]{
		Build: func(ctx context.Context, progress func(string)) (*Ready[string], error) {
			fb.builds.Add(1)
			progress("building")
			select {
			case <-fb.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			fb.mu.Lock()
			defer fb.mu.Unlock()
			if fb.fail != nil {
				return nil, fb.fail
			}
			return &Ready[string]{Files: &Files{Key: "first"}}, nil
		},
		Started: func(*Ready[string]) { fb.starts.Add(1) },
		Rebuild: func(ctx context.Context, pkgs string, progress func(string)) (*Files, error) {
			fb.rebuilds.Add(1)
			<-fb.release
			return &Files{Key: "rebuilt"}, nil
		},
		Remake: func(*Files) {},
	})
	return k, cancel
}

// Calls wait for the one build under way; a failed build is tried again by
// the next call; the runtime is published, and what needs it started, once.
func TestRuntimeKeeperEnsure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBuilds{release: make(chan struct{}), fail: errors.New("no deno")}
		k, cancel := fb.keeper(t)
		defer cancel()

		var steps []string
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() {
				progress := func(string) {}
				if i == 0 {
					progress = func(s string) { steps = append(steps, s) }
				}
				_, errs[i] = k.Ensure(context.Background(), progress)
			})
		}
		synctest.Wait()
		if n := fb.builds.Load(); n != 1 {
			t.Fatalf("%d builds for three waiting calls, want one", n)
		}
		if k.Current() != nil {
			t.Error("a runtime is out before its build ended")
		}
		close(fb.release)
		wg.Wait()
		for _, err := range errs {
			if err == nil || err.Error() != "no deno" {
				t.Errorf("ensure = %v, want the build's error", err)
			}
		}
		if len(steps) != 1 || steps[0] != "building" {
			t.Errorf("progress heard %q", steps)
		}

		fb.mu.Lock()
		fb.fail = nil
		fb.mu.Unlock()
		rt, err := k.Ensure(context.Background(), nil)
		if err != nil || rt == nil || rt != k.Current() {
			t.Fatalf("ensure after a failed build: %v, %v; want the runtime tried again", rt, err)
		}
		if again, _ := k.Ensure(context.Background(), nil); again != rt || fb.builds.Load() != 2 || fb.starts.Load() != 1 {
			t.Errorf("a second ensure: %d builds, %d starts; want the runtime as it is", fb.builds.Load(), fb.starts.Load())
		}
	})
}

// A call whose context ends stops waiting; the build goes on, and Close
// (the keeper's context) ends it, after which no build starts.
func TestRuntimeKeeperWaitAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBuilds{release: make(chan struct{})}
		k, cancel := fb.keeper(t)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := k.Ensure(ctx, nil)
			done <- err
		}()
		synctest.Wait()
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("ensure of a cancelled call = %v", err)
		}
		cancel()
		<-k.wg.Shut()
		if _, err := k.Ensure(context.Background(), nil); !errors.Is(err, tracker.ErrClosed) {
			t.Errorf("ensure after close = %v, want tracker.ErrClosed", err)
		}
		if n := fb.builds.Load(); n != 1 {
			t.Errorf("%d builds, want the one that Close stopped", n)
		}
	})
}

// Workers that find the same runtime broken wait for one rebuild and all
// get its result; a repair of a runtime already replaced rebuilds nothing.
func TestRuntimeKeeperRepair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBuilds{release: make(chan struct{})}
		close(fb.release)
		k, cancel := fb.keeper(t)
		defer cancel()
		broken, err := k.Ensure(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		fb.release = make(chan struct{})
		var wg sync.WaitGroup
		got := make([]*Ready[string], 3)
		for i := range got {
			wg.Go(func() { got[i], _ = k.Repair(context.Background(), broken, "a file") })
		}
		synctest.Wait()
		close(fb.release)
		wg.Wait()
		if n := fb.rebuilds.Load(); n != 1 {
			t.Errorf("%d rebuilds, want one", n)
		}
		for _, rt := range got {
			if rt == nil || rt != k.Current() || rt.Files.Key != "rebuilt" || rt.Pkgs != broken.Pkgs {
				t.Errorf("repair = %+v, want the rebuilt runtime, with the installer", rt)
			}
		}
		if broken.Files.Key != "first" {
			t.Error("the runtime a call holds changed")
		}
	})
}
