package packages

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// age sets the modification time of path to long ago.
func age(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// recent reports whether path was modified in the last minute.
func recent(t *testing.T, path string) bool {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(info.ModTime()) < time.Minute
}

// TestFetchHoldsAndMarksItsEntry: no prune removes a file while it is
// downloaded, and a fetch marks the file used, downloaded or found.
func TestFetchHoldsAndMarksItsEntry(t *testing.T) {
	data := []byte("the bytes of a wheel")
	var requests atomic.Int32
	started := make(chan struct{})
	var startOnce sync.Once
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		startOnce.Do(func() { close(started) })
		// Half now, so that the entry has bytes on disk while it is held.
		_, _ = w.Write(data[:10])
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write(data[10:])
	}))
	defer srv.Close()
	root := t.TempDir()
	c, err := NewCache(filepath.Join(root, "packages"), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cachedir.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	f := PlanFile{Name: "w", Version: "1", Filename: "w-1-py3-none-any.whl", Source: srv.URL + "/w-1-py3-none-any.whl",
		SHA256: pt.SHA256(data), Size: int64(len(data)), Origin: OriginIndex}
	entry := filepath.Dir(c.Path(f.SHA256, f.Filename))

	fetched := make(chan error, 1)
	go func() {
		_, err := c.FetchFile(testContext(t), f)
		fetched <- err
	}()
	<-started
	for deadline := time.Now().Add(10 * time.Second); ; {
		l, err := d.List(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Entries) == 1 && l.Entries[0].Size > 0 {
			if !l.Entries[0].InUse {
				t.Error("the entry is not in use during its download")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the download wrote nothing: %+v", l.Entries)
		}
		time.Sleep(10 * time.Millisecond) // bounded by the deadline
	}
	res, err := d.Prune(testContext(t), 1, cachedir.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || len(res.Spared) != 1 || res.Spared[0].Reason != cachedir.InUse {
		t.Errorf("prune during the download: removed %v, spared %v; want the entry in use", res.Removed, res.Spared)
	}
	close(release)
	if err := <-fetched; err != nil {
		t.Fatal(err)
	}
	l, err := d.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Path != entry || l.Entries[0].InUse {
		t.Fatalf("after the fetch: %+v, want %s, not in use", l.Entries, entry)
	}

	// Found in the cache, it is marked used too.
	age(t, entry)
	if _, err := c.FetchFile(testContext(t), f); err != nil {
		t.Fatal(err)
	}
	if !recent(t, entry) {
		t.Error("a fetch from the cache did not mark the entry used")
	}
	if requests.Load() != 1 {
		t.Errorf("%d downloads, want 1", requests.Load())
	}
	res, err = d.Prune(testContext(t), 1, cachedir.PruneOptions{KeepRecent: time.Hour})
	if err != nil || len(res.Removed) != 0 {
		t.Errorf("a recent entry was pruned: %v, %v", res.Removed, err)
	}

	// Pruned, it is downloaded again.
	age(t, entry)
	if res, err := d.Prune(testContext(t), 1, cachedir.PruneOptions{KeepRecent: time.Hour}); err != nil || len(res.Removed) != 1 {
		t.Fatalf("prune of an old entry: %+v, %v", res, err)
	}
	if _, err := c.FetchFile(testContext(t), f); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != 2 {
		t.Errorf("%d downloads, want 2", requests.Load())
	}
}

// TestLoadProjectMarksThePage: an index page read for offline use is marked
// used, so that prunes keep the pages that are read.
func TestLoadProjectMarksThePage(t *testing.T) {
	c := newTestCache(t, CacheOptions{})
	index := "https://pypi.example/simple/"
	if err := c.saveProject(index, &Project{Name: "six"}); err != nil {
		t.Fatal(err)
	}
	page := c.projectPath(index, "six")
	age(t, page)
	if _, err := c.loadProject(index, "six"); err != nil {
		t.Fatal(err)
	}
	if !recent(t, page) {
		t.Error("reading the page did not mark it used")
	}
}

// TestLoadAnyProjectTakesTheLastUsed: offline, a project's page kept from
// any index serves, the one used last when there are several.
func TestLoadAnyProjectTakesTheLastUsed(t *testing.T) {
	c := newTestCache(t, CacheOptions{})
	if _, err := c.loadAnyProject("six"); err != errNotFound {
		t.Fatalf("empty cache: %v, want errNotFound", err)
	}
	for _, index := range []string{"https://old.example/simple/", "https://new.example/simple/"} {
		if err := c.saveProject(index, &Project{Name: "six", Files: []IndexFile{{Filename: index}}}); err != nil {
			t.Fatal(err)
		}
	}
	age(t, c.projectPath("https://new.example/simple/", "six"))
	p, err := c.loadAnyProject("Six")
	if err != nil {
		t.Fatal(err)
	}
	if p.Files[0].Filename != "https://old.example/simple/" {
		t.Errorf("got the page of %s, want the one used last", p.Files[0].Filename)
	}
	if !recent(t, c.projectPath("https://old.example/simple/", "six")) {
		t.Error("reading the page did not mark it used")
	}
}
