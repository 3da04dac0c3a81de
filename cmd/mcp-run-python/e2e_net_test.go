package main_test

// End-to-end tests of Python's own HTTP clients: urllib3 2.x (its
// Emscripten backend) and requests on it, installed from a local index of
// the wheels in testdata/wheels (built from Debian's packages by
// testdata/wheels/build.sh), and urllib.request and http.client, which the
// runner routes through fetch. They reach a local HTTP server that
// --allow-net allows, under the network policy, --timeout and the output
// limit.
//
//	go test ./cmd/mcp-run-python/ -run TestPythonNetworking -count=1 -v

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

// netService is the local HTTP server the clients reach: / answers with a
// text, /echo with the request as the server saw it, /big with 2 MiB,
// /redirect?to=URL with a redirect, and /slow only when the request ends.
func netService(t *testing.T, text string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s x-test=%s body=%s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"), body)
		case "/big":
			w.Write([]byte(strings.Repeat("0123456789abcdef", 128<<10)))
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/slow":
			<-r.Context().Done()
		default:
			fmt.Fprint(w, text)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// netWheels is the local index of testdata/wheels, as a directory.
func netWheels(t *testing.T) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "testdata", "wheels", "*.whl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no wheels in testdata/wheels (%v): run testdata/wheels/build.sh", err)
	}
	r := &pt.Repo{}
	for _, p := range paths {
		if _, err := r.AddWheelFile(p); err != nil {
			t.Fatal(err)
		}
	}
	return r.Location(t, pt.Variant{JSON: true, Dir: true})
}

// netNormalise puts placeholders for the servers' addresses into a result,
// as the hostile probes' goldens have them.
func netNormalise(result, local, other string) string {
	pairs := []string{"$LOCAL", local, "$OTHER", other}
	result = strings.NewReplacer(local, "$LOCAL", other, "$OTHER").Replace(result)
	lines := strings.Split(result, "\n")
	for i := 1; i < len(lines); i++ {
		if caretLine.MatchString(lines[i]) && hasPlaceholder(lines[i-1], pairs) {
			lines[i] = "    $CARETS"
		}
	}
	return strings.Join(lines, "\n")
}

