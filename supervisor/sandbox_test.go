package supervisor

import (
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/permissions"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
)

// TestCallsLeaveDenoDirAlone checks that workers write nothing into the
// cache's DENO_DIR, where deno keeps caches it writes whatever --deny-write
// says: a call that could add to them could plant code for later workers.
// The cache is a private copy (hard links) of the shared one, so that other
// tests' workers, or other checkouts' older builds, cannot change it meanwhile.
func TestCallsLeaveDenoDirAlone(t *testing.T) {
	shared := testCache(t)
	private := t.TempDir()
	for _, dir := range []string{"pyodide", "snapshots", "codecache"} {
		if _, err := os.Stat(filepath.Join(shared, dir)); err != nil {
			continue // the warmup below makes it
		}
		if err := linkTree(filepath.Join(shared, dir), filepath.Join(private, dir)); err != nil {
			t.Fatalf("copy the cache's %s: %v", dir, err)
		}
	}
	denoDir := runtimefiles.Layout{Root: private}.DenoDir()
	if err := os.MkdirAll(denoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Workers: 1, CacheDir: private})
	// The code cache template that workers copy must not change either.
	codeCache := s.runtime.Files().CodeCache
	if codeCache == "" {
		t.Fatal("no code cache template")
	}
	before := append(tree(t, denoDir), tree(t, codeCache)...)

	entries, _ := filepath.Glob(filepath.Join(private, "pyodide", "*", "node_modules", "pyodide", "pyodide.mjs"))
	if len(entries) != 1 {
		t.Fatalf("pyodide.mjs in %s: %q", private, entries)
	}
	module, err := filepath.EvalSymlinks(entries[0]) // the path the runner may read
	if err != nil {
		t.Fatal(err)
	}
	// Modules loaded during a call would be analysed and code-cached by deno.
	// Python has no import() and workers refuse code from strings, so a
	// module Worker made from a data: URL imports it and posts its version.
	// On Windows the URL's path is /C:/...
	url := filepath.ToSlash(module)
	if !strings.HasPrefix(url, "/") {
		url = "/" + url
	}
	code := fmt.Sprintf(`import js
from asyncio import Future
from pyodide.ffi import create_proxy, to_js
version = Future()
source = "import('file://%s?call').then((m) => postMessage(m.version), (e) => postMessage('failed: ' + e))"
worker = js.Worker.new('data:text/javascript,' + js.encodeURIComponent(source), to_js({'type': 'module'}, dict_converter=js.Object.fromEntries))
worker.onmessage = create_proxy(lambda e: version.set_result(e.data))
try:
    v = await version
finally:
    worker.terminate()
v`, url)
	res, _ := run(t, s, code)
	if res.Status != StatusSuccess || !regexp.MustCompile(`^"\d+\.\d+\.\d+"$`).Match(res.ReturnValue) {
		t.Fatalf("the call importing pyodide.mjs: %+v", res)
	}
	// The Cache API stores what it is given under DENO_DIR, whatever
	// --deny-write says: one call could leave data for the next.
	run(t, s, "import js\ntry:\n    await js.caches.open('left-for-the-next-call')\nexcept Exception as e:\n    print(e)")
	if after := append(tree(t, denoDir), tree(t, codeCache)...); !slices.Equal(before, after) {
		t.Errorf("DENO_DIR changed during calls:\nbefore: %q\n after: %q", before, after)
	}
}

// linkTree makes dst a copy of src whose files are hard links, as GNU's
// cp -al does (macOS's cp has no -l, Windows no cp).
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return os.Link(path, to)
		default: // a symlink; on Windows also a junction, as deno makes in node_modules
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
	})
}

// tree lists every file under dir with its size and modification time.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, fmt.Sprintf("%s %d %s", path, info.Size(), info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestPolicy(t *testing.T) {
	b, err := bridge.Listen(zap.NewNop(), 1<<20, filepath.Join(t.TempDir(), "b.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	rt := &runtimefiles.Files{Entry: "/c/js/v/worker.ts", Pyodide: "/c/pyodide", Snapshot: "/c/snap.bin"}
	host := &fakeAddrs{addrs: []net.Addr{ipnet(t, "127.0.0.1/8"), ipnet(t, "192.168.7.7/24")}}
	own := []netip.Addr{netip.MustParseAddr("192.168.7.7")}
	tests := []struct {
		name         string
		cfg          Config
		makeSnapshot bool
		want         permissions.Policy
	}{
		{"networking", Config{Networking: true}, false,
			permissions.Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}, Network: permissions.Network{All: true, Deny: deniedNets(false, true, own)}}},
		{"networking with private networks", Config{Networking: true, PrivateNetworks: true}, false,
			permissions.Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}, Network: permissions.Network{All: true, Deny: deniedNets(false, false, own)}}},
		{"no networking", Config{}, false,
			permissions.Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}}},
		{"allowed hosts only", Config{Networking: true, AllowNet: []string{"127.0.0.1:9", "[::1]"}}, false,
			permissions.Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}, Network: permissions.Network{Hosts: []string{"127.0.0.1:9", "[::1]"}}}},
		{"the snapshot maker gets no network", Config{Networking: true}, true,
			permissions.Policy{Read: []string{"/c/pyodide"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Supervisor{cfg: tt.cfg, bridge: b, addrs: NewAddrWatch(host.read, zap.NewNop(), nil)}
			want := tt.want
			want.Program, want.Bridge = filepath.FromSlash("/c/js/v"), permissions.Bridge{Addr: b.Addr(), Socket: b.Socket()}
			got, gen := s.policy(rt, tt.makeSnapshot)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("policy:\n got %+v\nwant %+v", got, want)
			}
			if all := got.Network.All; all != (gen != 0) {
				t.Errorf("policy's generation of the host's addresses: %d, with the default network %v", gen, all)
			}
		})
	}
}
