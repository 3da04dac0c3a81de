package supervisor

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

var soakCalls = flag.Int("soak.calls", 0, "calls of the soak test; `make soak` runs 2000 (0 skips it: it takes minutes)")

// TestSoak makes many calls, each in a fresh worker, and checks that nothing
// accumulates: processes, file descriptors, the supervisor's memory.
func TestSoak(t *testing.T) {
	if *soakCalls == 0 {
		t.Skip("the soak test runs with -soak.calls N; `make soak` runs it")
	}
	const workers = 2
	// Warnings and errors only: 2 000 workers' debug lines would bury the
	// progress lines below.
	s := start(t, Config{Workers: workers, OutputLimit: 1 << 20}, zaptest.Level(zap.WarnLevel))
	var heapAt []uint64 // after each tenth of the calls
	fdsBefore := openFDs(t)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				code := fmt.Sprintf("print('call %d')\n%d * 2", i, i)
				res, lines := run(t, s, code)
				if res.Status != StatusSuccess || string(res.ReturnValue) != fmt.Sprint(2*i) || len(lines) != 1 {
					t.Errorf("call %d: %+v", i, res)
				}
			}
		})
	}
	for i := range *soakCalls {
		next <- i
		if (i+1)%(*soakCalls/10) == 0 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heapAt = append(heapAt, m.HeapInuse)
			t.Logf("%d calls: heap %.1f MiB, %d fds, %d deno processes", i+1, float64(m.HeapInuse)/(1<<20), openFDs(t), len(denoChildren(t)))
		}
	}
	close(next)
	wg.Wait()

	if n := len(denoChildren(t)); n > workers {
		t.Errorf("%d deno processes after the calls, want at most %d", n, workers)
	}
	// The bridge's sockets and the workers' pipes come and go with them.
	if after := openFDs(t); after > fdsBefore+4*workers {
		t.Errorf("file descriptors: %d before, %d after", fdsBefore, after)
	}
	// Flat: the last tenth uses no more than the second tenth plus slack
	// (the first includes warming up).
	if first, last := heapAt[1], heapAt[len(heapAt)-1]; last > first+8<<20 {
		t.Errorf("supervisor heap grew from %d to %d bytes", first, last)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := denoChildren(t); len(left) > 0 {
		t.Errorf("deno processes left after Close: %v", left)
	}
}
