package packages

import (
	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"

	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseJSONPage(t *testing.T) {
	page, _ := url.Parse("https://index.test/simple/foo/")
	doc := `{"meta": {"api-version": "1.1"}, "name": "foo", "files": [
		{"filename": "foo-1.0-py3-none-any.whl", "url": "../../files/foo-1.0-py3-none-any.whl", "hashes": {"sha256": "AB", "md5": "x"},
		 "requires-python": ">=3.8", "yanked": false, "core-metadata": {"sha256": "CD"}, "size": 123},
		{"filename": "foo-1.1-py3-none-any.whl", "url": "https://files.test/foo-1.1-py3-none-any.whl", "hashes": {},
		 "yanked": "bad build", "dist-info-metadata": true},
		{"filename": "foo-1.2.tar.gz", "url": "foo-1.2.tar.gz", "hashes": {"sha256": "ef"}, "yanked": true, "core-metadata": false},
		{"filename": "../evil.whl", "url": "x", "hashes": {}},
		{"filename": "foo-1.3-py3-none-any.whl", "url": "file:///etc/passwd", "hashes": {}}
	]}`
	p, err := parseJSONPage("foo", page, []byte(doc), true)
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexFile{
		{Filename: "foo-1.0-py3-none-any.whl", URL: "https://index.test/files/foo-1.0-py3-none-any.whl", SHA256: "ab",
			RequiresPython: ">=3.8", MetadataURL: "https://index.test/files/foo-1.0-py3-none-any.whl.metadata", MetadataSHA256: "cd", Size: 123},
		{Filename: "foo-1.1-py3-none-any.whl", URL: "https://files.test/foo-1.1-py3-none-any.whl", Yanked: true, YankedReason: "bad build",
			MetadataURL: "https://files.test/foo-1.1-py3-none-any.whl.metadata"},
		{Filename: "foo-1.2.tar.gz", URL: "https://index.test/simple/foo/foo-1.2.tar.gz", SHA256: "ef", Yanked: true},
	}
	if !reflect.DeepEqual(p.Files, want) {
		t.Errorf("got  %+v\nwant %+v", p.Files, want)
	}
	if _, err := parseJSONPage("foo", page, []byte(`{"meta": {"api-version": "2.0"}, "files": []}`), true); err == nil {
		t.Error("API version 2.0 accepted")
	}
	if _, err := parseJSONPage("foo", page, []byte(`{`), true); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestParseHTMLPage(t *testing.T) {
	page, _ := url.Parse("https://index.test/simple/foo/")
	doc := `<!DOCTYPE html><html><head><base href="https://mirror.test/pkgs/"></head><body>
<a href="foo-1.0-py3-none-any.whl#sha256=AB" data-requires-python="&gt;=3.8,&lt;4" data-core-metadata="sha256=CD">foo-1.0-py3-none-any.whl</a><br>
<a href="/other/foo-1.1-py3-none-any.whl#md5=00" data-yanked="" data-dist-info-metadata="true">
  foo-1.1-py3-none-any.whl </a>
<a href="https://files.test/foo-1.2.tar.gz#sha256=ef"></a>
<a href="file:///etc/foo-1.3-py3-none-any.whl">foo-1.3-py3-none-any.whl</a>
<a>no href</a>
</body></html>`
	p, err := parseHTMLPage("foo", page, []byte(doc), true)
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexFile{
		{Filename: "foo-1.0-py3-none-any.whl", URL: "https://mirror.test/pkgs/foo-1.0-py3-none-any.whl", SHA256: "ab",
			RequiresPython: ">=3.8,<4", MetadataURL: "https://mirror.test/pkgs/foo-1.0-py3-none-any.whl.metadata", MetadataSHA256: "cd"},
		{Filename: "foo-1.1-py3-none-any.whl", URL: "https://mirror.test/other/foo-1.1-py3-none-any.whl", Yanked: true,
			MetadataURL: "https://mirror.test/other/foo-1.1-py3-none-any.whl.metadata"},
		{Filename: "foo-1.2.tar.gz", URL: "https://files.test/foo-1.2.tar.gz", SHA256: "ef"},
	}
	if !reflect.DeepEqual(p.Files, want) {
		t.Errorf("got  %+v\nwant %+v", p.Files, want)
	}
}

func TestIndexProject(t *testing.T) {
	repo := standardRepo(t)
	for _, v := range pt.AllVariants() {
		t.Run(v.String(), func(t *testing.T) {
			ix, err := NewIndex(repo.Location(t, v), nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ix.Project(testContext(t), "BETA")
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != "beta" || len(p.Files) != 1 || p.Files[0].Filename != "beta-1.0-py3-none-any.whl" ||
				(p.Files[0].MetadataURL != "") != v.Metadata {
				t.Fatalf("project: %+v", p)
			}
			md, err := ix.Metadata(testContext(t), p.Files[0])
			if err != nil {
				t.Fatal(err)
			}
			if md.Name != "Beta" || len(md.RequiresDist) != 4 {
				t.Errorf("metadata: %+v", md)
			}
			_, err = ix.Project(testContext(t), "missing")
			if !errors.Is(err, ErrProjectNotFound) {
				t.Errorf("missing project: %v", err)
			}
		})
	}
}

func TestIndexMetadataFallback(t *testing.T) {
	repo := standardRepo(t)
	v := pt.Variant{JSON: true, Metadata: true}
	dir := repo.Write(t, v)
	// The page promises a metadata file that is not there: read the wheel.
	if err := os.Remove(filepath.Join(dir, "files", "beta-1.0-py3-none-any.whl.metadata")); err != nil {
		t.Fatal(err)
	}
	// And one whose hash is wrong.
	if err := os.WriteFile(filepath.Join(dir, "files", "gamma-1.0-py3-none-any.whl.metadata"), []byte("Name: gamma\nVersion: 6.6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndex(filepath.Join(dir, "simple"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ix.Project(testContext(t), "beta")
	if md, err := ix.Metadata(testContext(t), p.Files[0]); err != nil || md.Version != "1.0" {
		t.Errorf("fallback to the wheel: %+v, %v", md, err)
	}
	p, _ = ix.Project(testContext(t), "gamma")
	var he *hashError
	if _, err := ix.Metadata(testContext(t), p.Files[0]); !errors.As(err, &he) {
		t.Errorf("metadata with a wrong hash: %v", err)
	}
}

func TestIndexServerErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/broken/"):
			http.Error(w, "oops", http.StatusInternalServerError)
		case strings.Contains(r.URL.Path, "/forbidden/"):
			http.Error(w, "no", http.StatusForbidden)
		case strings.Contains(r.URL.Path, "/evil/"):
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<a href="file:///etc/passwd#sha256=` + strings.Repeat("a", 64) + `">evil-1.0-py3-none-any.whl</a>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ix, err := NewIndex(srv.URL+"/simple", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"broken", "forbidden"} {
		_, err := ix.Project(testContext(t), name)
		var ue *UnreachableError
		if !errors.As(err, &ue) || ue.Status == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, err := ix.Project(testContext(t), "evil")
	if err != nil || len(p.Files) != 0 {
		t.Errorf("a remote page linked to a local file: %+v, %v", p, err)
	}
	r, err := NewResolver(Config{IndexURL: srv.URL + "/simple/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(testContext(t), []string{"broken"})
	wantKind(t, err, KindUnreachable)
}

// TestUnreachableNamesTheCause: a server without egress gets its install
// error after Go's resolver or dialer gives up, and that error must say why
// in words, not only "i/o timeout". The dialer here fails as Go's own does
// when no DNS server answers, when the name has no address, and when the
// connection's packets are dropped.
func TestUnreachableNamesTheCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial error
		want string
	}{
		{"dns timeout",
			&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "pypi.test", Server: "10.96.0.10:53", IsTimeout: true}},
			"(no DNS server answered for pypi.test: this server seems to have no network egress, or no DNS)"},
		{"no such host",
			&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "pypi.test", IsNotFound: true}},
			"(pypi.test has no address in this server's DNS)"},
		{"connect timeout",
			&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443}, Err: timeoutError{}},
			"(the connection timed out: a firewall or NetworkPolicy seems to drop this server's egress)"},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
				return nil, tc.dial
			}}}
			r, err := NewResolver(Config{IndexURL: "http://pypi.test/simple/", HTTPClient: client})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Resolve(testContext(t), []string{"alpha"})
			msg := wantKind(t, err, KindUnreachable).Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q\nlacks %q", msg, tc.want)
			}
			if tc.name == "refused" && strings.Contains(msg, "seems") {
				t.Errorf("a refused connection blamed on the network: %q", msg)
			}
		})
	}
}

