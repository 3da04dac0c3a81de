package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

const ttl = 30 * time.Minute

// clock is a settable Config.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// open opens a store in a new directory, with a clock that moves only when
// told, and closes it when the test ends.
func open(t *testing.T, cfg Config) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "files")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.TTL == 0 {
		cfg.TTL = ttl
	}
	if cfg.Now == nil {
		cfg.Now = c.now
	}
	s, err := Open(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, c
}

func put(t *testing.T, s *Store, owner identity.Principal, sc Scope, p, data string) Entry {
	t.Helper()
	e, err := s.Put(owner, sc, p, []byte(data))
	if err != nil {
		t.Fatalf("Put(%s, %q): %v", sc, p, err)
	}
	return e
}

// mustGet checks that owner gets want at uri.
func mustGet(t *testing.T, s *Store, owner identity.Principal, uri, want string) {
	t.Helper()
	_, data, err := s.Get(owner, uri)
	if err != nil || string(data) != want {
		t.Errorf("Get(%q, %q) = %q, %v; want %q", owner, uri, data, err, want)
	}
}

// notFound checks that owner gets ErrNotFound, and nothing else, at uri.
func notFound(t *testing.T, s *Store, owner identity.Principal, uri string) {
	t.Helper()
	e, data, err := s.Get(owner, uri)
	if err != ErrNotFound || e != (Entry{}) || data != nil {
		t.Errorf("Get(%q, %q) = %v, %q, %v; want ErrNotFound", owner, uri, e, data, err)
	}
}

// onDisk is the total size of the files s holds in dir, checking that
// they match its index.
func onDisk(t *testing.T, s *Store) int64 {
	t.Helper()
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	n := 0
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
		n++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes != total || s.count != n {
		t.Errorf("store counts %d bytes in %d files, the disk holds %d in %d", s.bytes, s.count, total, n)
	}
	return total
}

func TestPutGet(t *testing.T) {
	s, _ := open(t, Config{})
	session, call := SessionScope("mcp-session-1"), NewCallScope()
	tests := []struct {
		scope          Scope
		path, data     string
		wantURI, wantN string
		wantMIME       string
	}{
		{session, "plot.png", pngBytes, "session://mcp-session-1/plot.png", "plot.png", "image/png"},
		{session, "out/data.csv", "a,b\n", "session://mcp-session-1/out/data.csv", "data.csv", "text/csv"},
		{session, "empty", "", "session://mcp-session-1/empty", "empty", "text/plain; charset=utf-8"},
		{call, "r/e/p.json", "{}", "call://" + call.id + "/r/e/p.json", "p.json", "application/json"},
	}
	var total int64
	for _, tt := range tests {
		e := put(t, s, "alice", tt.scope, tt.path, tt.data)
		want := Entry{URI: tt.wantURI, Name: tt.wantN, Path: tt.path, MIMEType: tt.wantMIME, Size: int64(len(tt.data))}
		if e != want {
			t.Errorf("Put(%q) = %+v, want %+v", tt.path, e, want)
		}
		got, data, err := s.Get("alice", e.URI)
		if err != nil || got != want || string(data) != tt.data {
			t.Errorf("Get(%q) = %+v, %q, %v", e.URI, got, data, err)
		}
		total += int64(len(tt.data))
	}
	if got := onDisk(t, s); got != total {
		t.Errorf("%d bytes on disk, want %d", got, total)
	}
	if got := s.List("alice", session); len(got) != 3 || got[0].Path != "empty" || got[1].Path != "out/data.csv" || got[2].Path != "plot.png" {
		t.Errorf("List = %+v, want 3 entries sorted by path", got)
	}
}

