package permissions

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// lockdown is what every worker process gets whatever its policy, with the
// write flag in place of %s: denied, or the bridge's socket alone.
func lockdown(write string) []string {
	if write == "" {
		write = "--deny-write"
	}
	return []string{
		"--no-prompt", "--no-remote", "--no-npm", "--no-config", "--no-lock", "--unstable-worker-options",
		write, "--deny-env", "--deny-run", "--deny-ffi", "--deny-sys", "--deny-import",
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		write  string   // the write flag; "" for --deny-write
		want   []string // after the lockdown flags
	}{
		{
			name:   "nothing allowed",
			policy: Policy{},
			want:   []string{"--no-code-cache", "--deny-read", "--deny-net"},
		},
		{
			name:   "runtime files and bridge, no network",
			policy: Policy{Read: []string{"/c/pyodide", "/c/snap.bin"}, Program: "/c/js", Bridge: Bridge{Addr: "127.0.0.1:4000"}},
			want:   []string{"--no-code-cache", "--allow-read=/c/js,/c/pyodide,/c/snap.bin", "--allow-net=127.0.0.1:4000"},
		},
		{
			name:   "network for user code includes everything",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "127.0.0.1:4000"}, Network: Network{All: true}},
			want:   []string{"--no-code-cache", "--allow-read=/p", "--allow-net"},
		},
		{
			name:   "some hosts plus the bridge",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "127.0.0.1:4000"}, Network: Network{Hosts: []string{"example.com:443", "10.0.0.1"}}},
			want:   []string{"--no-code-cache", "--allow-read=/p", "--allow-net=example.com:443,10.0.0.1,127.0.0.1:4000"},
		},
		{
			name:   "commas in paths are doubled: deno 2.9 then refuses to start, never widens",
			policy: Policy{Read: []string{"/a,b"}},
			want:   []string{"--no-code-cache", "--allow-read=/a,,b", "--deny-net"},
		},
		{
			name:   "a socket bridge, no network: only its path, and unix: to open it",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "192.0.2.1:80", Socket: "/run/x/bridge.sock"}},
			write:  "--allow-write=/run/x/bridge.sock",
			want:   []string{"--no-code-cache", "--allow-read=/p,/run/x/bridge.sock", "--allow-net=192.0.2.1:80,unix:/run/x/bridge.sock"},
		},
		{
			name: "a socket bridge, all network but the denied",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "192.0.2.1:80", Socket: "/run/x/bridge.sock"},
				Network: Network{All: true, Deny: []string{"127.0.0.0/8", "[::1]"}}},
			write: "--allow-write=/run/x/bridge.sock",
			want:  []string{"--no-code-cache", "--allow-read=/p,/run/x/bridge.sock", "--allow-net", "--deny-net=127.0.0.0/8,[::1]"},
		},
		{
			name:   "a socket bridge and some hosts",
			policy: Policy{Bridge: Bridge{Addr: "192.0.2.1:80", Socket: "/s"}, Network: Network{Hosts: []string{"example.com"}}},
			write:  "--allow-write=/s",
			want:   []string{"--no-code-cache", "--allow-read=/s", "--allow-net=example.com,192.0.2.1:80,unix:/s"},
		},
		{
			name:   "a code cache of its own",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "127.0.0.1:4000"}, CodeCache: true},
			want:   []string{"--allow-read=/p", "--allow-net=127.0.0.1:4000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Flags(tt.policy)
			want := append(lockdown(tt.write), tt.want...)
			if !slices.Equal(got, want) {
				t.Errorf("Flags(%+v)\n got %q\nwant %q", tt.policy, got, want)
			}
			for _, f := range got {
				if strings.HasPrefix(f, "--allow-write") && f != "--allow-write="+tt.policy.Bridge.Socket ||
					strings.HasPrefix(f, "--allow-env") ||
					strings.HasPrefix(f, "--allow-run") || strings.HasPrefix(f, "--allow-all") || f == "-A" {
					t.Errorf("Flags grants %s", f)
				}
			}
		})
	}
}

