package worker

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// deniedAlways is what user code with the default network never reaches:
// this host (0.0.0.0/8 and :: mean it), link-local addresses, where clouds
// keep their metadata services (169.254.169.254 on AWS, Azure, GCP and
// Oracle; fd00:ec2::254 on AWS over IPv6; 100.100.100.200 on Alibaba),
// and multicast and broadcast. Deno 2.9 takes IPv4 networks in --deny-net
// but IPv6 addresses only one by one (it refuses [fe80::]/10 and every
// other spelling of an IPv6 network), so IPv6 link-local and the host's
// own IPv6 addresses are named singly.
var deniedAlways = []string{
	"0.0.0.0/8", "169.254.0.0/16", "100.100.100.200", "224.0.0.0/4", "255.255.255.255",
	"[::]", "[fd00:ec2::254]",
}

// deniedPrivate is the private networks, which browsers keep web pages from
// too: RFC 1918's, and the shared space of carrier-grade NAT (RFC 6598),
// where Tailscale and other overlay networks put their hosts. User code with
// the default network does not reach them unless Config.PrivateNetworks.
// The private IPv6 networks (unique local fc00::/7) cannot be denied as
// networks (see deniedAlways): of them only this host's own addresses are.
// Deno checks an IPv4-mapped IPv6 address (::ffff:10.0.0.1) as the IPv4
// address, so that spelling does not lead around them.
var deniedPrivate = []string{"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"}

// deniedLoopback is the loopback interface, out of reach unless the bridge
// needs it (it listens on TCP where deno has no Unix sockets).
var deniedLoopback = []string{"127.0.0.0/8", "[::1]"}

// deniedNets returns the --deny-net list of workers whose code may reach
// the internet: the fixed list above, the private networks when private,
// loopback unless tcpBridge, and each of this host's own addresses (own,
// from hostAddrs), so that services listening on them stay out of reach
// too.
func deniedNets(tcpBridge, private bool, own []netip.Addr) []string {
	deny := slices.Clone(deniedAlways)
	if private {
		deny = append(deny, deniedPrivate...)
	}
	if !tcpBridge {
		deny = append(deny, deniedLoopback...)
	}
	for _, ip := range own {
		if ip.Is4() {
			deny = append(deny, ip.String())
		} else {
			deny = append(deny, "["+ip.String()+"]")
		}
	}
	slices.Sort(deny[len(deniedAlways):])
	return slices.Compact(deny)
}

// hostAddrs returns this host's own addresses of addrs (from
// net.InterfaceAddrs), in order and each once, without their zones and
// without loopback, which deniedNets covers as a network, or leaves to a
// TCP bridge.
func hostAddrs(addrs []net.Addr) []netip.Addr {
	var own []netip.Addr
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := prefix.Addr().WithZone("").Unmap(); !ip.IsLoopback() {
			own = append(own, ip)
		}
	}
	slices.SortFunc(own, netip.Addr.Compare)
	return slices.Compact(own)
}

// AddrPoll is how often an addrWatch reads this host's addresses: an
// address that comes (a VPN, a container network, a new DHCP lease) is
// within reach of the warm workers made before it for at most this long.
const AddrPoll = 2 * time.Second

// AddrWatch keeps the deny lists of the default network current with this
// host's own addresses, which change as a laptop moves, a VPN comes up or a
// container network is made. A worker's --deny-net is fixed when it starts,
// so each worker is made with a generation of the addresses; once they
// change, changed is called, for the pool to replace the idle workers made
// with older ones (calls in progress keep theirs until they end).
//
// The addresses are read at every worker start and every addrPoll; there
// is no portable notification of a change.
type AddrWatch struct {
	read    func() ([]net.Addr, error) // net.InterfaceAddrs; tests give others
	log     *zap.Logger
	changed func() // called, without the lock held, after a change

	mu     sync.Mutex
	own    []netip.Addr // as last read
	gen    uint64       // counts the changes of own; 0 before the first read
	failed bool         // the last read failed (logged once)
}

// NewAddrWatch returns an addrWatch that reads with read and calls changed
// after the addresses change.
func NewAddrWatch(read func() ([]net.Addr, error), log *zap.Logger, changed func()) *AddrWatch {
	return &AddrWatch{read: read, log: log, changed: changed}
}

// current reads this host's addresses again and returns them with their
// generation, which a worker made from them keeps (see stale). If they
// cannot be read, those read before stay.
func (a *AddrWatch) current() ([]netip.Addr, uint64) {
	addrs, err := a.read()
	a.mu.Lock()
	if err != nil {
		if !a.failed {
			a.log.Warn("cannot list this host's addresses to keep them from user code; using those listed before", zap.Error(err))
		}
		a.failed = true
		own, gen := a.own, max(a.gen, 1)
		a.gen = gen
		a.mu.Unlock()
		return own, gen
	}
	a.failed = false
	own := hostAddrs(addrs)
	first := a.gen == 0
	moved := !first && !slices.Equal(own, a.own)
	if first || moved {
		a.own = own
		a.gen++
	}
	gen := a.gen
	a.mu.Unlock()
	if moved {
		a.log.Info("this host's addresses changed; replacing the idle workers, whose network permissions predate them",
			zap.Stringers("addresses", own))
		if a.changed != nil {
			a.changed()
		}
	}
	return own, gen
}

// Stale reports whether a worker made with the addresses of generation gen
// predates a change of them; 0 is a worker without a deny list of them.
func (a *AddrWatch) Stale(gen uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return gen != 0 && gen != a.gen
}

// Watch reads the addresses every interval until ctx ends.
func (a *AddrWatch) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.current()
		}
	}
}