// timeoutError is the error of a dial whose packets were dropped.
type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func TestParseLocation(t *testing.T) {
	dir := t.TempDir()
	// A URL's path: /C:/dir on Windows.
	path := filepath.ToSlash(dir)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "https://pypi.test/simple", want: "https://pypi.test/simple/"},
		{in: "http://127.0.0.1:8080/simple/", want: "http://127.0.0.1:8080/simple/"},
		{in: dir, want: "file://" + path + "/"},
		{in: "file://" + path, want: "file://" + path + "/"},
		{in: "", bad: true},
		{in: "ftp://x/", bad: true},
		{in: "file://relative/path", bad: true},
	}
	for _, tc := range tests {
		u, err := parseLocation(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v", tc.in, u)
			}
			continue
		}
		if err != nil || u.String() != tc.want {
			t.Errorf("%q: %v, %v; want %s", tc.in, u, err, tc.want)
			continue
		}
		// A file a local index links to is read from its local path.
		if u.Scheme == "file" {
			link := u.ResolveReference(&url.URL{Path: "files/x.whl"})
			if got, want := sourceString(link), filepath.Join(dir, "files", "x.whl"); got != want {
				t.Errorf("%q: a linked file is at %q, want %q", tc.in, got, want)
			}
		}
	}
}