func TestRunner(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   string
	}{
		{
			name:   "no network: not even the bridge",
			policy: Policy{Read: []string{"/p", "/s"}, Program: "/js", Bridge: Bridge{Addr: "127.0.0.1:4000"}},
			want:   `{"read":["/p","/s"],"net":false,"write":false,"env":false,"run":false,"ffi":false,"sys":false,"import":false}`,
		},
		{
			name:   "a socket bridge: neither its path nor unix: for the runner",
			policy: Policy{Read: []string{"/p"}, Bridge: Bridge{Addr: "192.0.2.1:80", Socket: "/s"}, Network: Network{All: true, Deny: []string{"127.0.0.0/8"}}},
			want:   `{"read":["/p"],"net":true,"write":false,"env":false,"run":false,"ffi":false,"sys":false,"import":false}`,
		},
		{
			name:   "all network",
			policy: Policy{Bridge: Bridge{Addr: "127.0.0.1:4000"}, Network: Network{All: true}},
			want:   `{"read":false,"net":true,"write":false,"env":false,"run":false,"ffi":false,"sys":false,"import":false}`,
		},
		{
			name:   "listed hosts only",
			policy: Policy{Bridge: Bridge{Addr: "127.0.0.1:4000"}, Network: Network{Hosts: []string{"example.com"}}},
			want:   `{"read":false,"net":["example.com"],"write":false,"env":false,"run":false,"ffi":false,"sys":false,"import":false}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Runner(tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Runner(%+v)\n got %s\nwant %s", tt.policy, b, tt.want)
			}
		})
	}
}

func TestFlagsDoNotAliasPolicy(t *testing.T) {
	p := Policy{Read: make([]string, 1, 10), Program: "/js", Network: Network{Hosts: make([]string, 1, 10)}, Bridge: Bridge{Addr: "b:1", Socket: "/run/b.sock"}}
	p.Read[0], p.Network.Hosts[0] = "/p", "h"
	Flags(p)
	Runner(p)
	if got := p.Read[:2]; got[1] != "" {
		t.Errorf("Flags wrote into the policy's Read: %q", got)
	}
	if got := p.Network.Hosts[:2]; got[1] != "" {
		t.Errorf("Flags wrote into the policy's Hosts: %q", got)
	}
}

func TestParseHost(t *testing.T) {
	tests := []struct {
		entry, want string
	}{
		{"example.com", "example.com"},
		{" Example.COM:443 ", "example.com:443"},
		{"localhost", "localhost"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"a-b.c0.example:65535", "a-b.c0.example:65535"},
		{"::1", "[::1]"},
		{"[::1]", "[::1]"},
		{"[::1]:8080", "[::1]:8080"},
		{"[2001:DB8::1]:443", "[2001:db8::1]:443"},
	}
	for _, tt := range tests {
		got, err := ParseHost(tt.entry)
		if err != nil || got != tt.want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", tt.entry, got, err, tt.want)
		}
	}
}

func TestParseHostErrors(t *testing.T) {
	tests := []struct {
		entry, mention string
	}{
		{"", "empty host"},
		{"   ", "empty host"},
		{"http://example.com", "not a URL"},
		{"example.com/path", "not a URL"},
		{"example.com:0", "1 to 65535"},
		{"example.com:65536", "1 to 65535"},
		{"example.com:http", "1 to 65535"},
		{"example.com:", "1 to 65535"},
		{"example.com:+80", "1 to 65535"},
		{"a:b:c", "1 to 65535"},
		{"*.example.com", "not a host name"},
		{"a_b.com", "not a host name"},
		{"-a.com", "not a host name"},
		{"a..com", "not a host name"},
		{"1.2.3.4.5", "not an IPv4 address"},
		{"256.0.0.1", "not an IPv4 address"},
		{"[::1", "closing ]"},
		{"[127.0.0.1]:80", "not an IPv6 address"},
		{"[::1]80", "expected :PORT"},
		{"[::1]:0", "1 to 65535"},
		{"fe80::1%eth0", "zones"},
		{"unix:/run/docker.sock", "not a URL"},
		{strings.Repeat("a.", 127) + "com", "longer than 253"},
	}
	for _, tt := range tests {
		got, err := ParseHost(tt.entry)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("ParseHost(%q) = %q, %v; want an error mentioning %q", tt.entry, got, err, tt.mention)
		}
	}
}
