package supervisor

import (
	"net"
	"slices"
	"testing"
)

func TestDeniedNets(t *testing.T) {
	ipnet := func(s string) net.Addr {
		t.Helper()
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	host := []net.Addr{ipnet("127.0.0.1/8"), ipnet("::1/128"), ipnet("10.1.2.3/24"), ipnet("fe80::1c2d:3e4f:5a6b:7c8d/64"), ipnet("2001:db8::5/64")}
	tests := []struct {
		name        string
		tcpBridge   bool
		addrs       []net.Addr
		want, avoid []string
	}{
		{"a Unix socket bridge: loopback denied", false, host,
			[]string{"127.0.0.0/8", "[::1]", "0.0.0.0/8", "169.254.0.0/16", "[fd00:ec2::254]", "10.1.2.3", "[fe80::1c2d:3e4f:5a6b:7c8d]", "[2001:db8::5]"}, nil},
		{"a TCP bridge: loopback stays", true, host,
			[]string{"169.254.0.0/16", "10.1.2.3"}, []string{"127.0.0.0/8", "[::1]", "127.0.0.1"}},
		{"no addresses known", false, nil, []string{"127.0.0.0/8", "169.254.0.0/16"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deniedNets(tt.tcpBridge, tt.addrs)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("deniedNets lacks %s: %q", w, got)
				}
			}
			for _, a := range tt.avoid {
				if slices.Contains(got, a) {
					t.Errorf("deniedNets has %s: %q", a, got)
				}
			}
		})
	}
}
