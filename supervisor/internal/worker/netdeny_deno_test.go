package worker

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/permissions"
	"github.com/mcp-run-python/mcp-run-python/supervisor/denotest"
)

// queryJS prints, as one JSON object, whether deno grants a connection to
// each host:port of its arguments.
const queryJS = `const r = {};
for (const h of Deno.args) r[h] = Deno.permissions.querySync({ name: "net", host: h }).state;
console.log(JSON.stringify(r));
`

// TestDeniedNetsWithRealDeno runs deno under the default network's flags:
// it takes the whole list (an IPv6 network in it would stop it), denies the
// private networks, however an address is spelt, and grants them, but not
// this host, with private networks allowed.
func TestDeniedNetsWithRealDeno(t *testing.T) {
	if testing.Short() {
		t.Skip("starts deno")
	}
	deno := denotest.Deno(t)
	probe := filepath.Join(t.TempDir(), "query.js")
	if err := os.WriteFile(probe, []byte(queryJS), 0o644); err != nil {
		t.Fatal(err)
	}
	own := []netip.Addr{netip.MustParseAddr("192.168.7.7"), netip.MustParseAddr("fd12:3456::7")}
	private := map[string]string{
		"10.0.0.1:80": "denied", "10.255.255.254:443": "denied", "172.16.0.1:80": "denied", "172.31.255.254:80": "denied",
		"192.168.1.1:80": "denied", "100.64.0.1:80": "denied", "100.127.255.254:80": "denied",
		"[::ffff:10.1.2.3]:80": "denied", "[::ffff:c0a8:101]:80": "denied",
	}
	tests := []struct {
		name    string
		private bool // denied
		want    map[string]string
	}{
		{"private networks denied", true, private},
		{"private networks allowed", false, map[string]string{"10.0.0.1:80": "granted", "172.20.0.1:80": "granted",
			"192.168.1.1:80": "granted", "100.64.0.1:80": "granted"}},
	}
	always := map[string]string{
		"8.8.8.8:53": "granted", "172.15.255.255:80": "granted", "172.32.0.1:80": "granted", "100.63.255.255:80": "granted",
		"100.128.0.1:80": "granted", "[2001:4860:4860::8888]:443": "granted",
		"127.0.0.1:80": "denied", "169.254.169.254:80": "denied", "192.168.7.7:80": "denied", "[fd12:3456::7]:80": "denied",
		"[fd12:3456:0:0:0:0:0:7]:80": "denied",
		// What deno cannot deny: IPv6 networks, of which only the host's
		// own addresses are named (see deniedPrivate).
		"[fd12:3456::8]:80": "granted", "[fc00::1]:80": "granted", "[64:ff9b::a00:1]:80": "granted",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := permissions.Policy{Network: permissions.Network{All: true, Deny: deniedNets(false, tt.private, own)}}
			want := map[string]string{}
			for _, m := range []map[string]string{always, tt.want} {
				for h, s := range m {
					want[h] = s
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append(append([]string{"run"}, permissions.Flags(p)...), probe)
			for h := range want {
				args = append(args, h)
			}
			cmd := exec.CommandContext(ctx, deno, args...)
			cmd.Env = append(os.Environ(), "DENO_NO_UPDATE_CHECK=1", "NO_COLOR=1")
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if exit, ok := err.(*exec.ExitError); ok {
					stderr = exit.Stderr
				}
				t.Fatalf("deno %q: %v: %s", args, err, stderr)
			}
			got := map[string]string{}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("probe output %q: %v", out, err)
			}
			for h, w := range want {
				if got[h] != w {
					t.Errorf("%s: %s, want %s", h, got[h], w)
				}
			}
		})
	}
}
