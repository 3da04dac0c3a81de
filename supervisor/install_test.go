package supervisor

import (
	"archive/zip"
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// wheel builds a pure-Python wheel with one module file.
func wheel(t *testing.T, name, version, source string) bridge.Payload {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	info := name + "-" + version + ".dist-info/"
	for path, body := range map[string]string{
		name + "/__init__.py": source,
		info + "METADATA":     "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
		info + "WHEEL":        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		info + "RECORD":       "",
	} {
		w, err := z.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return bridge.Payload{File: bridge.File{Name: name + "-" + version + "-py3-none-any.whl"}, Data: buf.Bytes()}
}

// warmWorker returns a supervisor and a warm worker taken from it, retired
// when the test ends.
func warmWorker(t *testing.T) (*Supervisor, *worker.Worker) {
	t.Helper()
	s := start(t, Config{Workers: 1})
	w, err := takeWorker(context.Background(), s.pool, s.workers, s.cfg.Workers, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.pool.Retire(w) })
	return s, w
}

func TestWorkerImportsAndInstalls(t *testing.T) {
	s, w := warmWorker(t)
	ctx := context.Background()

	code := "import json, tinypkg\nfrom tinypkg import VALUE\nimport other.sub\nVALUE"
	missing, err := w.Conn.Imports(ctx, code, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As find_imports gives them: sorted, with parents; json is there already.
	if want := []string{"other", "other.sub", "tinypkg"}; !slices.Equal(missing, want) {
		t.Errorf("Imports = %q, want %q", missing, want)
	}
	if err := w.Conn.Install(ctx, []bridge.Payload{wheel(t, "tinypkg", "1.0", "VALUE = 'from a wheel'\n")}); err != nil {
		t.Fatal(err)
	}
	res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "import tinypkg\ntinypkg.VALUE"}, runOpts{limit: &deadline{}})
	if err != nil || res.Status != StatusSuccess || string(res.ReturnValue) != `"from a wheel"` {
		t.Errorf("after the install: %+v, %v", res, err)
	}
}

func TestImportsOfCodeThatCannotBeParsed(t *testing.T) {
	s, w := warmWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Nesting deep enough to exhaust the parser, then a syntax error: the
	// worker answers with no imports and leaves the run to report them.
	for _, code := range []string{"import a\n" + strings.Repeat("-", 200000) + "1", "import a\nx = ("} {
		if missing, err := w.Conn.Imports(ctx, code, nil); err != nil || len(missing) != 0 {
			t.Errorf("Imports(%.20q...) = %q, %v; want none", code, missing, err)
		}
	}
	if res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "1"}, runOpts{limit: &deadline{}}); err != nil || res.Status != StatusSuccess {
		t.Errorf("run afterwards: %+v, %v", res, err)
	}
}

func TestInstallOfABrokenWheelFails(t *testing.T) {
	s, w := warmWorker(t)
	ctx := context.Background()
	err := w.Conn.Install(ctx, []bridge.Payload{{File: bridge.File{Name: "broken-1.0-py3-none-any.whl"}, Data: []byte("not a zip")}})
	if err == nil {
		t.Fatal("a broken wheel installed")
	}
	// The worker still runs code after a failed install.
	if res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "1"}, runOpts{limit: &deadline{}}); err != nil || res.Status != StatusSuccess {
		t.Errorf("run after a failed install: %+v, %v", res, err)
	}
}

func TestWaitingForAWorkerDoesNotCountAgainstTheInstall(t *testing.T) {
	s := start(t, Config{Workers: 1, Timeout: time.Second, Grace: 500 * time.Millisecond})
	ctx := context.Background()
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		// Holds the only worker for the whole time limit and the grace.
		_, _ = s.Run(ctx, Request{Code: "while True:\n    pass"})
	}()
	time.Sleep(200 * time.Millisecond) // let the loop take the worker first
	res, err := s.Run(ctx, Request{Code: "import json\njson.dumps(1)"})
	if err != nil || res.Status != StatusSuccess {
		t.Errorf("a call that waited longer than its time limit for a worker: %+v, %v", res, err)
	}
	<-busy
}