func TestNotFound(t *testing.T) {
	s, c := open(t, Config{})
	session, call, old := SessionScope("s1"), NewCallScope(), NewCallScope()
	put(t, s, "alice", old, "old.txt", "old")
	c.advance(ttl)
	a := put(t, s, "alice", session, "a.txt", "secret")
	b := put(t, s, "alice", call, "b.txt", "secret")
	put(t, s, "alice", SessionScope("s2"), "gone.txt", "x")
	s.Drop(SessionScope("s2"))
	tests := []struct {
		name  string
		owner identity.Principal
		uri   string
	}{
		{"other owner's session file", "mallory", a.URI},
		{"other owner's call file", "mallory", b.URI},
		{"empty owner", "", a.URI},
		{"unknown path", "alice", "session://s1/b.txt"},
		{"unknown session", "alice", "session://s3/a.txt"},
		{"unknown call", "alice", "call://" + NewCallScope().id + "/b.txt"},
		{"call file as a session's", "alice", "session://" + call.id + "/b.txt"},
		{"expired", "alice", old.uri("old.txt")},
		{"dropped", "alice", "session://s2/gone.txt"},
		{"traversal", "alice", "session://s1/../s1/a.txt"},
		{"escaped traversal", "alice", "session://s1/%2E%2E/a.txt"},
		{"query", "alice", a.URI + "?x"},
		{"other scheme", "alice", "file:///etc/passwd"},
		{"empty", "alice", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { notFound(t, s, tt.owner, tt.uri) })
	}
	if got := s.List("mallory", session); got != nil {
		t.Errorf("List of another owner = %v", got)
	}
	if _, err := s.Put("mallory", session, "x.txt", nil); err == nil {
		t.Error("Put into another owner's scope succeeded")
	}
	mustGet(t, s, "alice", a.URI, "secret")
}

func TestExpiry(t *testing.T) {
	s, c := open(t, Config{})
	session, call := SessionScope("s"), NewCallScope()
	keep := put(t, s, "o", session, "keep.txt", "kept")
	e := put(t, s, "o", call, "out.txt", "12345")

	c.advance(ttl - time.Nanosecond)
	mustGet(t, s, "o", e.URI, "12345")
	c.advance(time.Nanosecond)
	if got := s.Bytes(); got != 9 {
		t.Errorf("Bytes = %d before anything came across the expired file, want 9", got)
	}
	notFound(t, s, "o", e.URI)
	if got := onDisk(t, s); got != 4 {
		t.Errorf("Get left %d bytes, want 4", got)
	}

	// Sweep removes what nobody asks for; List hides what expired.
	call2, call3 := NewCallScope(), NewCallScope()
	put(t, s, "o", call2, "a.txt", "aaa")
	put(t, s, "o", call3, "b.txt", "bbb")
	c.advance(ttl)
	if got := s.List("o", call3); got != nil {
		t.Errorf("List of an expired call = %v", got)
	}
	s.Sweep()
	if got := onDisk(t, s); got != 4 {
		t.Errorf("Sweep left %d bytes, want 4", got)
	}
	c.advance(100 * ttl)
	s.Sweep()
	mustGet(t, s, "o", keep.URI, "kept")
}

// step puts a file of size bytes into the scope named scope (a call's if
// it starts with "call") after the clock moved by after.
type step struct {
	after time.Duration
	scope string
	path  string
	size  int
}

