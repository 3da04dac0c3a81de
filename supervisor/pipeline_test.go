package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker/workertest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// The call pipeline, tested with in-memory workers: a bridge.Conn whose
// other end is Go (memWorker), answering frames as a worker's interpreter
// would. No deno, no process: these run under -short.

// memWorker is the Go end of an in-memory worker: a fake interpreter that
// can import what it was given and what it is sent, and records the frames
// it gets.
type memWorker struct {
	w *worker.Worker

	mu       sync.Mutex
	frames   []string        // the types of the frames it got, in order
	modules  map[string]bool // importable top-level modules
	hidden   [][]string      // the names each imports frame hid
	received []string        // the names of the files installed or put
}

// importRE finds a fake interpreter's imports: good enough for tests.
var importRE = regexp.MustCompile(`(?m)^import (\w+)`)

// newMemWorker connects an in-memory worker to srv, as a worker of learned
// set kind whose files (and their modules) installed are in.
func newMemWorker(t *testing.T, srv *bridge.Server, kind string, installed map[string]bool) *memWorker {
	t.Helper()
	secret := bridge.NewSecret()
	connected, withdraw := srv.Expect(secret)
	defer withdraw()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	hello, _ := json.Marshal(map[string]string{"type": "hello", "secret": secret})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	var conn *bridge.Conn
	select {
	case conn = <-connected:
	case <-ctx.Done():
		t.Fatal("the bridge did not hand the connection over")
	}
	w := worker.New(new(tracker.Tracker), workertest.NewProcess(), io.NopCloser(nil), strings.NewReader(""), zap.NewNop(), func() {})
	w.Conn, w.Kind, w.Installed = conn, kind, installed
	m := &memWorker{w: w, modules: map[string]bool{"json": true}}
	for name := range installed {
		m.modules[moduleOf(name)] = true
	}
	go m.serve(ws)
	t.Cleanup(w.Kill)
	return m
}

// moduleOf is the top-level module of a test wheel, named after its project.
func moduleOf(file string) string {
	name, _, _ := strings.Cut(file, "-")
	return name
}

// serve answers frames until the connection ends.
func (m *memWorker) serve(ws *websocket.Conn) {
	ctx := context.Background()
	defer ws.CloseNow()
	reply := func(v map[string]any) bool {
		b, _ := json.Marshal(v)
		return ws.Write(ctx, websocket.MessageText, b) == nil
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var f struct {
			Type  string   `json:"type"`
			Code  string   `json:"code"`
			Names []string `json:"names"`
			Files []struct {
				Name string `json:"name"`
				Size int64  `json:"size"`
			} `json:"files"`
		}
		if json.Unmarshal(data, &f) != nil {
			return
		}
		m.mu.Lock()
		m.frames = append(m.frames, f.Type)
		m.mu.Unlock()
		switch f.Type {
		case "ping":
			reply(map[string]any{"type": "pong"})
		case "imports":
			var missing []string
			m.mu.Lock()
			m.hidden = append(m.hidden, f.Names)
			for _, sub := range importRE.FindAllStringSubmatch(f.Code, -1) {
				if !m.modules[sub[1]] || slices.Contains(f.Names, sub[1]) {
					missing = append(missing, sub[1])
				}
			}
			m.mu.Unlock()
			reply(map[string]any{"type": "imports", "names": missing})
		case "install", "put":
			for _, file := range f.Files {
				for got := int64(0); got < file.Size; {
					_, b, err := ws.Read(ctx)
					if err != nil {
						return
					}
					got += int64(len(b))
				}
				m.mu.Lock()
				m.received = append(m.received, file.Name)
				m.modules[moduleOf(file.Name)] = true
				m.mu.Unlock()
			}
			answer := "installed"
			if f.Type == "put" {
				answer = "put"
			}
			reply(map[string]any{"type": answer})
		case "run":
			reply(map[string]any{"type": "output", "stream": "stdout", "lines": []string{"ran"}})
			reply(map[string]any{"type": "result", "status": "success", "return_value": json.RawMessage("1")})
		default:
			reply(map[string]any{"type": "fatal", "error": "unexpected " + f.Type})
		}
	}
}

// got returns the frame types the worker got, and the files it received.
func (m *memWorker) got() ([]string, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.frames), slices.Clone(m.received)
}

// memPool is a pooled interpreter over in-memory workers: each acquire
// connects a new one, of the kind asked for, as the pool's workers are;
// each release kills it, as the pool retires them.
type memPool struct {
	t    *testing.T
	srv  *bridge.Server
	sets map[string]map[string]bool // the installed files of each learned set's workers

	mu       sync.Mutex
	asked    []string // the kinds acquired, in order
	workers  []*memWorker
	released []*worker.Worker
}

func (p *memPool) installedFiles(rt *runtimefiles.Files) map[string]bool { return rt.Preinstalled() }
func (p *memPool) acquire(_ context.Context, _ *deadline, _ *callProgress, _, kind string) (*worker.Worker, error) {
	m := newMemWorker(p.t, p.srv, kind, p.sets[kind])
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, kind)
	p.workers = append(p.workers, m)
	return m.w, nil
}
func (p *memPool) release(w *worker.Worker) {
	p.mu.Lock()
	p.released = append(p.released, w)
	p.mu.Unlock()
	w.Kill()
}
func (p *memPool) learns() bool    { return true }
func (p *memPool) mountsDue() bool { return true }
func (p *memPool) mountsPut()      {}

