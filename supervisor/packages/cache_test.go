package packages

import (
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"

	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkLocal asserts the fetched files are whole and in the cache.
func checkLocal(t *testing.T, c *Cache, plan Plan, files []LocalFile) {
	t.Helper()
	if len(files) != len(plan.Files) {
		t.Fatalf("%d files for a plan of %d", len(files), len(plan.Files))
	}
	for i, lf := range files {
		if lf.PlanFile.Filename != plan.Files[i].Filename {
			t.Errorf("file %d is %s, want %s (plan order)", i, lf.Filename, plan.Files[i].Filename)
		}
		if want := c.Path(lf.SHA256, lf.Filename); lf.Path != want || !strings.HasPrefix(lf.Path, c.Dir()) {
			t.Errorf("%s: path %s, want %s", lf.Filename, lf.Path, want)
		}
		if got, err := hashFile(lf.Path); err != nil || got != lf.SHA256 {
			t.Errorf("%s: sha256 %s, %v; want %s", lf.Filename, got, err, lf.SHA256)
		}
	}
}

// partFiles lists leftover temporary files in the cache.
func partFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".part-") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

func TestFetch(t *testing.T) {
	repo := standardRepo(t)
	for _, v := range []pt.Variant{{JSON: true, Metadata: true}, {JSON: false}, {JSON: true, Dir: true}} {
		t.Run(v.String(), func(t *testing.T) {
			c := newTestCache(t, CacheOptions{})
			r := newTestResolver(t, repo, v, c)
			plan, err := r.Resolve(testContext(t), []string{"beta[fast]", "builtin-native", "pnative"})
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			var mu sync.Mutex
			files, err := c.WithProgress(func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }).Fetch(testContext(t), plan)
			if err != nil {
				t.Fatal(err)
			}
			checkLocal(t, c, plan, files)
			if len(lines) != len(plan.Files) {
				t.Errorf("progress: %q", lines)
			}
			// A second fetch is all hits.
			again, err := c.Fetch(testContext(t), plan)
			if err != nil {
				t.Fatal(err)
			}
			checkLocal(t, c, plan, again)
			if p := partFiles(t, c.Dir()); len(p) != 0 {
				t.Errorf("leftover temporary files: %v", p)
			}
		})
	}
}

func TestHashMismatch(t *testing.T) {
	repo := standardRepo(t)
	wrong := strings.Repeat("0", 64)
	for _, v := range []pt.Variant{{JSON: true, Metadata: true}, {JSON: true}, {Metadata: true, Dir: true}, {Dir: true}} {
		t.Run(v.String(), func(t *testing.T) {
			c := newTestCache(t, CacheOptions{})
			r := newTestResolver(t, repo, v, c)
			plan, err := r.Resolve(testContext(t), []string{"bad"})
			if err == nil {
				// With PEP 658 metadata the wheel is first downloaded here.
				if !v.Metadata {
					t.Fatal("resolution read the wheel's metadata without checking its hash")
				}
				_, err = c.Fetch(testContext(t), plan)
			}
			e := wantKind(t, err, KindHashMismatch)
			if !strings.Contains(e.Error(), "bad-1.0-py3-none-any.whl has sha256 ") ||
				!strings.Contains(e.Error(), "but the package index says "+wrong+"; the file was discarded") {
				t.Errorf("message: %v", e)
			}
			if _, err := os.Stat(filepath.Join(c.Dir(), "wheels", "sha256", wrong)); !os.IsNotExist(err) {
				t.Errorf("something was kept for the bad file: %v", err)
			}
			if p := partFiles(t, c.Dir()); len(p) != 0 {
				t.Errorf("leftover temporary files: %v", p)
			}
		})
	}
}

