package supervisor

import (
	"net"
	"net/netip"
	"slices"
)

// deniedAlways is what user code with the default network never reaches:
// this host (0.0.0.0/8 and :: mean it), link-local addresses, where clouds
// keep their metadata services (169.254.169.254 on AWS, Azure, GCP and
// Oracle; fd00:ec2::254 on AWS over IPv6; 100.100.100.200 on Alibaba),
// and multicast and broadcast. Deno 2.9 takes IPv4 networks in --deny-net
// but IPv6 addresses only one by one, so IPv6 link-local and the host's
// own IPv6 addresses are named singly.
var deniedAlways = []string{
	"0.0.0.0/8", "169.254.0.0/16", "100.100.100.200", "224.0.0.0/4", "255.255.255.255",
	"[::]", "[fd00:ec2::254]",
}

// deniedLoopback is the loopback interface, out of reach unless the bridge
// needs it (it listens on TCP where deno has no Unix sockets).
var deniedLoopback = []string{"127.0.0.0/8", "[::1]"}

// deniedNets returns the --deny-net list of workers whose code may reach
// the internet: the fixed list above, loopback unless tcpBridge, and each
// address of this host's interfaces (addrs, from net.InterfaceAddrs), so
// that services listening on them stay out of reach too.
func deniedNets(tcpBridge bool, addrs []net.Addr) []string {
	deny := slices.Clone(deniedAlways)
	if !tcpBridge {
		deny = append(deny, deniedLoopback...)
	}
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := prefix.Addr().WithZone("").Unmap()
		switch {
		case ip.IsLoopback():
			continue // covered above, or needed by a TCP bridge
		case ip.Is4():
			deny = append(deny, ip.String())
		default:
			deny = append(deny, "["+ip.String()+"]")
		}
	}
	slices.Sort(deny[len(deniedAlways):])
	return slices.Compact(deny)
}