// memSupervisor returns a supervisor whose runtime is ready without deno:
// an installer over a local index of repo, and a bridge for in-memory
// workers. cfg's CacheDir and IndexURL are set here.
func memSupervisor(t *testing.T, cfg Config, repo *pt.Repo) (*Supervisor, *bridge.Server) {
	t.Helper()
	dir := t.TempDir()
	lock := `{"info": {"arch": "wasm32", "platform": "emscripten_4_0_9", "python": "3.13.2"}, "packages": {}}`
	if err := os.WriteFile(filepath.Join(dir, "pyodide-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.IndexURL = repo.Location(t, pt.Variant{JSON: true, Metadata: true, Dir: true})
	cfg.PyodideIndexURL = dir
	s := New(cfg, zaptest.NewLogger(t))
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	pkgs, err := install.New(s.cfg.install(), dir, nil, s.log)
	if err != nil {
		t.Fatal(err)
	}
	setRuntime(t, s, &readyRuntime{Files: &runtimefiles.Files{Key: "0123456789abcdef", Root: dir}, Pkgs: pkgs})
	s.learn = install.NewLearner(install.Background{Ctx: s.ctx, WG: &s.wg, Log: s.log}) // no Maker: a learned snapshot needs deno
	srv, err := bridge.Listen(zap.NewNop(), 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return s, srv
}

// setRuntime gives s the runtime rt, built by no deno.
func setRuntime(t *testing.T, s *Supervisor, rt *readyRuntime) {
	t.Helper()
	s.runtime = runtimefiles.NewKeeper(s.ctx, &s.wg, s.log, runtimefiles.Builds[*install.Installer]{
		Build:   func(context.Context, func(string)) (*readyRuntime, error) { return rt, nil },
		Started: func(*readyRuntime) {},
	})
	if !s.wg.Enter() {
		t.Fatal("the supervisor is closed")
	}
	defer s.wg.Leave()
	if _, err := s.runtime.Ensure(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// testRepo is an index with one package, tinypkg.
func testRepo() *pt.Repo {
	repo := &pt.Repo{}
	repo.Add(pt.Wheel{Name: "tinypkg", Version: "1.0", Source: "X = 1\n"})
	return repo
}

const tinyWheel = "tinypkg-1.0-py3-none-any.whl"

// lines collects a call's lines by stream.
type lines struct {
	mu  sync.Mutex
	all map[Stream][]string
}

func (l *lines) add(line Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all == nil {
		l.all = map[Stream][]string{}
	}
	l.all[line.Stream] = append(l.all[line.Stream], line.Text)
}

func (l *lines) of(s Stream) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all[s])
}

// A pooled call: each step's frames go to one fresh worker, which is
// released after the call, and installs follow the code's imports.
func TestPipelinePooled(t *testing.T) {
	tests := []struct {
		name    string
		code    string
		frames  []string
		files   []string
		deps    []string
		status  Status
		callErr error
	}{
		{name: "no imports", code: "1", frames: []string{"run"}, status: StatusSuccess},
		{name: "imports what it has", code: "import json\n", frames: []string{"imports", "run"}, status: StatusSuccess},
		{
			name: "imports a package", code: "import tinypkg\n", status: StatusSuccess,
			frames: []string{"imports", "install", "imports", "run"}, files: []string{tinyWheel}, deps: []string{"tinypkg"},
		},
		{
			name: "a script", code: "# /// script\n# dependencies = [\"tinypkg\"]\n# ///\nimport tinypkg\n", status: StatusSuccess,
			frames: []string{"install", "run"}, files: []string{tinyWheel}, deps: []string{"tinypkg"},
		},
		{
			name: "a script that cannot install", code: "# /// script\n# dependencies = [\"nosuchpkg\"]\n# ///\n",
			status: StatusInstallError, deps: []string{"nosuchpkg"},
		},
		{name: "too large", code: strings.Repeat("x", 101), callErr: ErrCodeTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := memSupervisor(t, Config{CodeLimit: 100}, testRepo())
			in := &memPool{t: t, srv: srv}
			var out lines
			res, err := s.serve(context.Background(), Request{Code: tc.code, OnLine: out.add}, in)
			if !errors.Is(err, tc.callErr) || res.Status != tc.status {
				t.Fatalf("serve: %s %q, %v; want %s, %v", res.Status, res.Error, err, tc.status, tc.callErr)
			}
			if !slices.Equal(res.Dependencies, tc.deps) {
				t.Errorf("dependencies %q, want %q", res.Dependencies, tc.deps)
			}
			if tc.frames == nil {
				if len(in.asked) != 0 {
					t.Errorf("a call that ended before acquire took %d workers", len(in.asked))
				}
				return
			}
			if len(in.workers) != 1 || len(in.released) != 1 || in.released[0] != in.workers[0].w {
				t.Fatalf("took %d workers and released %d; want the one", len(in.workers), len(in.released))
			}
			frames, files := in.workers[0].got()
			if !slices.Equal(frames, tc.frames) || !slices.Equal(files, tc.files) {
				t.Errorf("the worker got %q with files %q; want %q with %q", frames, files, tc.frames, tc.files)
			}
			if !slices.Equal(res.Output, []string{"ran"}) || string(res.ReturnValue) != "1" {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// A call whose imports do not fit the learned set guessed for it swaps its
// worker for a plain one: the learned worker installs and runs nothing,
// both are released, and the lines of the rounds on it are not sent.
func TestPipelineSwapsAWrongGuess(t *testing.T) {
	s, srv := memSupervisor(t, Config{}, testRepo())
	const set, otherWheel = "fedcba9876543210", "otherpkg-1.0-py3-none-any.whl"
	s.learn.Teach(set, s.runtime.Files(), map[string][]string{otherWheel: {"otherpkg"}}, []string{"tinypkg"})
	in := &memPool{t: t, srv: srv, sets: map[string]map[string]bool{set: {otherWheel: true}}}

	var out lines
	res, err := s.serve(context.Background(), Request{Code: "import tinypkg\n", OnLine: out.add}, in)
	if err != nil || res.Status != StatusSuccess || !slices.Equal(res.Dependencies, []string{"tinypkg"}) {
		t.Fatalf("serve: %+v, %v", res, err)
	}
	if !slices.Equal(in.asked, []string{set, ""}) {
		t.Fatalf("asked the pool for %q, want the learned set's worker, then a plain one", in.asked)
	}
	if len(in.released) != 2 || in.released[0] != in.workers[0].w || in.released[1] != in.workers[1].w {
		t.Errorf("released %d workers, want both in turn", len(in.released))
	}
	learned, _ := in.workers[0].got()
	if !slices.Equal(learned, []string{"imports"}) || !slices.Equal(in.workers[0].hidden[0], []string{"otherpkg"}) {
		t.Errorf("the learned set's worker got %q, hiding %q; want one imports frame hiding its set", learned, in.workers[0].hidden)
	}
	plain, files := in.workers[1].got()
	if want := []string{"imports", "install", "imports", "run"}; !slices.Equal(plain, want) || !slices.Equal(files, []string{tinyWheel}) {
		t.Errorf("the plain worker got %q with %q, want %q", plain, files, want)
	}
	// The rounds on each worker resolved tinypkg: the learned worker's
	// resolved and downloaded it, and said nothing; the plain one's found
	// it resolved and in the cache.
	progress := out.of(Progress)
	if len(progress) != 2 || !strings.HasPrefix(progress[0], "resolved tinypkg (as resolved ") || progress[1] != tinyWheel+": in the cache" {
		t.Errorf("progress %q, want only the plain worker's rounds'", progress)
	}
}

// A session's calls share its worker: nothing is released, the mounts are
// put once, and a package installed by one call is not sent again.
func TestPipelineSession(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "data.csv"), []byte("1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := mount.Parse(host + ":/data")
	if err != nil {
		t.Fatal(err)
	}
	s, srv := memSupervisor(t, Config{Mounts: []mount.Mount{m}}, testRepo())
	mw := newMemWorker(t, srv, "", nil)
	ss := &Session{s: s, turn: make(chan struct{}, 1), done: make(chan struct{}), w: mw.w, installed: map[string]bool{}}
	script := "# /// script\n# dependencies = [\"tinypkg\"]\n# ///\nimport tinypkg\n"
	for i := range 2 {
		res, err := ss.Run(context.Background(), Request{Code: script})
		if err != nil || res.Status != StatusSuccess || !slices.Equal(res.Dependencies, []string{"tinypkg"}) {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	frames, files := mw.got()
	if want := []string{"install", "put", "run", "run"}; !slices.Equal(frames, want) {
		t.Errorf("the session's worker got %q, want %q", frames, want)
	}
	if want := []string{tinyWheel, "/data/data.csv"}; !slices.Equal(files, want) {
		t.Errorf("the session's worker got files %q, want %q", files, want)
	}
	if mw.w.Dead() {
		t.Error("the session's worker was released")
	}
}

// In code mode the runner makes the mcp_tools module: its import asks for
// no package, and says nothing of one.
func TestPipelineCodeModeModule(t *testing.T) {
	s, srv := memSupervisor(t, Config{Tools: &testTools{}}, testRepo())
	in := &memPool{t: t, srv: srv}
	var out lines
	res, err := s.serve(context.Background(), Request{Code: "import mcp_tools\n", OnLine: out.add}, in)
	if err != nil || res.Status != StatusSuccess || len(res.Dependencies) != 0 {
		t.Fatalf("serve: %+v, %v", res, err)
	}
	if frames, _ := in.workers[0].got(); !slices.Equal(frames, []string{"imports", "run"}) {
		t.Errorf("the worker got %q, want an imports frame and the run", frames)
	}
	if progress := out.of(Progress); len(progress) != 0 {
		t.Errorf("progress %q, want none", progress)
	}
}