func TestHashMismatchLock(t *testing.T) {
	tl := makeLock(t)
	loc := tl.location(t, true)
	// The file on the host differs from what the lock promises.
	if err := os.WriteFile(filepath.Join(loc, "libfoo-1.0.zip"), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(Config{Lock: tl.parsed(t), PyodideURL: loc})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Resolve(testContext(t), []string{"builtin"})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCache(t, CacheOptions{})
	_, err = c.Fetch(testContext(t), plan)
	e := wantKind(t, err, KindHashMismatch)
	if e.Requirement != "libfoo==1.0" || !strings.Contains(e.Reason, "but the Pyodide lock file says") {
		t.Errorf("error: %v", e)
	}
}

func TestOffline(t *testing.T) {
	repo := standardRepo(t)
	for _, metadata := range []bool{true, false} {
		v := pt.Variant{JSON: true, Metadata: metadata}
		t.Run(v.String(), func(t *testing.T) {
			dir := t.TempDir()
			tl := makeLock(t)
			srv, _ := repo.Serve(t, v, 0)
			pyodide := tl.location(t, false)
			online, err := NewCache(dir, CacheOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Lock: tl.parsed(t), PyodideURL: pyodide, IndexURL: srv.URL + "/simple/", Cache: online}
			r, err := NewResolver(cfg)
			if err != nil {
				t.Fatal(err)
			}
			reqs := []string{"beta", "builtin"}
			plan, err := r.Resolve(testContext(t), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := online.Fetch(testContext(t), plan); err != nil {
				t.Fatal(err)
			}
			srv.Close() // from here on nothing may reach the index

			offline, err := NewCache(dir, CacheOptions{Offline: true})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Cache = offline
			cfg.PyodideURL = "http://127.0.0.1:1/unreachable/"
			r, err = NewResolver(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Hit: resolution from kept index pages and cached wheels.
			plan2, err := r.Resolve(testContext(t), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(planNames(plan2), " ") != strings.Join(planNames(plan), " ") {
				t.Fatalf("offline plan %v, online plan %v", planNames(plan2), planNames(plan))
			}
			files, err := offline.Fetch(testContext(t), plan2)
			if err != nil {
				t.Fatal(err)
			}
			checkLocal(t, offline, plan2, files)

			// Miss: an index page never fetched.
			_, err = r.Resolve(testContext(t), []string{"gamma"})
			e := wantKind(t, err, KindOfflineMiss)
			if !strings.Contains(e.Error(), "offline mode, and the package cache has no index page for gamma") {
				t.Errorf("message: %v", e)
			}
			// Miss: a file never fetched.
			_, err = offline.FetchFile(testContext(t), PlanFile{
				Name: "gamma", Version: "1.0", Filename: "gamma-1.0-py3-none-any.whl",
				Source: "http://127.0.0.1:1/gamma-1.0-py3-none-any.whl", SHA256: strings.Repeat("a", 64), Origin: OriginIndex,
			})
			e = wantKind(t, err, KindOfflineMiss)
			if e.Requirement != "gamma==1.0" || !strings.Contains(e.Error(), "offline mode, and gamma-1.0-py3-none-any.whl is not in the package cache") {
				t.Errorf("message: %v", e)
			}
		})
	}
}

func TestConcurrentFetch(t *testing.T) {
	repo := standardRepo(t)
	v := pt.Variant{JSON: true}
	srv, counter := repo.Serve(t, v, 100*time.Millisecond)
	var f *pt.File
	for _, x := range repo.Files {
		if x.Filename == "alpha-2.0-py3-none-any.whl" {
			f = x
		}
	}
	pf := PlanFile{
		Name: "alpha", Version: "2.0", Filename: f.Filename, Source: srv.URL + "/files/" + f.Filename,
		SHA256: f.SHA256, Size: int64(len(f.Data)), Origin: OriginIndex,
	}
	path := "/files/" + f.Filename

	t.Run("one process", func(t *testing.T) {
		c := newTestCache(t, CacheOptions{})
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		paths := make([]string, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				lf, err := c.FetchFile(testContext(t), pf)
				errs[i], paths[i] = err, lf.Path
			}()
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || paths[i] != c.Path(pf.SHA256, pf.Filename) {
				t.Fatalf("goroutine %d: %q, %v", i, paths[i], errs[i])
			}
		}
		if got := counter.Get(path); got != 1 {
			t.Fatalf("%d downloads, want exactly 1", got)
		}
	})

	t.Run("two processes", func(t *testing.T) {
		// Two Cache values on one directory share nothing in memory, like
		// two processes: both may download, and the atomic rename leaves
		// one whole file.
		dir := t.TempDir()
		before := counter.Get(path)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for range 2 {
			c, err := NewCache(dir, CacheOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c.FetchFile(testContext(t), pf)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := counter.Get(path) - before; got < 1 || got > 2 {
			t.Fatalf("%d downloads, want 1 or 2", got)
		}
		c, _ := NewCache(dir, CacheOptions{})
		if got, err := hashFile(c.Path(pf.SHA256, pf.Filename)); err != nil || got != pf.SHA256 {
			t.Fatalf("cached file: %s, %v", got, err)
		}
		if p := partFiles(t, dir); len(p) != 0 {
			t.Errorf("leftover temporary files: %v", p)
		}
	})
}

func TestCacheRepairsDamagedEntry(t *testing.T) {
	repo := standardRepo(t)
	srv, counter := repo.Serve(t, pt.Variant{JSON: true}, 0)
	f := repo.Files[0]
	pf := PlanFile{Name: "alpha", Version: "1.0", Filename: f.Filename, Source: srv.URL + "/files/" + f.Filename, SHA256: f.SHA256}
	c := newTestCache(t, CacheOptions{})
	final := c.Path(f.SHA256, f.Filename)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(final, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := c.FetchFile(testContext(t), pf)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := hashFile(lf.Path); got != f.SHA256 || counter.Get("/files/"+f.Filename) != 1 {
		t.Fatalf("damaged entry not replaced: %s", got)
	}
	// A restarted process (a new Cache) trusts the entry after one check.
	c2, _ := NewCache(c.Dir(), CacheOptions{Offline: true})
	if _, err := c2.FetchFile(testContext(t), pf); err != nil {
		t.Fatal(err)
	}
}

func TestFetchErrors(t *testing.T) {
	repo := standardRepo(t)
	srv, _ := repo.Serve(t, pt.Variant{JSON: true}, 0)
	f := repo.Files[0]
	c := newTestCache(t, CacheOptions{})
	tests := []struct {
		name string
		pf   PlanFile
		kind Kind
	}{
		{"no sha256", PlanFile{Name: "a", Version: "1", Filename: "a-1-py3-none-any.whl", Source: srv.URL + "/files/x"}, KindInvalid},
		{"bad file name", PlanFile{Name: "a", Version: "1", Filename: "../evil.whl", Source: srv.URL + "/files/x", SHA256: f.SHA256}, KindInvalid},
		{"missing on the server", PlanFile{Name: "a", Version: "1", Filename: "a-1-py3-none-any.whl", Source: srv.URL + "/files/nope.whl", SHA256: f.SHA256}, KindNotFound},
		{"server down", PlanFile{Name: "a", Version: "1", Filename: "a-1-py3-none-any.whl", Source: "http://127.0.0.1:1/a.whl", SHA256: f.SHA256}, KindUnreachable},
		{"wrong size", PlanFile{Name: "alpha", Version: "1.0", Filename: f.Filename, Source: srv.URL + "/files/" + f.Filename, SHA256: f.SHA256, Size: 3}, KindHashMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.FetchFile(testContext(t), tc.pf)
			wantKind(t, err, tc.kind)
			// A failed download leaves no empty directory, which the
			// cache command would list as a wheel of 0 B.
			if _, err := os.Stat(filepath.Join(c.Dir(), "wheels", "sha256", tc.pf.SHA256)); tc.pf.SHA256 != "" && !os.IsNotExist(err) {
				t.Errorf("a directory was kept for the failed download: %v", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		pf := PlanFile{Name: "alpha", Version: "1.0", Filename: f.Filename, Source: srv.URL + "/files/" + f.Filename, SHA256: f.SHA256}
		if _, err := c.FetchFile(ctx, pf); err != context.Canceled {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}
