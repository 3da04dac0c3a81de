package worker

import (
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/permissions"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
)

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
			s := &Starter{Config: tt.cfg, Bridge: b, Addrs: NewAddrWatch(host.read, zap.NewNop(), nil)}
			want := tt.want
			want.Program, want.Bridge = filepath.FromSlash("/c/js/v"), permissions.Bridge{Addr: b.Addr(), Socket: b.Socket()}
			got, gen := s.Policy(rt, tt.makeSnapshot)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("policy:\n got %+v\nwant %+v", got, want)
			}
			if all := got.Network.All; all != (gen != 0) {
				t.Errorf("policy's generation of the host's addresses: %d, with the default network %v", gen, all)
			}
		})
	}
}
