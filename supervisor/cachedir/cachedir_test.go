package cachedir

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// Names of entries of every kind, for the tests.
const (
	key1    = "0123456789abcdef"
	key2    = "fedcba9876543210"
	sha1hex = "1111111111111111111111111111111111111111111111111111111111111111"
	sha2hex = "2222222222222222222222222222222222222222222222222222222222222222"
)

// newDir returns a fresh cache directory.
func newDir(t *testing.T) Dir {
	t.Helper()
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// put makes the member rel (slash-separated) of an entry: a directory with
// one file of size bytes, or for a name ending in .bin or .json a file of
// size bytes; its modification time is age ago.
func put(t *testing.T, d Dir, rel string, size int, age time.Duration) string {
	t.Helper()
	path := filepath.Join(d.Root(), filepath.FromSlash(rel))
	file := path
	if !strings.HasSuffix(rel, snapshotExt) && !strings.HasSuffix(rel, pageExt) {
		file = filepath.Join(path, "sub", "data")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	for p := file; ; p = filepath.Dir(p) {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		if p == path {
			break
		}
	}
	return path
}

// exists reports whether the member rel exists.
func exists(d Dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(d.Root(), filepath.FromSlash(rel)))
	return err == nil
}

// names returns the entries' names.
func names(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

// listNames lists d and returns its entries' names, least recently used first.
func listNames(t *testing.T, d Dir) []string {
	t.Helper()
	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return names(l.Entries)
}

func hold(t *testing.T, d Dir, path string) *Hold {
	t.Helper()
	h, err := d.Hold(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func prune(t *testing.T, d Dir, limit int64, opts PruneOptions) PruneResult {
	t.Helper()
	res, err := d.Prune(context.Background(), limit, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestEntry(t *testing.T) {
	d := newDir(t)
	root := d.Root()
	tests := []struct {
		path string
		kind Kind
		name string // "" for no entry
	}{
		{"js/" + key1, Program, "js/" + key1},
		{"js/" + key1 + "/worker.ts", Program, "js/" + key1},
		{"pyodide/314.0.7/node_modules/.deno/pyodide@314.0.7/node_modules/pyodide", Pyodide, "pyodide/314.0.7"},
		{"snapshots/" + key1 + ".bin", Snapshot, "snapshots/" + key1 + ".bin"},
		{"codecache/" + key1, Snapshot, "snapshots/" + key1 + ".bin"},
		{"codecache/" + key1 + "/v8_code_cache_v2", Snapshot, "snapshots/" + key1 + ".bin"},
		{"packages/wheels/sha256/" + sha1hex, Wheel, "packages/wheels/sha256/" + sha1hex},
		{"packages/wheels/sha256/" + sha1hex + "/six-1.0-py3-none-any.whl", Wheel, "packages/wheels/sha256/" + sha1hex},
		{"packages/index/" + key1 + "/six.json", IndexPage, "packages/index/" + key1 + "/six.json"},

		{"", "", ""},
		{".lock", "", ""},
		{"not-a-directory", "", ""},
		{"deno/npm/registry.npmjs.org/pyodide/314.0.7", "", ""},
		{"files/1/abc", "", ""},
		{"js", "", ""},
		{"js/.tmp-123", "", ""},
		{"js/" + key1 + ".lock", "", ""},
		{"pyodide/.trash-314.0.7-abc", "", ""},
		{"snapshots/" + key1 + ".bin.lock", "", ""},
		{"snapshots/" + key1 + ".bin123456", "", ""}, // a temporary of natefinch/atomic
		{"snapshots/" + key1 + ".bin/x", "", ""},
		{"snapshots/NOTHEX.bin", "", ""},
		{"codecache/.tmp-123", "", ""},
		{"packages/wheels/sha256/" + sha1hex[:63], "", ""},
		{"packages/wheels/sha256/" + sha1hex + ".lock", "", ""},
		{"packages/index/" + key1 + "/.six.json", "", ""},
		{"packages/index/" + key1 + "/six.json12345", "", ""},
		{"packages/index/" + key1 + "/deep/six.json", "", ""},
		{"../elsewhere/js/" + key1, "", ""},
	}
	for _, tt := range tests {
		e, err := d.Entry(filepath.Join(root, filepath.FromSlash(tt.path)))
		if tt.name == "" {
			if !errors.Is(err, ErrNotEntry) {
				t.Errorf("Entry(%q) = %+v, %v; want ErrNotEntry", tt.path, e, err)
			}
			continue
		}
		want := Entry{Kind: tt.kind, Name: tt.name, Path: filepath.Join(root, filepath.FromSlash(tt.name))}
		if err != nil || e.Kind != want.Kind || e.Name != want.Name || e.Path != want.Path {
			t.Errorf("Entry(%q) = %+v, %v; want %+v", tt.path, e, err, want)
		}
	}
}

func TestOpenResolvesSymlinks(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	d, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	realRoot, _ := filepath.EvalSymlinks(real)
	if d.Root() != realRoot {
		t.Errorf("root %s, want %s", d.Root(), realRoot)
	}
	// Servers hold the real paths of what they use.
	if _, err := d.Entry(filepath.Join(realRoot, "js", key1, "worker.ts")); err != nil {
		t.Error(err)
	}
}

func TestList(t *testing.T) {
	d := newDir(t)
	put(t, d, "js/"+key1, 10, 1*time.Hour)
	put(t, d, "pyodide/314.0.7", 20, 5*time.Hour)
	put(t, d, "snapshots/"+key1+".bin", 30, 4*time.Hour)
	put(t, d, "codecache/"+key1, 40, 2*time.Hour) // newer than its snapshot: the pair's last use
	put(t, d, "codecache/"+key2, 50, 6*time.Hour) // a template without its snapshot
	put(t, d, "packages/wheels/sha256/"+sha1hex, 60, 3*time.Hour)
	put(t, d, "packages/index/"+key1+"/six.json", 70, 7*time.Hour)
	// None of these is an entry.
	put(t, d, "deno/npm/x", 1000, 0)
	put(t, d, "files/1", 2000, 0)
	put(t, d, "js/.tmp-1", 3000, 0)
	put(t, d, "snapshots/"+key1+".bin999", 4000, 0)
	put(t, d, "packages/wheels/sha256/abc", 5000, 0)
	// Left by a failed download: no wheel, so no entry.
	if err := os.MkdirAll(filepath.Join(d.Root(), "packages", "wheels", "sha256", sha2hex), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".lock", "not-a-directory", "js/" + key1 + ".lock"} {
		if err := os.WriteFile(filepath.Join(d.Root(), filepath.FromSlash(f)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"packages/index/" + key1 + "/six.json",
		"snapshots/" + key2 + ".bin",
		"pyodide/314.0.7",
		"packages/wheels/sha256/" + sha1hex,
		"snapshots/" + key1 + ".bin",
		"js/" + key1,
	}
	if got := names(l.Entries); !slices.Equal(got, want) {
		t.Fatalf("entries, least recently used first:\n got: %q\nwant: %q", got, want)
	}
	sizes := map[string]int64{}
	for _, e := range l.Entries {
		sizes[e.Name] = e.Size
		if e.InUse {
			t.Errorf("%s is in use", e.Name)
		}
	}
	if sizes["snapshots/"+key1+".bin"] != 70 || sizes["snapshots/"+key2+".bin"] != 50 || sizes["js/"+key1] != 10 {
		t.Errorf("sizes %v", sizes)
	}
	pair := l.Entries[4]
	if len(pair.Members) != 2 || pair.Members[0] != pair.Path || pair.Kind != Snapshot {
		t.Errorf("pair %+v: want the .bin and its code cache, .bin first", pair)
	}
	if age := time.Since(pair.LastUsed); age < 2*time.Hour-time.Minute || age > 2*time.Hour+time.Minute {
		t.Errorf("pair last used %v ago, want its code cache's 2h", age)
	}
	if l.Total != 10+20+30+40+50+60+70 || l.InUse != 0 {
		t.Errorf("total %d, in use %d", l.Total, l.InUse)
	}
	others := map[string]int64{}
	for _, a := range l.Others {
		others[a.Name] = a.Size
	}
	if others["deno"] != 1000 || others["files"] != 2000 || len(others) != 4 {
		t.Errorf("others %v, want deno, files, .lock and not-a-directory", others)
	}
}

func TestListMissingDirectory(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := d.List(context.Background()); err != nil || len(l.Entries) != 0 || len(l.Others) != 0 {
		t.Errorf("List = %+v, %v; want nothing", l, err)
	}
	if res, err := d.Prune(context.Background(), 1, PruneOptions{}); err != nil || len(res.Removed) != 0 {
		t.Errorf("Prune = %+v, %v; want nothing", res, err)
	}
	if _, err := os.Stat(d.Root()); err == nil {
		t.Error("List or Prune made the directory")
	}
}

func TestHoldShowsInUseAndMarksUse(t *testing.T) {
	d := newDir(t)
	path := put(t, d, "snapshots/"+key1+".bin", 10, 5*time.Hour)
	put(t, d, "codecache/"+key1, 10, 5*time.Hour)
	put(t, d, "js/"+key1, 10, 5*time.Hour)
	before := time.Now().Add(-time.Second)

	// Listing makes no lock files.
	listNames(t, d)
	if _, err := os.Stat(path + lockExt); err == nil {
		t.Fatal("List made a lock file")
	}

	// Held through its code cache: the pair is one entry.
	h := hold(t, d, filepath.Join(d.Root(), "codecache", key1, "sub", "data"))
	if h.Path() != path {
		t.Errorf("held %s, want %s", h.Path(), path)
	}
	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if inUse := e.Name == "snapshots/"+key1+".bin"; e.InUse != inUse {
			t.Errorf("%s in use: %v, want %v", e.Name, e.InUse, inUse)
		}
	}
	if l.InUse != 20 {
		t.Errorf("bytes in use %d, want 20", l.InUse)
	}
	if info, err := os.Stat(path); err != nil || info.ModTime().Before(before) {
		t.Errorf("holding did not mark the snapshot used: %v, %v", info.ModTime(), err)
	}
	// The latest use comes first from now on.
	if got := listNames(t, d); got[len(got)-1] != "snapshots/"+key1+".bin" {
		t.Errorf("order %q: the held entry is not the latest used", got)
	}

	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Errorf("second release: %v", err)
	}
	l, _ = d.List(context.Background())
	for _, e := range l.Entries {
		if e.InUse {
			t.Errorf("%s in use after the release", e.Name)
		}
	}

	// A directory is marked by its own modification time.
	if err := Touch(filepath.Join(d.Root(), "js", key1)); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(d.Root(), "js", key1)); info.ModTime().Before(before) {
		t.Error("Touch did not mark the directory used")
	}
	if err := Touch(filepath.Join(d.Root(), "js", "missing")); err == nil {
		t.Error("Touch of a missing entry: no error")
	}
	if _, err := d.Hold(context.Background(), filepath.Join(d.Root(), "deno")); !errors.Is(err, ErrNotEntry) {
		t.Errorf("Hold(deno) = %v, want ErrNotEntry", err)
	}
}

// TestPruneLeastRecentlyUsedFirst: the oldest go first, exactly as many as
// needed, and nothing of them is left behind.
func TestPruneLeastRecentlyUsedFirst(t *testing.T) {
	d := newDir(t)
	put(t, d, "packages/index/"+key1+"/six.json", 100, 6*time.Hour)
	put(t, d, "snapshots/"+key1+".bin", 60, 5*time.Hour)
	put(t, d, "codecache/"+key1, 40, 5*time.Hour)
	put(t, d, "pyodide/0.1", 100, 4*time.Hour)
	put(t, d, "packages/wheels/sha256/"+sha1hex, 100, 3*time.Hour)
	put(t, d, "js/"+key2, 100, 2*time.Hour)
	put(t, d, "js/"+key1, 100, 1*time.Hour)
	// A lock file left by a holder: it goes with its entry.
	h := hold(t, d, filepath.Join(d.Root(), "pyodide", "0.1"))
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	// The hold marked it used: make it old again.
	old := time.Now().Add(-4 * time.Hour)
	if err := os.Chtimes(filepath.Join(d.Root(), "pyodide", "0.1"), old, old); err != nil {
		t.Fatal(err)
	}

	res := prune(t, d, 250, PruneOptions{})
	wantRemoved := []string{"packages/index/" + key1 + "/six.json", "snapshots/" + key1 + ".bin", "pyodide/0.1", "packages/wheels/sha256/" + sha1hex}
	if got := names(res.Removed); !slices.Equal(got, wantRemoved) {
		t.Errorf("removed %q, want %q", got, wantRemoved)
	}
	if res.Total != 200 || res.Freed() != 400 || len(res.Spared) != 0 {
		t.Errorf("total %d, freed %d, spared %v; want 200, 400, none", res.Total, res.Freed(), res.Spared)
	}
	if got, want := listNames(t, d), []string{"js/" + key2, "js/" + key1}; !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
	for _, rel := range []string{"codecache/" + key1, "snapshots/" + key1 + ".bin", "pyodide/0.1.lock"} {
		if exists(d, rel) {
			t.Errorf("%s is still there", rel)
		}
	}
	assertNoTrash(t, d)

	// Within the limit: nothing goes.
	if res := prune(t, d, 200, PruneOptions{}); len(res.Removed) != 0 || res.Total != 200 {
		t.Errorf("second prune: %+v", res)
	}
	// No limit: nothing goes.
	if res := prune(t, d, 0, PruneOptions{}); len(res.Removed) != 0 {
		t.Errorf("prune without a limit removed %q", names(res.Removed))
	}
}

// assertNoTrash checks that no trash is left anywhere in d.
func assertNoTrash(t *testing.T, d Dir) {
	t.Helper()
	_ = filepath.WalkDir(d.Root(), func(path string, de os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(de.Name(), trashPrefix) {
			t.Errorf("trash left: %s", path)
		}
		return nil
	})
}

// TestPruneSparesHeldEntries: two servers share a directory; what one holds
// the other's prunes never remove, whatever its age.
func TestPruneSparesHeldEntries(t *testing.T) {
	root := t.TempDir()
	one, _ := Open(root)
	two, _ := Open(root)
	put(t, one, "js/"+key1, 100, 3*time.Hour)
	put(t, one, "snapshots/"+key1+".bin", 100, 2*time.Hour)
	put(t, one, "packages/wheels/sha256/"+sha1hex, 100, 1*time.Hour)
	h1 := hold(t, one, filepath.Join(root, "js", key1, "worker.ts"))
	h2 := hold(t, one, filepath.Join(root, "snapshots", key1+".bin"))
	res := prune(t, two, 1, PruneOptions{})
	if got := names(res.Removed); !slices.Equal(got, []string{"packages/wheels/sha256/" + sha1hex}) {
		t.Errorf("removed %q, want only the wheel", got)
	}
	if len(res.Spared) != 2 || res.Spared[0].Reason != InUse || res.Spared[1].Reason != InUse {
		t.Errorf("spared %+v, want both held entries, in use", res.Spared)
	}
	if res.Total != 200 {
		t.Errorf("total %d, want 200: the held entries", res.Total)
	}
	if !exists(one, "js/"+key1+"/sub/data") || !exists(one, "snapshots/"+key1+".bin") {
		t.Fatal("a held entry was removed")
	}

	// Released, the entry goes at the next prune that needs the room.
	if err := h1.Release(); err != nil {
		t.Fatal(err)
	}
	if res := prune(t, two, 1, PruneOptions{}); !slices.Equal(names(res.Removed), []string{"js/" + key1}) {
		t.Errorf("after the release: removed %q, want js/%s", names(res.Removed), key1)
	}
	// A hold of a removed entry is valid: its holder makes it again.
	h3 := hold(t, two, filepath.Join(root, "js", key1))
	put(t, two, "js/"+key1, 100, 5*time.Hour)
	if res := prune(t, one, 1, PruneOptions{}); len(res.Removed) != 0 {
		t.Errorf("removed %q, all held", names(res.Removed))
	}
	for _, h := range []*Hold{h2, h3} {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneSparesKeptAndRecent(t *testing.T) {
	d := newDir(t)
	put(t, d, "pyodide/0.1", 100, 5*time.Hour)
	put(t, d, "js/"+key1, 100, 4*time.Hour)
	put(t, d, "js/"+key2, 100, 30*time.Minute)
	put(t, d, "packages/wheels/sha256/"+sha1hex, 100, time.Minute)
	res := prune(t, d, 1, PruneOptions{
		KeepRecent: time.Hour,
		Keep:       []string{filepath.Join(d.Root(), "pyodide", "0.1", "node_modules", "pyodide")},
	})
	if got := names(res.Removed); !slices.Equal(got, []string{"js/" + key1}) {
		t.Errorf("removed %q, want js/%s", got, key1)
	}
	var why []string
	for _, s := range res.Spared {
		why = append(why, s.Name+": "+string(s.Reason))
	}
	want := []string{"pyodide/0.1: kept", "js/" + key2 + ": used recently", "packages/wheels/sha256/" + sha1hex + ": used recently"}
	if !slices.Equal(why, want) {
		t.Errorf("spared %q, want %q", why, want)
	}

	// 45 minutes on, js/key2 is old enough; the wheel is not.
	later := func() time.Time { return time.Now().Add(45 * time.Minute) }
	res = prune(t, d, 1, PruneOptions{KeepRecent: time.Hour, Now: later})
	if got := names(res.Removed); !slices.Equal(got, []string{"pyodide/0.1", "js/" + key2}) {
		t.Errorf("45 minutes later: removed %q, want pyodide/0.1 and js/%s", got, key2)
	}
}

// TestPruneCleansLeftovers: trash of a pruner that died, temporaries of a
// server that died while making an entry, lock files of entries never made.
func TestPruneCleansLeftovers(t *testing.T) {
	d := newDir(t)
	put(t, d, "js/.trash-"+key1+"-AAAA", 10, 0)
	put(t, d, "packages/wheels/sha256/.trash-"+sha1hex+"-BBBB", 10, 0)
	put(t, d, "codecache/.tmp-old", 10, 2*staleAge)
	put(t, d, "codecache/.tmp-new", 10, time.Hour) // a snapshot being made
	orphan := filepath.Join(d.Root(), "pyodide", "0.1")
	h := hold(t, d, orphan) // held, never made, released
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	making := hold(t, d, filepath.Join(d.Root(), "js", key2)) // held, being made
	defer making.Release()

	prune(t, d, 0, PruneOptions{})
	for rel, want := range map[string]bool{
		"js/.trash-" + key1 + "-AAAA":                        false,
		"packages/wheels/sha256/.trash-" + sha1hex + "-BBBB": false,
		"codecache/.tmp-old":                                 false,
		"codecache/.tmp-new":                                 true,
		"pyodide/0.1.lock":                                   false,
		"js/" + key2 + ".lock":                               true,
	} {
		if exists(d, rel) != want {
			t.Errorf("%s exists: %v, want %v", rel, !want, want)
		}
	}
}

// TestPruneWaitsForPreparation: servers prepare their runtime under the
// cache's lock, and no prune runs meanwhile.
func TestPruneWaitsForPreparation(t *testing.T) {
	d := newDir(t)
	put(t, d, "js/"+key1, 100, time.Hour)
	lock := flock.New(filepath.Join(d.Root(), ".lock"))
	if err := lock.Lock(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := d.Prune(ctx, 1, PruneOptions{OnWait: func() { waited <- struct{}{} }})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Prune while the cache is locked: %v, want the context's deadline", err)
	}
	if len(waited) != 1 {
		t.Error("OnWait was not called")
	}
	if !exists(d, "js/"+key1) {
		t.Error("removed during a preparation")
	}

	done := make(chan PruneResult)
	go func() {
		res, _ := d.Prune(context.Background(), 1, PruneOptions{})
		done <- res
	}()
	time.Sleep(50 * time.Millisecond) // let it wait
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if len(res.Removed) != 1 {
			t.Errorf("after the preparation: removed %q", names(res.Removed))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Prune did not go on once the cache's lock was released")
	}
}

// TestConcurrentPrunes: prunes at once remove exactly what one would.
func TestConcurrentPrunes(t *testing.T) {
	d := newDir(t)
	var want []string
	for i := range 20 {
		rel := fmt.Sprintf("packages/wheels/sha256/%064x", i)
		put(t, d, rel, 100, time.Duration(20-i)*time.Hour)
		if i >= 15 {
			want = append(want, rel)
		}
	}
	var wg sync.WaitGroup
	results := make([]PruneResult, 4)
	for i := range results {
		wg.Go(func() {
			d, _ := Open(d.Root()) // as another server would
			results[i] = prune(t, d, 500, PruneOptions{})
		})
	}
	wg.Wait()
	removed := map[string]int{}
	for _, r := range results {
		for _, e := range r.Removed {
			removed[e.Name]++
		}
	}
	if len(removed) != 15 {
		t.Errorf("removed %d entries, want 15: %v", len(removed), removed)
	}
	for name, n := range removed {
		if n != 1 {
			t.Errorf("%s removed %d times", name, n)
		}
	}
	if got := listNames(t, d); !slices.Equal(got, want) {
		t.Errorf("left %q, want the 5 newest %q", got, want)
	}
}

// TestHoldNeverSeesItsEntryGo stresses the protocol: holders take and
// release an entry, and make it when it is missing, while pruners remove it
// whenever they can. A holder must never see its entry vanish while it holds
// it, although its lock file is removed and made again all the time.
func TestHoldNeverSeesItsEntryGo(t *testing.T) {
	d := newDir(t)
	entry := filepath.Join(d.Root(), "packages", "wheels", "sha256", sha1hex)
	file := filepath.Join(entry, "a.whl")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var holds, removals, vanished atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				h, err := HoldEntry(ctx, entry)
				if err != nil {
					return
				}
				holds.Add(1)
				if _, err := os.Stat(file); err != nil {
					// Made under the hold, as a download does.
					_ = os.MkdirAll(entry, 0o755)
					_ = os.WriteFile(file, []byte("wheel"), 0o644)
				}
				// Used for a while, as a server uses what it holds.
				for range 5 {
					if _, err := os.Stat(file); err != nil {
						vanished.Add(1)
					}
					time.Sleep(200 * time.Microsecond)
				}
				_ = h.Release()
				// Unheld a moment, so that pruners get their chance.
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			d, _ := Open(d.Root())
			for ctx.Err() == nil {
				res, err := d.Prune(ctx, 1, PruneOptions{})
				if err == nil {
					removals.Add(int64(len(res.Removed)))
				}
			}
		})
	}
	wg.Wait()
	if vanished.Load() > 0 {
		t.Errorf("a holder saw its entry vanish %d times", vanished.Load())
	}
	if holds.Load() < 10 || removals.Load() < 3 {
		t.Errorf("%d holds and %d removals: too few to test anything", holds.Load(), removals.Load())
	}
	t.Logf("%d holds, %d removals", holds.Load(), removals.Load())
}

// TestHoldOfARemovedLockFile: a holder waits while a pruner removes its
// entry, and then for the lock file made anew, which a second pruner holds;
// it ends holding the file at the path. A lock taken on a file whose name was
// removed meanwhile (between a holder's open and its lock: too short a
// moment to force here) is told apart by sameFile, checked at the end.
func TestHoldOfARemovedLockFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows removes no file that is open: a lock file is never removed under a holder")
	}
	d := newDir(t)
	path := put(t, d, "js/"+key1, 10, time.Hour)
	lockPath := path + lockExt
	first := flock.New(lockPath)
	if ok, err := first.TryLock(); !ok || err != nil {
		t.Fatalf("first pruner's lock: %v, %v", ok, err)
	}
	type result struct {
		h   *Hold
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := HoldEntry(context.Background(), path)
		got <- result{h, err}
	}()
	time.Sleep(100 * time.Millisecond) // the holder has opened the file and waits
	if err := os.Remove(lockPath); err != nil {
		t.Fatal(err)
	}
	second := flock.New(lockPath)
	if ok, err := second.TryLock(); !ok || err != nil {
		t.Fatalf("second pruner's lock: %v, %v", ok, err)
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("HoldEntry returned (%v) while a pruner held the entry's lock file", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := second.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if same, err := sameFile(r.h.lock, lockPath); !same || err != nil {
			t.Errorf("the hold is not on the lock file at the path: %v, %v", same, err)
		}
		if !held(lockPath) {
			t.Error("the entry is not held")
		}
		// The lock file removed under a lock no longer matches the path,
		// even once a new one is there.
		if err := os.Remove(lockPath); err != nil {
			t.Fatal(err)
		}
		if same, err := sameFile(r.h.lock, lockPath); same || err != nil {
			t.Errorf("sameFile after the removal: %v, %v; want false", same, err)
		}
		if err := os.WriteFile(lockPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if same, err := sameFile(r.h.lock, lockPath); same || err != nil {
			t.Errorf("sameFile with a new file at the path: %v, %v; want false", same, err)
		}
		_ = r.h.Release()
	case <-time.After(10 * time.Second):
		t.Fatal("HoldEntry did not return once the lock file was free")
	}
}

// helperEnv makes this test binary a process that holds an entry (the
// os/exec TestHelperProcess pattern): it holds the path it names, prints
// "held", and keeps the hold until it is killed or its stdin ends.
const helperEnv = "CACHEDIR_TEST_HOLD"

// TestHelperProcess is not a test: see helperEnv.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		return
	}
	if _, err := HoldEntry(context.Background(), path); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestHoldAcrossProcesses: another process's hold spares the entry, and the
// system drops it when that process dies.
func TestHoldAcrossProcesses(t *testing.T) {
	d := newDir(t)
	path := put(t, d, "pyodide/0.1", 100, time.Hour)
	put(t, d, "js/"+key1, 100, 2*time.Hour)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "held\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("helper: %q, %v", line, err)
	}

	res := prune(t, d, 1, PruneOptions{})
	if got := names(res.Removed); !slices.Equal(got, []string{"js/" + key1}) {
		t.Errorf("removed %q, want js/%s only", got, key1)
	}
	if len(res.Spared) != 1 || res.Spared[0].Name != "pyodide/0.1" || res.Spared[0].Reason != InUse {
		t.Errorf("spared %+v, want pyodide/0.1 in use", res.Spared)
	}
	if l, _ := d.List(context.Background()); len(l.Entries) != 1 || !l.Entries[0].InUse {
		t.Errorf("listing %+v, want pyodide/0.1 in use", l.Entries)
	}

	// Killed, the process holds nothing.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	res = prune(t, d, 1, PruneOptions{})
	if got := names(res.Removed); !slices.Equal(got, []string{"pyodide/0.1"}) {
		t.Errorf("after the holder died: removed %q, want pyodide/0.1", got)
	}
}