// TestPageFilesBound: a project page listing more than maxPageFiles files
// is refused rather than held: 64 MiB of minimal links made 4.5 million
// entries, 897 MiB kept. Tags other than links take nothing.
func TestPageFilesBound(t *testing.T) {
	page, _ := url.Parse("https://index.test/simple/a/")
	html := func(n int) []byte {
		return []byte("<p><b>" + strings.Repeat("<i x=1>", maxPageFiles) + strings.Repeat("<a href=x>b</a>", n))
	}
	jsonPage := func(n int) []byte {
		return []byte(`{"meta":{"api-version":"1.0"},"name":"a","files":[` +
			strings.TrimSuffix(strings.Repeat(`{"filename":"b","url":"x"},`, n), ",") + `]}`)
	}
	for _, tt := range []struct {
		name  string
		parse func(string, *url.URL, []byte, bool) (*Project, error)
		page  func(int) []byte
	}{{"html", parseHTMLPage, html}, {"json", parseJSONPage, jsonPage}} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.parse("a", page, tt.page(maxPageFiles), true)
			if err != nil || len(p.Files) != maxPageFiles {
				t.Fatalf("a page at the limit: %v", err)
			}
			if _, err := tt.parse("a", page, tt.page(maxPageFiles+1), true); !errors.Is(err, errTooManyFiles) {
				t.Errorf("a page past the limit: %v, want %v", err, errTooManyFiles)
			}
		})
	}
}

// TestPlainFilename: the file names an index lists that are used as cache
// file names and printed: none that leaves its directory, and none with a
// control character, which fetch would print to a terminal.
func TestPlainFilename(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"six-1.17.0-py2.py3-none-any.whl", true},
		{"", false},
		{"..", false},
		{"../six-1.17.0-py3-none-any.whl", false},
		{`..\six-1.17.0-py3-none-any.whl`, false},
		{"six\x00.whl", false},
		{"six-1.0-py3-none-any.whl\x1b]0;owned\x07", false},
		{"six-1.0-py3-none-any.whl\r\x1b[2K", false},
		{"six-1.0\u0085-py3-none-any.whl", false},
		{strings.Repeat("s", 251) + ".whl", true},
		{strings.Repeat("s", 252) + ".whl", false},
	} {
		if got := plainFilename(tt.name); got != tt.ok {
			t.Errorf("plainFilename(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}