// Packages are inferred from imports carefully: a name no package provides
// is skipped (Python raises ImportError only if the import runs), a
// look-alike project whose wheel does not provide the module is not
// installed, and a second look finds modules the first round's packages
// brought in.
func TestInferredImports(t *testing.T) {
	repo := &pt.Repo{}
	// lookmod on the index is a look-alike: its wheel holds lookmod_impl.
	repo.Add(pt.Wheel{Name: "lookmod", Version: "1.0", Package: "lookmod_impl", TopLevel: []string{"lookmod_impl"}})
	// mdplug needs mdcore-py, which provides the module mdcore; the index's
	// own "mdcore" project is a look-alike.
	repo.Add(pt.Wheel{Name: "mdplug", Version: "1.0", Requires: []string{"mdcore-py"}, Source: "PLUG = 'plug'\n"})
	repo.Add(pt.Wheel{Name: "mdcore-py", Version: "2.0", Package: "mdcore", Source: "CORE = 'core'\n"})
	repo.Add(pt.Wheel{Name: "mdcore", Version: "0.1", Package: "mdcore_fake"})
	srv, _ := repo.Serve(t, pt.Variant{JSON: true, Metadata: true}, 0)
	s := start(t, Config{Workers: 2, IndexURL: srv.URL + "/simple/"})

	tests := []struct {
		name, code string
		status     Status
		deps       []string
		output     string   // a line of the output, if set
		progress   []string // in the call's progress lines
		noProgress []string // not in them
	}{
		{
			name: "guarded and dead imports",
			code: "try:\n    import cPickle as pickle\nexcept ImportError:\n    import pickle\n" +
				"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import nosuch_typing_only\n" +
				"if False:\n    import lookmod\nprint(pickle.__name__)\n",
			status:   StatusSuccess,
			output:   "pickle",
			progress: []string{"skipping cPickle: no package provides it", "skipping nosuch_typing_only", "skipping look-alike lookmod 1.0"},
		},
		{
			name:     "a look-alike is not installed and the import fails when it runs",
			code:     "import lookmod\n",
			status:   StatusRunError,
			progress: []string{"skipping look-alike lookmod 1.0: lookmod-1.0-py3-none-any.whl does not provide module lookmod"},
		},
		{
			name:       "the second round finds the module a dependency brought",
			code:       "import mdplug, mdcore\nprint(mdplug.PLUG, mdcore.CORE, mdcore.__version__)\n",
			status:     StatusSuccess,
			deps:       []string{"mdplug"},
			output:     "plug core 2.0",
			progress:   []string{"skipping look-alike mdcore 0.1", "mdcore: provided by the packages installed"},
			noProgress: []string{"skipping mdcore:"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var progress []string
			res, err := s.Run(context.Background(), Request{Code: tc.code, OnLine: func(l Line) {
				if l.Stream == Progress {
					progress = append(progress, l.Text)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(progress, "\n")
			if res.Status != tc.status || !slices.Equal(res.Dependencies, tc.deps) {
				t.Errorf("got %s %q, dependencies %q; want %s, %q\nprogress:\n%s", res.Status, res.Error, res.Dependencies, tc.status, tc.deps, all)
			}
			if tc.output != "" && !slices.Contains(res.Output, tc.output) {
				t.Errorf("output %q lacks %q", res.Output, tc.output)
			}
			if tc.status == StatusRunError && !strings.Contains(res.Error, "ModuleNotFoundError: No module named 'lookmod'") {
				t.Errorf("error %q is not the import's", res.Error)
			}
			for _, p := range tc.progress {
				if !strings.Contains(all, p) {
					t.Errorf("progress lacks %q:\n%s", p, all)
				}
			}
			for _, p := range tc.noProgress {
				if strings.Contains(all, p) {
					t.Errorf("progress has %q:\n%s", p, all)
				}
			}
			for _, line := range res.Output {
				if strings.Contains(line, "skipping") {
					t.Errorf("a skip in the output: %q", line)
				}
			}
		})
	}
}
