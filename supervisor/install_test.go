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
)

// wheel builds a pure-Python wheel with one module file.
func wheel(t *testing.T, name, version, source string) bridge.Wheel {
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
	return bridge.Wheel{File: bridge.File{Name: name + "-" + version + "-py3-none-any.whl"}, Data: buf.Bytes()}
}

// takeWorker returns a supervisor and a warm worker taken from it, retired
// when the test ends.
func takeWorker(t *testing.T) (*Supervisor, *worker) {
	t.Helper()
	s := start(t, Config{Workers: 1})
	w, err := s.pool.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.pool.retire(w) })
	return s, w
}

func TestWorkerImportsAndInstalls(t *testing.T) {
	s, w := takeWorker(t)
	ctx := context.Background()

	code := "import json, tinypkg\nfrom tinypkg import VALUE\nimport other.sub\nVALUE"
	missing, err := w.conn.Imports(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	// As find_imports gives them: sorted, with parents; json is there already.
	if want := []string{"other", "other.sub", "tinypkg"}; !slices.Equal(missing, want) {
		t.Errorf("Imports = %q, want %q", missing, want)
	}
	if err := w.conn.Install(ctx, []bridge.Wheel{wheel(t, "tinypkg", "1.0", "VALUE = 'from a wheel'\n")}); err != nil {
		t.Fatal(err)
	}
	res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "import tinypkg\ntinypkg.VALUE"}, &deadline{}, nil)
	if err != nil || res.Status != StatusSuccess || string(res.ReturnValue) != `"from a wheel"` {
		t.Errorf("after the install: %+v, %v", res, err)
	}
}

func TestImportsOfCodeThatCannotBeParsed(t *testing.T) {
	s, w := takeWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Nesting deep enough to exhaust the parser, then a syntax error: the
	// worker answers with no imports and leaves the run to report them.
	for _, code := range []string{"import a\n" + strings.Repeat("-", 200000) + "1", "import a\nx = ("} {
		if missing, err := w.conn.Imports(ctx, code); err != nil || len(missing) != 0 {
			t.Errorf("Imports(%.20q...) = %q, %v; want none", code, missing, err)
		}
	}
	if res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "1"}, &deadline{}, nil); err != nil || res.Status != StatusSuccess {
		t.Errorf("run afterwards: %+v, %v", res, err)
	}
}

func TestInstallOfABrokenWheelFails(t *testing.T) {
	s, w := takeWorker(t)
	ctx := context.Background()
	err := w.conn.Install(ctx, []bridge.Wheel{{File: bridge.File{Name: "broken-1.0-py3-none-any.whl"}, Data: []byte("not a zip")}})
	if err == nil {
		t.Fatal("a broken wheel installed")
	}
	// The worker still runs code after a failed install.
	if res, _, err := s.call(ctx, w, bridge.RunRequest{Code: "1"}, &deadline{}, nil); err != nil || res.Status != StatusSuccess {
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
