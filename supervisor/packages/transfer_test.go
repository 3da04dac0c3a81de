package packages

import (
	"sync"
	"testing"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// TestFetchTellsTransfers checks WithTransfer: each download tells its start
// at 0 bytes, then growing counts up to its size; a file in the cache tells
// nothing.
func TestFetchTellsTransfers(t *testing.T) {
	repo := standardRepo(t)
	c := newTestCache(t, CacheOptions{})
	r := newTestResolver(t, repo, pt.Variant{JSON: true, Metadata: true}, c)
	plan, err := r.Resolve(testContext(t), []string{"beta[fast]", "builtin-native", "pnative"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	told := map[string][]int64{}
	sizes := map[string]int64{}
	record := func(file string, bytes, size int64) {
		mu.Lock()
		defer mu.Unlock()
		told[file] = append(told[file], bytes)
		sizes[file] = size
	}
	if _, err := c.WithTransfer(record).Fetch(testContext(t), plan); err != nil {
		t.Fatal(err)
	}
	for _, f := range plan.Files {
		counts := told[f.Filename]
		if len(counts) < 2 || counts[0] != 0 {
			t.Errorf("%s: told %v, want 0 and then the bytes as they came", f.Filename, counts)
			continue
		}
		for i := 1; i < len(counts); i++ {
			if counts[i] <= counts[i-1] {
				t.Errorf("%s: told %v, want growing counts", f.Filename, counts)
			}
		}
		if last := counts[len(counts)-1]; sizes[f.Filename] > 0 && last != sizes[f.Filename] {
			t.Errorf("%s: last told %d of %d bytes", f.Filename, last, sizes[f.Filename])
		}
	}
	clear(told)
	if _, err := c.WithTransfer(record).Fetch(testContext(t), plan); err != nil {
		t.Fatal(err)
	}
	if len(told) != 0 {
		t.Errorf("files in the cache told transfers: %v", told)
	}
}