func TestEviction(t *testing.T) {
	tests := []struct {
		name     string
		maxFiles int
		steps    []step
		last     step
		wantErr  string   // "" if the last Put must succeed
		wantKept []string // scope/path
	}{
		{
			name:     "fits",
			steps:    []step{{0, "call1", "a", 30}, {0, "s", "b", 30}},
			last:     step{0, "call2", "c", 40},
			wantKept: []string{"call1/a", "s/b", "call2/c"},
		},
		{
			name:     "expired files go first, all of them",
			steps:    []step{{0, "call1", "a", 20}, {0, "call2", "b", 20}, {ttl / 2, "call3", "c", 20}, {0, "s", "s", 30}},
			last:     step{ttl / 2, "call4", "d", 20},
			wantKept: []string{"call3/c", "s/s", "call4/d"},
		},
		{
			name:     "then the oldest calls' files",
			steps:    []step{{0, "call1", "a", 30}, {1, "call2", "b", 30}, {1, "call3", "c", 30}, {1, "s", "s", 10}},
			last:     step{1, "call4", "d", 40},
			wantKept: []string{"call3/c", "s/s", "call4/d"},
		},
		{
			name:     "a session's files never go",
			steps:    []step{{0, "s1", "a", 60}, {1, "call1", "b", 30}, {1, "s2", "c", 10}},
			last:     step{1, "call2", "d", 40},
			wantErr:  "file store full: a 40 B file does not fit in the 100 B cap (--files-store-limit), of which 70 B is in use",
			wantKept: []string{"s1/a", "call1/b", "s2/c"},
		},
		{
			name:     "a session's file pushes calls' files out",
			steps:    []step{{0, "call1", "a", 50}, {1, "s1", "b", 40}},
			last:     step{1, "s1", "c", 60},
			wantKept: []string{"s1/b", "s1/c"},
		},
		{
			name:     "a call's own files stay",
			steps:    []step{{0, "call1", "a", 10}, {1, "call2", "b", 50}, {1, "call2", "c", 40}},
			last:     step{1, "call2", "d", 20},
			wantErr:  "file store full: a 20 B file does not fit in the 100 B cap (--files-store-limit), of which 90 B is in use",
			wantKept: []string{"call1/a", "call2/b", "call2/c"},
		},
		{
			name:     "a call's own older files stay",
			steps:    []step{{0, "call2", "b", 50}, {1, "call1", "a", 30}},
			last:     step{1, "call2", "d", 30},
			wantKept: []string{"call2/b", "call2/d"},
		},
		{
			name:     "too large alone",
			steps:    []step{{0, "call1", "a", 10}},
			last:     step{1, "call2", "b", 101},
			wantErr:  "file store full: a 101 B file does not fit in the 100 B cap (--files-store-limit), of which 0 B is in use",
			wantKept: []string{"call1/a"},
		},
		{
			name:     "the file count cap",
			maxFiles: 2,
			steps:    []step{{0, "call1", "a", 0}, {1, "s", "b", 0}},
			last:     step{1, "call2", "c", 0},
			wantKept: []string{"s/b", "call2/c"},
		},
		{
			name:     "the file count cap reached by a session",
			maxFiles: 2,
			steps:    []step{{0, "s", "a", 0}, {1, "s", "b", 0}},
			last:     step{1, "call1", "c", 0},
			wantErr:  "file store full: the server keeps its maximum of 2 files (--max-files)",
			wantKept: []string{"s/a", "s/b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := open(t, Config{MaxBytes: 100, MaxFiles: tt.maxFiles})
			scopes := map[string]Scope{}
			scope := func(name string) Scope {
				if _, ok := scopes[name]; !ok {
					scopes[name] = SessionScope(name)
					if strings.HasPrefix(name, "call") {
						scopes[name] = NewCallScope()
					}
				}
				return scopes[name]
			}
			var err error
			for _, st := range append(tt.steps, tt.last) {
				c.advance(st.after)
				_, err = s.Put("o", scope(st.scope), st.path, make([]byte, st.size))
			}
			if got := fmt.Sprint(err); tt.wantErr == "" && err != nil || tt.wantErr != "" && got != tt.wantErr {
				t.Errorf("last Put: %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && !errors.Is(err, ErrFull) {
				t.Errorf("last Put: %v is not an ErrFull", err)
			}
			// Before a Get removes what expired.
			var want int64
			for _, st := range append(tt.steps, tt.last) {
				if slices.Contains(tt.wantKept, st.scope+"/"+st.path) {
					want += int64(st.size)
				}
			}
			if got := s.Bytes(); got != want {
				t.Errorf("Bytes = %d, want %d", got, want)
			}
			var kept []string
			for _, st := range append(tt.steps, tt.last) {
				sc := scope(st.scope)
				if _, _, err := s.Get("o", sc.uri(st.path)); err == nil && !slices.Contains(kept, st.scope+"/"+st.path) {
					kept = append(kept, st.scope+"/"+st.path)
				}
			}
			if !slices.Equal(kept, tt.wantKept) {
				t.Errorf("kept %v, want %v", kept, tt.wantKept)
			}
			onDisk(t, s)
		})
	}
}

// One owner cannot fill the store: past its own caps its files make room
// among its own calls' files only, else Put fails naming the cap, while
// other owners still keep theirs. The owner "" has the store's caps only.
func TestCapsPerOwner(t *testing.T) {
	type owned struct {
		owner       identity.Principal
		scope, path string
		size        int
	}
	tests := []struct {
		name     string
		steps    []owned
		wantErr  string // of the last Put; "" if it must succeed
		wantKept []string
	}{
		{
			name:     "others still fit",
			steps:    []owned{{"a", "s1", "x", 50}, {"b", "s2", "y", 50}},
			wantKept: []string{"a/s1/x", "b/s2/y"},
		},
		{
			name:     "an owner's sessions' bytes",
			steps:    []owned{{"a", "s1", "x", 40}, {"a", "s2", "y", 20}},
			wantErr:  "file store full: a 20 B file does not fit in the 50 B one caller may keep (--files-store-limit-per-principal), of which you use 40 B; a session's files go when it ends",
			wantKept: []string{"a/s1/x"},
		},
		{
			name:     "an owner's sessions' files, empty ones too",
			steps:    []owned{{"a", "s1", "x", 0}, {"a", "s1", "y", 0}, {"a", "s1", "z", 0}, {"a", "s2", "w", 0}},
			wantErr:  "file store full: you keep the 3 files one caller may keep (--max-files-per-principal); a session's files go when it ends",
			wantKept: []string{"a/s1/x", "a/s1/y", "a/s1/z"},
		},
		{
			name:     "an owner's calls' files make room for its own, not others'",
			steps:    []owned{{"b", "call0", "v", 10}, {"a", "call1", "x", 30}, {"a", "s1", "y", 10}, {"a", "call2", "z", 30}},
			wantKept: []string{"b/call0/v", "a/s1/y", "a/call2/z"},
		},
		{
			name:     "no owner has only the store's caps",
			steps:    []owned{{"", "s1", "x", 0}, {"", "s1", "y", 40}, {"", "s1", "z", 40}, {"", "s2", "w", 0}},
			wantKept: []string{"/s1/x", "/s1/y", "/s1/z", "/s2/w"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := open(t, Config{MaxBytes: 100, MaxFiles: 10, MaxBytesPerPrincipal: 50, MaxFilesPerPrincipal: 3})
			scopes := map[string]Scope{}
			var err error
			for _, st := range tt.steps {
				if _, ok := scopes[st.scope]; !ok {
					scopes[st.scope] = SessionScope(st.scope)
					if strings.HasPrefix(st.scope, "call") {
						scopes[st.scope] = NewCallScope()
					}
				}
				c.advance(1)
				_, err = s.Put(st.owner, scopes[st.scope], st.path, make([]byte, st.size))
			}
			if got := fmt.Sprint(err); tt.wantErr == "" && err != nil || tt.wantErr != "" && got != tt.wantErr {
				t.Errorf("last Put: %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && !errors.Is(err, ErrFull) {
				t.Errorf("last Put: %v is not an ErrFull", err)
			}
			var kept []string
			for _, st := range tt.steps {
				if _, _, err := s.Get(st.owner, scopes[st.scope].uri(st.path)); err == nil {
					kept = append(kept, string(st.owner)+"/"+st.scope+"/"+st.path)
				}
			}
			if !slices.Equal(kept, tt.wantKept) {
				t.Errorf("kept %v, want %v", kept, tt.wantKept)
			}
			onDisk(t, s)
		})
	}
}

func TestDrop(t *testing.T) {
	s, _ := open(t, Config{})
	s1, s2 := SessionScope("s1"), SessionScope("s2")
	a := put(t, s, "o", s1, "a.txt", "aa")
	put(t, s, "o", s1, "d/b.txt", "bb")
	c := put(t, s, "o", s2, "c.txt", "c")
	s.Drop(s1)
	s.Drop(SessionScope("never"))
	notFound(t, s, "o", a.URI)
	if got := s.List("o", s1); got != nil {
		t.Errorf("List after Drop = %v", got)
	}
	mustGet(t, s, "o", c.URI, "c")
	if got := onDisk(t, s); got != 1 {
		t.Errorf("%d bytes on disk after Drop, want 1", got)
	}
	// A scope without files is nobody's.
	put(t, s, "other", s1, "a.txt", "new")
	mustGet(t, s, "other", a.URI, "new")
}

func TestRemove(t *testing.T) {
	s, _ := open(t, Config{})
	sc := SessionScope("s")
	a := put(t, s, "o", sc, "a.txt", "aa")
	b := put(t, s, "o", sc, "b.txt", "b")
	s.Remove("mallory", sc, "a.txt") // not theirs: nothing happens
	s.Remove("o", sc, "missing.txt")
	mustGet(t, s, "o", a.URI, "aa")
	s.Remove("o", sc, "a.txt")
	notFound(t, s, "o", a.URI)
	mustGet(t, s, "o", b.URI, "b")
	if got := onDisk(t, s); got != 1 {
		t.Errorf("%d bytes on disk after Remove, want 1", got)
	}
}

func TestReplace(t *testing.T) {
	s, _ := open(t, Config{MaxBytes: 10})
	sc := SessionScope("s")
	put(t, s, "o", sc, "a.txt", "one")
	e := put(t, s, "o", sc, "a.txt", "three")
	mustGet(t, s, "o", e.URI, "three")
	if got := s.List("o", sc); len(got) != 1 || got[0] != e {
		t.Errorf("List = %+v, want only %+v", got, e)
	}
	// The old version's room counts for the new one.
	e = put(t, s, "o", sc, "a.txt", "nine bytes")
	if got := onDisk(t, s); got != 10 {
		t.Errorf("%d bytes on disk, want 10", got)
	}
	// A new version not kept takes the old one along: it is stale.
	if _, err := s.Put("o", sc, "a.txt", make([]byte, 11)); !errors.Is(err, ErrFull) {
		t.Errorf("Put past the cap: %v", err)
	}
	notFound(t, s, "o", e.URI)
	if got := onDisk(t, s); got != 0 {
		t.Errorf("%d bytes on disk, want 0", got)
	}
}

func TestHostileNames(t *testing.T) {
	s, _ := open(t, Config{})
	sc := SessionScope("mcp-session-x")
	names := []string{
		"a b?.png", "%41", "A", "%2F", "%", "x#y", "q?x=1&y=2", "dir/sub/ü.txt", "semi;colon,comma",
		"...", ".hidden", `back\slash`, "emoji😀", "plus+sign", "colon:at@", "tab\tnew\nline", `'"<>`,
		"a%2Fb", "a/b", "C:", "~user", "*?[]",
	}
	for i, name := range names {
		e := put(t, s, "o", sc, name, fmt.Sprint(i))
		u, err := url.Parse(e.URI)
		if err != nil || u.Scheme != "session" || u.Host != sc.id || u.Path != "/"+name || u.RawQuery != "" || u.Fragment != "" {
			t.Errorf("%q: url.Parse(%q) = %+v, %v", name, e.URI, u, err)
		}
		if strings.ContainsAny(e.URI, " ?#\t\n") {
			t.Errorf("%q: %q is not escaped", name, e.URI)
		}
		if e.Path != name || e.Name != name[strings.LastIndex(name, "/")+1:] {
			t.Errorf("%q: entry %+v", name, e)
		}
	}
	for i, name := range names {
		mustGet(t, s, "o", sc.uri(name), fmt.Sprint(i))
	}
	var paths []string
	for _, e := range s.List("o", sc) {
		paths = append(paths, e.Path)
	}
	if want := slices.Sorted(slices.Values(names)); !slices.Equal(paths, want) {
		t.Errorf("List = %q, want %q", paths, want)
	}
}

func TestPutInvalid(t *testing.T) {
	s, _ := open(t, Config{})
	tests := []struct {
		name  string
		scope Scope
		path  string
	}{
		{"zero scope", Scope{}, "a"},
		{"bad scope id", SessionScope("a/b"), "a"},
		{"traversal", SessionScope("s"), "../a"},
		{"absolute", SessionScope("s"), "/etc/passwd"},
		{"NUL", SessionScope("s"), "a\x00"},
		{"empty", SessionScope("s"), ""},
	}
	for _, tt := range tests {
		if _, err := s.Put("o", tt.scope, tt.path, []byte("x")); err == nil {
			t.Errorf("%s: Put succeeded", tt.name)
		}
	}
	onDisk(t, s)
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	leftover := filepath.Join(dir, randomName())
	foreign := []string{filepath.Join(dir, "notes.txt"), filepath.Join(dir, strings.ToUpper(randomName()))}
	for _, name := range append(foreign, leftover) {
		if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := open(t, Config{Dir: dir})
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open left %s: %v", leftover, err)
	}
	for _, name := range foreign {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("Open removed a file it did not make: %v", err)
		}
	}

	if _, err := Open(Config{Dir: dir, MaxBytes: 1, TTL: ttl}, nil); err == nil {
		t.Error("a second store opened the same directory")
	}
	e := put(t, s, "o", SessionScope("s"), "a.txt", "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	notFound(t, s, "o", e.URI)
	if _, err := s.Put("o", SessionScope("s"), "b.txt", nil); err == nil {
		t.Error("Put after Close succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1+len(foreign) {
		t.Errorf("Close left %d entries in %s", len(entries), dir)
	}
	s2, err := Open(Config{Dir: dir, MaxBytes: 1, TTL: ttl}, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Error(err)
	}

	for _, cfg := range []Config{
		{MaxBytes: 1, TTL: ttl},
		{Dir: dir, TTL: ttl},
		{Dir: dir, MaxBytes: 1},
		{Dir: dir, MaxBytes: 1, TTL: ttl, MaxFiles: -1},
	} {
		if s, err := Open(cfg, nil); err == nil {
			t.Errorf("Open(%+v) succeeded", cfg)
			_ = s.Close()
		}
	}
}

func TestConcurrent(t *testing.T) {
	s, _ := open(t, Config{MaxBytes: 4096, MaxFiles: 50, Now: time.Now})
	var wg sync.WaitGroup
	for w := range 8 {
		owner := identity.Principal(fmt.Sprint("owner", w))
		wg.Go(func() {
			session := SessionScope(string(owner))
			for i := range 100 {
				sc := session
				if i%2 == 0 {
					sc = NewCallScope()
				}
				data := bytes.Repeat([]byte{byte(i)}, i)
				p := fmt.Sprintf("d/f%d.bin", i%7)
				e, err := s.Put(owner, sc, p, data)
				if err != nil {
					if !errors.Is(err, ErrFull) {
						t.Error(err)
					}
					continue
				}
				// Another worker's Put may evict a call's file.
				if got, read, err := s.Get(owner, e.URI); err == nil && (got != e || !bytes.Equal(read, data)) {
					t.Errorf("Get(%q) = %+v, %d bytes", e.URI, got, len(read))
				}
				notFound(t, s, "intruder", e.URI)
				s.List(owner, session)
				s.Bytes()
				switch i % 25 {
				case 10:
					s.Sweep()
				case 20:
					s.Drop(session)
				}
			}
		})
	}
	wg.Wait()
	onDisk(t, s)
}

func TestDiskErrors(t *testing.T) {
	s, _ := open(t, Config{})
	sc := SessionScope("s")
	e := put(t, s, "o", sc, "a.txt", "a")
	if err := os.RemoveAll(s.cfg.Dir); err != nil {
		t.Skipf("cannot take the directory away: %v", err) // Windows: the lock is open
	}
	t.Cleanup(func() { _ = os.Mkdir(s.cfg.Dir, 0o700) }) // for Close
	notFound(t, s, "o", e.URI)
	_, err := s.Put("o", sc, "b.txt", []byte("b"))
	if err == nil || strings.Contains(err.Error(), s.cfg.Dir) {
		t.Errorf("Put into a missing directory: %v", err)
	}
}

func TestOpenFreeTakesTheFirstFreeDirectory(t *testing.T) {
	parent := t.TempDir()
	cfg := Config{MaxBytes: 100, TTL: time.Minute}
	var stores []*Store
	for want := range 3 {
		s, err := OpenFree(parent, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := filepath.Base(s.cfg.Dir); got != strconv.Itoa(want) {
			t.Errorf("store %d opened in %s", want, got)
		}
		stores = append(stores, s)
	}
	// A server that ended frees its directory for the next one.
	if err := stores[1].Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFree(parent, cfg, nil)
	if err != nil || filepath.Base(s.cfg.Dir) != "1" {
		t.Errorf("OpenFree after a close = %v, %v; want directory 1", s, err)
	}
	for _, s := range append(stores, s) {
		_ = s.Close()
	}
}

// TestExpiryOnTheDefaultClock: without Config.Now the store reads the
// time package's clock, which a synctest bubble fakes: a call's file is
// read until its TTL, to the nanosecond, and not after; a session's stays.
func TestExpiryOnTheDefaultClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(Config{Dir: filepath.Join(t.TempDir(), "files"), MaxBytes: 1 << 20, TTL: ttl}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		keep := put(t, s, "o", SessionScope("s"), "keep.txt", "kept")
		e := put(t, s, "o", NewCallScope(), "out.txt", "12345")
		time.Sleep(ttl - time.Nanosecond)
		mustGet(t, s, "o", e.URI, "12345")
		time.Sleep(time.Nanosecond)
		notFound(t, s, "o", e.URI)
		time.Sleep(100 * ttl)
		s.Sweep()
		mustGet(t, s, "o", keep.URI, "kept")
	})
}
