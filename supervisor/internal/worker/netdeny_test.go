package worker

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
)

// ipnet returns an interface address as net.InterfaceAddrs gives it.
func ipnet(t *testing.T, s string) net.Addr {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func TestDeniedNets(t *testing.T) {
	host := hostAddrs([]net.Addr{ipnet(t, "127.0.0.1/8"), ipnet(t, "::1/128"), ipnet(t, "10.1.2.3/24"),
		ipnet(t, "fe80::1c2d:3e4f:5a6b:7c8d/64"), ipnet(t, "2001:db8::5/64"), ipnet(t, "fd12:3456::7/64")})
	private := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}
	tests := []struct {
		name               string
		tcpBridge, private bool
		own                []netip.Addr
		want, avoid        []string
	}{
		{"a Unix socket bridge: loopback denied", false, true, host,
			append([]string{"127.0.0.0/8", "[::1]", "0.0.0.0/8", "169.254.0.0/16", "[fd00:ec2::254]", "10.1.2.3",
				"[fe80::1c2d:3e4f:5a6b:7c8d]", "[2001:db8::5]", "[fd12:3456::7]"}, private...), nil},
		{"a TCP bridge: loopback stays", true, true, host,
			[]string{"169.254.0.0/16", "10.1.2.3", "10.0.0.0/8"}, []string{"127.0.0.0/8", "[::1]", "127.0.0.1"}},
		{"private networks allowed: own addresses stay denied", false, false, host,
			[]string{"10.1.2.3", "[fd12:3456::7]", "169.254.0.0/16", "127.0.0.0/8"}, private},
		{"no addresses known", false, true, nil, append([]string{"127.0.0.0/8", "169.254.0.0/16"}, private...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deniedNets(tt.tcpBridge, tt.private, tt.own)
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
			if n := len(slices.Compact(slices.Sorted(slices.Values(got)))); n != len(got) {
				t.Errorf("deniedNets repeats entries: %q", got)
			}
		})
	}
}

func TestHostAddrs(t *testing.T) {
	got := hostAddrs([]net.Addr{ipnet(t, "192.168.1.5/24"), ipnet(t, "127.0.0.1/8"), ipnet(t, "::ffff:10.0.0.9/104"),
		ipnet(t, "10.1.2.3/24"), ipnet(t, "192.168.1.5/16"), &net.IPAddr{IP: net.IPv4(1, 2, 3, 4)}})
	want := []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.168.1.5")}
	if !slices.Equal(got, want) {
		t.Errorf("hostAddrs = %v, want %v (sorted, once each, no loopback, no unparsable entry)", got, want)
	}
}

// fakeAddrs is this host's addresses, as a test sets them.
type fakeAddrs struct {
	mu    sync.Mutex
	addrs []net.Addr
	err   error
	reads int
}

func (f *fakeAddrs) read() ([]net.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.addrs, f.err
}

func (f *fakeAddrs) set(addrs []net.Addr, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs, f.err = addrs, err
}

// TestAddrWatch: an address that comes while the server runs is seen
// within one poll, which makes the workers made before it stale; a failed
// read keeps the addresses known and makes no one stale.
func TestAddrWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lan := ipnet(t, "192.168.1.5/24")
		host := &fakeAddrs{addrs: []net.Addr{ipnet(t, "127.0.0.1/8"), lan}}
		var changes atomic.Int32
		a := NewAddrWatch(host.read, zaptest.NewLogger(t), func() { changes.Add(1) })
		own, gen := a.current()
		if want := []netip.Addr{netip.MustParseAddr("192.168.1.5")}; !slices.Equal(own, want) || gen == 0 {
			t.Fatalf("current = %v, %d; want %v and a generation", own, gen, want)
		}
		if a.Stale(gen) || a.Stale(0) {
			t.Fatal("stale before any change")
		}
		go a.Watch(t.Context(), AddrPoll)

		time.Sleep(3 * AddrPoll)
		synctest.Wait()
		if changes.Load() != 0 || a.Stale(gen) {
			t.Fatalf("%d changes, stale %v, with the same addresses", changes.Load(), a.Stale(gen))
		}

		// A VPN comes up.
		host.set([]net.Addr{lan, ipnet(t, "100.101.102.103/32"), ipnet(t, "fd7a:115c:a1e0::1/128")}, nil)
		time.Sleep(AddrPoll)
		synctest.Wait()
		if changes.Load() != 1 || !a.Stale(gen) {
			t.Fatalf("after an address came and a poll: %d changes, stale %v; want 1, true", changes.Load(), a.Stale(gen))
		}
		own, now := a.current()
		if len(own) != 3 || now == gen || a.Stale(now) || a.Stale(0) {
			t.Fatalf("current = %v, %d (was %d)", own, now, gen)
		}

		// The addresses cannot be read for a while: those known stay.
		host.set(nil, errors.New("netlink: no"))
		time.Sleep(2 * AddrPoll)
		synctest.Wait()
		if got, g := a.current(); len(got) != 3 || g != now || changes.Load() != 1 {
			t.Fatalf("after failed reads: %v, %d, %d changes; want the 3 known, %d, 1", got, g, changes.Load(), now)
		}
		host.set([]net.Addr{lan}, nil)
		time.Sleep(AddrPoll)
		synctest.Wait()
		if changes.Load() != 2 || !a.Stale(now) {
			t.Fatalf("after the VPN went: %d changes, stale %v; want 2, true", changes.Load(), a.Stale(now))
		}
	})
}