func TestPythonNetworking(t *testing.T) {
	s := setup(t)
	local := netService(t, "hello from a local service")
	other := netService(t, "hello from another local service")
	index := netWheels(t)
	// Pyodide's package host is unreachable here: the index's builds of
	// its pure-Python packages (urllib3, requests, idna, certifi) stand in.
	down := httptest.NewServer(http.NotFoundHandler())
	host := down.URL + "/"
	down.Close()
	packages := []string{"--index-url", index, "--pyodide-index-url", host, "--timeout", "60s", "--output-limit", "64KiB"}
	allow := startTarget(t, s, modeStdio, append(packages, "--workers", "2", "--allow-net", local)...).connect(t)
	byDefault := startTarget(t, s, modeStdio, append(packages, "--workers", "1")...).connect(t)
	off := startTarget(t, s, modeStdio, append(packages, "--workers", "1", "--disable-networking")...).connect(t)
	expand := strings.NewReplacer("$LOCAL", local, "$OTHER", other).Replace

	// A PEP 723 block pins the wheels of testdata/wheels.
	const deps = "# /// script\n# dependencies = [\"requests==2.32.3\", \"urllib3==2.3.0\"]\n# ///\n"
	reached := []struct{ name, code, want string }{
		{"urllib3", deps + "import urllib3\nr = urllib3.request('GET', 'http://$LOCAL/')\nr.status, r.data.decode()",
			`[200, "hello from a local service"]`},
		{"urllib3_post", deps + "import urllib3\nr = urllib3.request('POST', 'http://$LOCAL/echo?q=1', body=b'abc', headers={'X-Test': 'yes'})\n[r.data.decode()]",
			`["POST /echo?q=1 x-test=yes body=abc"]`},
		{"requests", deps + "import requests\nr = requests.get('http://$LOCAL/')\nr.status_code, r.text, r.headers['content-type']",
			`[200, "hello from a local service", "text/plain; charset=utf-8"]`},
		{"requests_post_json", deps + "import requests\nr = requests.post('http://$LOCAL/echo', json={'a': 1}, headers={'X-Test': 'j'})\n[r.text]",
			`["POST /echo x-test=j body={\"a\": 1}"]`},
		{"requests_session_redirect", deps + "import requests\nwith requests.Session() as s:\n    r = s.get('http://$LOCAL/redirect?to=/echo')\n[r.status_code, r.text, [h.status_code for h in r.history]]",
			`[200, "GET /echo x-test= body=", [302]]`},
		{"requests_big", deps + "import requests\nlen(requests.get('http://$LOCAL/big').content)", `2097152`},
		{"urlopen", "import urllib.request\nr = urllib.request.urlopen('http://$LOCAL/', timeout=5)\nr.status, r.read().decode()",
			`[200, "hello from a local service"]`},
		{"urlopen_redirect", "import urllib.request\n[urllib.request.urlopen('http://$LOCAL/redirect?to=/echo').read().decode()]",
			`["GET /echo x-test= body="]`},
		{"http_client", "import http.client\nc = http.client.HTTPConnection('$LOCAL', timeout=5)\nc.request('PUT', '/echo', body=b'x', headers={'X-Test': 'h'})\nr = c.getresponse()\nfirst = r.status, r.read().decode()\nc.request('GET', '/')\nfirst, c.getresponse().read().decode()",
			`[[200, "PUT /echo x-test=h body=x"], "hello from a local service"]`},
	}
	for _, tc := range reached {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := allow.run(t, expand(tc.code))
			value, ok := strings.CutPrefix(got, "<status>success</status>\n")
			if !ok {
				t.Fatalf("%s", got)
			}
			_, value, _ = strings.Cut(value, "<return_value>\n")
			value = strings.TrimSuffix(value, "\n</return_value>")
			if compact := compactJSON(t, value); compact != compactJSON(t, tc.want) {
				t.Errorf("got %s, want %s", compact, tc.want)
			}
		})
	}

	// What the policy refuses says so and names the flag; never Errno 23.
	refused := []struct {
		name string
		c    *e2eClient
		code string
	}{
		{"allow_requests_other_port", allow, deps + "import requests\nrequests.get('http://$OTHER/')"},
		{"allow_urllib3_other_port", allow, deps + "import urllib3\nurllib3.request('GET', 'http://$OTHER/', retries=False)"},
		{"allow_requests_redirect_to_other_port", allow, deps + "import requests\nrequests.get('http://$LOCAL/redirect?to=http://$OTHER/')"},
		{"default_requests_local_service", byDefault, deps + "import requests\nrequests.get('http://$LOCAL/')"},
		{"off_urllib3", off, deps + "import urllib3\nurllib3.request('GET', 'http://$LOCAL/', retries=False)"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := netNormalise(tc.c.run(t, expand(tc.code)), local, other)
			if strings.Contains(got, "Errno 23") {
				t.Errorf("a bare Errno 23:\n%s", got)
			}
			golden(t, filepath.Join("net", tc.name+".txt"), got)
		})
	}

	t.Run("time_limit", func(t *testing.T) {
		// The fetch a client waits on is cut at the time limit, and the
		// code is interrupted rather than killed with its worker. (15 s:
		// importing requests takes seconds on a loaded machine.) The two
		// calls wait side by side, and beside the other subtests: their
		// time is spent waiting, not on a core.
		t.Parallel()
		c := startTarget(t, s, modeStdio, append(packages, "--workers", "2", "--allow-net", local, "--timeout", "15s", "--grace", "2s")...).connect(t)
		// From goroutines rather than with t.Parallel, which -parallel
		// caps at GOMAXPROCS, as TestHostile's probes.
		var wg sync.WaitGroup
		for _, tc := range []struct{ name, code string }{
			{"requests", deps + "import requests\nrequests.get('http://$LOCAL/slow')"},
			{"urllib", "import urllib.request\nurllib.request.urlopen('http://$LOCAL/slow')"},
		} {
			wg.Go(func() {
				t.Run(tc.name, func(t *testing.T) {
					start := time.Now()
					got := c.run(t, expand(tc.code))
					if !strings.Contains(got, "TimeoutError: the code did not finish within 15s and was interrupted") {
						t.Errorf("got:\n%s", got)
					}
					if d := time.Since(start); d > 25*time.Second {
						t.Errorf("took %v", d)
					}
				})
			})
		}
		wg.Wait()
		c.expectWorks(t)
	})

	t.Run("output_limit", func(t *testing.T) {
		// A 2 MiB response returned whole is cut to --output-limit.
		got := allow.run(t, expand(deps+"import requests\nrequests.get('http://$LOCAL/big').text"))
		if len(got) > 80<<10 || !strings.Contains(got, "0123456789abcdef") {
			t.Errorf("the result is %d bytes: %.300s", len(got), got)
		}
	})
}

// compactJSON is text, JSON, without its spaces.
func compactJSON(t *testing.T, text string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, text)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
