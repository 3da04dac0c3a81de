package supervisor

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// A warm worker that was stopped (SIGSTOP, a debugger, a frozen cgroup)
// must not get a call: it would hold it until the time limit for code that
// never started. It is found out by its silence and replaced.
func TestAFrozenWarmWorkerIsReplaced(t *testing.T) {
	s := start(t, Config{Workers: 2})
	deadline := time.Now().Add(20 * time.Second)
	for s.Health().Warm != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pool never had two warm workers: %+v", s.Health())
		}
		time.Sleep(20 * time.Millisecond) // bounded polling of the pool's state
	}
	pids := denoChildren(t)
	if len(pids) != 2 {
		t.Fatalf("deno children %v, want the two warm workers", pids)
	}
	frozen := pids[0]
	if err := syscall.Kill(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(frozen, syscall.SIGKILL) })

	// Calls take warm workers in turn: two calls meet the frozen one.
	for _, code := range []string{"'first'", "'second'"} {
		start := time.Now()
		res, _ := run(t, s, code)
		if res.Status != StatusSuccess {
			t.Errorf("%s: %+v", code, res)
		}
		d := time.Since(start)
		if d > pingTimeout+5*time.Second {
			t.Errorf("%s took %v", code, d)
		}
		t.Logf("%s served in %v", code, d.Round(time.Millisecond))
	}
	for slices.Contains(denoChildren(t), frozen) {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("the frozen worker %d was never replaced", frozen)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling for its end
	}
}
