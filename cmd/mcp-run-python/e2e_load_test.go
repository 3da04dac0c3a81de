package main_test

// Load held: many clients in a closed loop on a few workers all get their
// results; past the queue's bound, a clear "busy" answer. The benchmark
// BenchmarkLoad reports the latencies at 1×, 4× and 16× the worker count.
//
//	go test ./cmd/mcp-run-python/ -run Load -count=1 -v

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// loadResult is what a load run saw.
type loadResult struct {
	latencies []time.Duration // of the calls that succeeded
	failures  []string        // the texts of the others
	elapsed   time.Duration
}

// runLoad makes clients clients of tg (their tokens taken in turn from
// tokens, if any), each calling `1+1` calls times in a closed loop: a call
// as soon as its previous answer came. A call that hangs fails after
// callTimeout.
func runLoad(t testing.TB, tg *target, clients, calls int, tokens ...string) loadResult {
	t.Helper()
	cs := make([]*client.Client, clients)
	for i := range cs {
		target := tg
		if len(tokens) > 0 {
			target = tg.as(tokens[i%len(tokens)])
		}
		cs[i] = target.connectProtocol(t, e2eProtocol).Client
	}
	var mu sync.Mutex
	var res loadResult
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range cs {
		wg.Go(func() {
			for range calls {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				began := time.Now()
				r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"python_code": "1+1"}}})
				took := time.Since(began)
				cancel()
				text, _ := onlyText(r)
				mu.Lock()
				switch {
				case err != nil:
					res.failures = append(res.failures, err.Error())
				case r.IsError || !strings.HasPrefix(text, "<status>success</status>"):
					res.failures = append(res.failures, text)
				default:
					res.latencies = append(res.latencies, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// TestLoadHeld: 16 clients, two principals, in a closed loop on 2 workers:
// every call gets its result, as the queue is bounded by the wait, not by
// a count.
func TestLoadHeld(t *testing.T) {
	s := setup(t)
	const aliceToken, bobToken = "alice-load-0123456789abcdef01234", "bob-load-0123456789abcdef0123456"
	tg := startTarget(t, s, modeStateless, "--workers", "2", "--auth-token-file", tokenFile(t, aliceToken, bobToken))
	res := runLoad(t, tg, 16, 3, aliceToken, bobToken)
	if len(res.failures) > 0 || len(res.latencies) != 48 {
		t.Errorf("%d of 48 calls succeeded; failures: %q", len(res.latencies), res.failures)
	}
	t.Logf("48 calls of 16 clients on 2 workers in %s: p50 %s, p99 %s", res.elapsed.Round(time.Millisecond),
		percentile(res.latencies, 0.5).Round(time.Millisecond), percentile(res.latencies, 0.99).Round(time.Millisecond))
}

// TestLoadBusy: past the bound, a call is refused at once with the wait it
// would have needed.
func TestLoadBusy(t *testing.T) {
	s := setup(t)
	tg := startTarget(t, s, modeStateless, "--workers", "1", "--queue-timeout", "2s")
	c := tg.connect(t)
	// Each call holds the one worker for a second: the third waiting call
	// would wait past 2 s.
	sleeper := "import time\ntime.sleep(1)"
	c.expectRun(t, sleeper, "<status>success</status>")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var busy []string
	for range 6 {
		wg.Go(func() {
			res, text := c.callTool(t, map[string]any{"python_code": sleeper})
			if res.IsError {
				mu.Lock()
				busy = append(busy, text)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(busy) == 0 {
		t.Fatal("six one-second calls on one worker with --queue-timeout 2s: none refused")
	}
	t.Logf("%d of 6 refused, such as: %s", len(busy), busy[0])
	for _, text := range busy {
		if !strings.HasPrefix(text, "the server is busy: ") || !strings.Contains(text, "try again later") ||
			(!strings.Contains(text, "it would wait about") && !strings.Contains(text, "none became free within the queue timeout of 2s")) {
			t.Errorf("a refused call: %q, want a busy error that says how long it would wait", text)
		}
	}
	c.expectWorks(t)
}

func BenchmarkLoad(b *testing.B) {
	s := benchSetup(b)
	const workers = 2
	tg := startTarget(b, s, modeStateless, "--workers", "2")
	for _, level := range []struct {
		factor, calls int
	}{{1, 12}, {4, 6}, {16, 3}} {
		clients := level.factor * workers
		res := runLoad(b, tg, clients, level.calls)
		n := clients * level.calls
		name := func(what string) string {
			return what + " at " + strconv.Itoa(level.factor) + "× the workers (" + strconv.Itoa(clients) + " clients)"
		}
		if len(res.latencies) > 0 {
			report(b, name("`1+1` p50"), ms(percentile(res.latencies, 0.5)), "ms", "")
			report(b, name("`1+1` p99"), ms(percentile(res.latencies, 0.99)), "ms", "")
		}
		report(b, name("calls that failed, of "+strconv.Itoa(n)), float64(len(res.failures)), "errors", "0")
		report(b, name("throughput"), float64(len(res.latencies))/res.elapsed.Seconds(), "calls/s", "")
	}
}

// TestLoadFairShare: one principal's burst cannot take every worker. Alice
// sends four two-second calls at once on 2 workers; Bob's call a moment
// later runs at once on the worker her share leaves, rather than after her
// queue.
func TestLoadFairShare(t *testing.T) {
	s := setup(t)
	const aliceToken, bobToken = "alice-fair-0123456789abcdef01234", "bob-fair-0123456789abcdef0123456"
	tg := startTarget(t, s, modeStateless, "--workers", "2", "--auth-token-file", tokenFile(t, aliceToken, bobToken))
	alice, bob := tg.as(aliceToken).connect(t), tg.as(bobToken).connect(t)
	bob.expectWorks(t) // both workers warm again after this
	time.Sleep(time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { alice.callTool(t, map[string]any{"python_code": "import time\ntime.sleep(2)"}) })
	}
	time.Sleep(300 * time.Millisecond) // her calls are in
	start := time.Now()
	bob.expectRun(t, "1+1", "<status>success</status>\n<return_value>\n2\n</return_value>")
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("bob's call took %s behind alice's burst, want it served at once on the worker her share leaves", took)
	}
	wg.Wait()
}
